//! Runs a `command` probe: an argv without a shell, in its own process group, killed as a
//! group when its deadline passes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

pub struct Finished {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    /// The deadline passed and the process group was killed.
    pub timed_out: bool,
}

pub fn run(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    deadline: Duration,
) -> std::io::Result<Finished> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty argv"))?;
    let done = crate::process::run(program, args, cwd, env, deadline)?;
    Ok(Finished {
        status: done.status,
        stdout: done.stdout.text,
        stderr: done.stderr.text,
        timed_out: done.timed_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let argv = [
            "sh".to_string(),
            "-c".into(),
            "echo out; echo err >&2; exit 3".into(),
        ];
        let env = BTreeMap::new();
        let done = run(&argv, Path::new("."), &env, Duration::from_secs(5)).unwrap();
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.stderr, "err\n");
        assert_eq!(done.status.and_then(|s| s.code()), Some(3));
        assert!(!done.timed_out);
    }

    #[test]
    fn a_missing_program_is_an_io_error() {
        let argv = ["/nonexistent/program".to_string()];
        assert!(run(
            &argv,
            Path::new("."),
            &BTreeMap::new(),
            Duration::from_secs(1)
        )
        .is_err());
    }
}
