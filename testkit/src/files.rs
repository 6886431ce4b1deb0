//! Folders for tests: a temporary working folder, the repository, copies and snapshots of trees.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::test::Test;

/// The workspace root: the repository's manifests, sample course and JUnit schemas.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the testkit lives inside the workspace")
        .to_owned()
}

/// A temporary folder of one test, removed when dropped; derefs to its path.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        Dir(tempfile::tempdir().expect("create a temporary folder"))
    }

    /// A folder a run takes for the repository: each entry at the top of the repository (its
    /// manifests, sample course, scripts, …) linked, but none of what runs write there
    /// (`reports/`, the `.lessonprobe/` state) nor git's and cargo's folders. A test run "in
    /// the repository" runs here, so the suite leaves nothing in the checkout.
    pub fn like_repo() -> Dir {
        let dir = Dir::new();
        let root = repo();
        let entries =
            std::fs::read_dir(&root).unwrap_or_else(|e| panic!("read {}: {e}", root.display()));
        for entry in entries {
            let name = entry.unwrap().file_name();
            if [".git", "target", "reports", ".lessonprobe"].contains(&name.to_str().unwrap_or(""))
            {
                continue;
            }
            let link = dir.join(&name);
            std::os::unix::fs::symlink(root.join(&name), &link)
                .unwrap_or_else(|e| panic!("link {}: {e}", link.display()));
        }
        dir
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// The folder itself, removed when the returned value is dropped.
    pub(crate) fn into_temp_dir(self) -> tempfile::TempDir {
        self.0
    }

    /// Writes `contents` to `rel` inside the folder, making parent folders; returns its path.
    #[track_caller]
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    #[track_caller]
    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        let path = self.join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
    }

    /// Replaces `from` (which must occur) with `to` in the file `rel`; returns the text before.
    #[track_caller]
    pub fn edit(&self, rel: impl AsRef<Path>, from: &str, to: &str) -> String {
        let rel = rel.as_ref();
        let text = self.read(rel);
        assert!(text.contains(from), "{} has no {from:?}", rel.display());
        self.write(rel, text.replacen(from, to, 1));
        text
    }

    /// The built `lessonprobe`, run in this folder.
    pub fn lessonprobe(&self) -> Test {
        crate::lessonprobe().current_dir(self.path())
    }
}

impl Default for Dir {
    fn default() -> Dir {
        Dir::new()
    }
}

impl Deref for Dir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.path()
    }
}

impl AsRef<Path> for Dir {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

/// Copies the repository's manifests into `dir/checkpoints` for a test to alter.
#[track_caller]
pub fn copy_manifests(dir: &Path) -> PathBuf {
    let to = dir.join("checkpoints");
    copy_dir(&repo().join("checkpoints"), &to);
    to
}

/// A manifest of lesson 40 with `n` command probes (`P-00000` …, each `echo i`), for loading
/// at scale.
pub fn large_manifest(n: usize) -> String {
    let mut text = String::from("[checkpoint]\nlesson = 40\ntitle = \"large\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "\n[[probe]]\nid = \"P-{i:05}\"\nname = \"probe-{i}\"\nclaim = \"claim {i}\"\nkind = \"command\"\nargv = [\"echo\", \"{i}\"]\nexpect = \"{i}\"\ntimeout = \"5s\"\n"
        ));
    }
    text
}

/// A copy of a folder tree (without Python's `__pycache__`), for a test to alter.
#[track_caller]
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    let entries =
        std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()));
    for entry in entries {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy to {}: {e}", target.display()));
        }
    }
}

/// Waits until `file` exists, at most `limit`, then a moment more for its writer to finish it.
#[track_caller]
pub fn wait_for(file: &Path, limit: std::time::Duration) {
    let started = std::time::Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed() < limit,
            "{} did not appear within {limit:?}",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
}

/// Every file under `dir` with its bytes: what a run must leave unchanged.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}
