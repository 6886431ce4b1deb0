//! Runs a `command` probe: an argv without a shell, in its own process group, killed as a
//! group when its deadline passes.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let pgid = child.id() as libc::pid_t;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let started = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() >= deadline {
            timed_out = true;
            kill_group(pgid);
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The leader is gone; whatever it left in its group goes with it, so the pipes close.
    kill_group(pgid);
    Ok(Finished {
        status: (!timed_out).then_some(status),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
    })
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: killpg only sends a signal; a group that no longer exists yields ESRCH.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
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
