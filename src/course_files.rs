//! A course's own files, below the lessons and its environment alike: its settings file, the
//! rule that keeps a path named there inside the course, and how such a path is shown.

use std::path::{Component, Path, PathBuf};

/// The course's settings file, at its root.
pub const CONFIG_FILE: &str = "lessonprobe.toml";

/// `shown/relative` without a leading `./`.
pub fn show(shown: &Path, relative: &Path) -> PathBuf {
    let joined = shown.join(relative);
    match joined.strip_prefix(".") {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.to_owned(),
        _ => joined,
    }
}

/// A relative path that stays inside its folder: no root, no `..`.
pub fn is_inside(path: &Path) -> bool {
    !path.as_os_str().is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside() {
        assert!(is_inside(Path::new("a/b.py")));
        assert!(is_inside(Path::new("./a.py")));
        assert!(!is_inside(Path::new("../x")));
        assert!(!is_inside(Path::new("a/../../x")));
        assert!(!is_inside(Path::new("/etc/passwd")));
        assert!(!is_inside(Path::new("")));
    }
}
