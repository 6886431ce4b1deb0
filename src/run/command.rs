//! Runs a `command` probe: an argv without a shell, in its own process group, killed as a
//! group when its deadline passes or the run is cancelled.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use lessonprobe_probes::Cancel;

use crate::process::{self, Finished};

pub fn run(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    deadline: Duration,
    cancel: &Cancel,
) -> std::io::Result<Finished> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty argv"))?;
    process::run(program, args, cwd, env, deadline, cancel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_argv_or_a_missing_program_is_an_io_error() {
        let env = BTreeMap::new();
        let t = Duration::from_secs(1);
        let cancel = Cancel::new();
        assert!(run(&[], Path::new("."), &env, t, &cancel).is_err());
        let argv = ["/nonexistent/program".to_string()];
        assert!(run(&argv, Path::new("."), &env, t, &cancel).is_err());
    }
}
