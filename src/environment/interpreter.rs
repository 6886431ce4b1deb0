//! Which interpreter a course's probes run with: a name resolved to an executable, and the rule
//! that runs a course declaring its environment in the cached one unless `--python` is given.

use std::path::{Path, PathBuf};

use super::provision::{self, Cached, ProvisionError};
use super::Declared;

/// The interpreter `python` names: a path, or a program found on PATH; `None` when there is
/// no such executable.
pub fn resolve(python: &str) -> Option<PathBuf> {
    let path = Path::new(python);
    if python.contains('/') {
        let abs = std::path::absolute(path).ok()?;
        return is_executable(&abs).then_some(abs);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(python))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether finding the cached environment may make it: a run and `lessonprobe env` make it,
/// `lessonprobe doctor` only looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Making {
    WhenMissing,
    Never,
}

/// The cached environment the course's probes run in, built from `base`: `None` when the
/// interpreter is `given` on the command line or the course declares no environment (the
/// interpreter stays as it is). With [`Making::Never`] it may not be complete.
pub fn cached(
    declared: Option<&Declared>,
    given: bool,
    base: &str,
    making: Making,
) -> Result<Option<Cached>, ProvisionError> {
    let Some(declared) = declared.filter(|_| !given) else {
        return Ok(None);
    };
    match making {
        Making::WhenMissing => provision::ensure(declared, base),
        Making::Never => provision::locate(declared, base),
    }
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreters_resolve_on_path_or_by_path() {
        assert!(resolve("sh").is_some());
        assert!(resolve("/bin/sh").is_some());
        assert!(resolve("no-such-python-3.99").is_none());
        assert!(resolve("./no/such/python").is_none());
    }
}
