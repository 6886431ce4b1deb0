//! An interpreter's name (`python3`, `.venv/bin/python`) resolved to the executable it runs.

use std::path::{Path, PathBuf};

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
