//! The file changes `--watch` reacts to: folders watched recursively (notify, debounced by
//! notify-debouncer-full, so an editor's save of several events is one change), less what the
//! `.gitignore` of each watched folder ignores, editors' swap and backup files, the files the
//! run writes itself and the temporary folder (`TMPDIR`), wherever it is.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::event::{EventKind, MetadataKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, Debouncer, RecommendedCache};

/// How long the files must be quiet before a change is told: an editor's save, a `git
/// checkout`, a formatter run end up as one change.
pub const QUIET: Duration = Duration::from_millis(300);

/// How often the debouncer looks for changes that have been quiet for [`QUIET`]: a change is
/// told at most this long after it settled (the debouncer's default, a quarter of `QUIET`, adds
/// up to 75 ms to a rerun's start).
const TICK: Duration = Duration::from_millis(20);

/// Ignored in every watched folder, on top of its `.gitignore`.
const ALWAYS_IGNORED: &[&str] = &[
    ".git/",
    ".lessonprobe/",
    // A report's temporary file before it takes the report's name.
    ".lessonprobe-*",
    "__pycache__/",
    "*.pyc",
    // Editors' swap, backup and lock files, and the file vim writes to test a folder.
    "*.swp",
    "*.swx",
    "*~",
    ".#*",
    "4913",
];

#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    #[error("cannot watch for changes: {0}")]
    Start(notify::Error),
    #[error("{}: cannot watch for changes: {source}", .path.display())]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
    #[error("{}: {source}", .path.display())]
    Gitignore {
        path: PathBuf,
        source: ignore::Error,
    },
}

/// The folders watched, and the changes to them as they settle.
pub struct Changes {
    roots: Vec<PathBuf>,
    changed: Receiver<Vec<PathBuf>>,
    // Watching stops when this is dropped.
    _debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
}

impl Changes {
    /// Watches `folders` (a folder inside another is watched with it) for changes to anything
    /// but `own`, the files the run writes.
    pub fn watch(folders: &[PathBuf], own: &[PathBuf]) -> Result<Changes, ChangesError> {
        let roots = outermost(folders);
        let filter = Filter::new(&roots, own)?;
        let (tx, changed) = mpsc::channel();
        let mut debouncer = new_debouncer(QUIET, Some(TICK), move |result: DebounceEventResult| {
            let Ok(events) = result else { return };
            let mut paths: Vec<PathBuf> = events
                .iter()
                .filter(|e| is_change(&e.kind))
                .flat_map(|e| e.paths.iter())
                .filter(|p| !filter.ignores(p))
                .cloned()
                .collect();
            paths.sort();
            paths.dedup();
            if !paths.is_empty() {
                let _ = tx.send(paths);
            }
        })
        .map_err(ChangesError::Start)?;
        for root in &roots {
            debouncer
                .watch(root, RecursiveMode::Recursive)
                .map_err(|source| ChangesError::Watch {
                    path: root.clone(),
                    source,
                })?;
        }
        Ok(Changes {
            roots,
            changed,
            _debouncer: debouncer,
        })
    }

    /// The folders watched.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The paths of the next change, waiting at most `wait`; `None` when none came.
    pub fn next(&self, wait: Duration) -> Option<Vec<PathBuf>> {
        self.changed.recv_timeout(wait).ok()
    }
}

/// Whether an event changed a file: made, written, renamed, removed, its mode changed. Opening,
/// reading and closing a file unwritten are not changes, nor is a new access time.
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

/// The folders of `folders` that are inside no other, made absolute, each once.
fn outermost(folders: &[PathBuf]) -> Vec<PathBuf> {
    let absolute: Vec<PathBuf> = folders
        .iter()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()))
        .collect();
    let mut roots: Vec<PathBuf> = Vec::new();
    for folder in &absolute {
        let inside_another = absolute
            .iter()
            .any(|other| other != folder && folder.starts_with(other));
        if !inside_another && !roots.contains(folder) {
            roots.push(folder.clone());
        }
    }
    roots
}

/// What the run names its entries in the temporary folder with (working copies, what a step
/// left): never a change, even in a watch of the temporary folder itself.
const OWN_TEMPORARY: &str = "lessonprobe-";

/// What a change to a path is not told for.
struct Filter {
    roots: Vec<PathBuf>,
    /// Each root's `.gitignore` with [`ALWAYS_IGNORED`].
    ignores: Vec<Gitignore>,
    own: Vec<PathBuf>,
    /// The temporary folder as given and as resolved (notify names paths under a root as the
    /// root was given, which may go through a link).
    temporary: Vec<PathBuf>,
}

impl Filter {
    fn new(roots: &[PathBuf], own: &[PathBuf]) -> Result<Filter, ChangesError> {
        let mut ignores = Vec::new();
        for root in roots {
            let mut builder = GitignoreBuilder::new(root);
            let file = root.join(".gitignore");
            if file.is_file() {
                if let Some(source) = builder.add(&file) {
                    return Err(ChangesError::Gitignore { path: file, source });
                }
            }
            for line in ALWAYS_IGNORED {
                builder
                    .add_line(None, line)
                    .map_err(|source| ChangesError::Gitignore {
                        path: file.clone(),
                        source,
                    })?;
            }
            let ignore = builder.build().map_err(|source| ChangesError::Gitignore {
                path: file.clone(),
                source,
            })?;
            ignores.push(ignore);
        }
        let own = own
            .iter()
            .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            .collect();
        Ok(Filter {
            roots: roots.to_vec(),
            ignores,
            own,
            temporary: temporary_folder(),
        })
    }

    fn ignores(&self, path: &Path) -> bool {
        if self.is_temporary(path) {
            return true;
        }
        // The run's own files, and the folders it makes for them.
        if self
            .own
            .iter()
            .any(|own| path.starts_with(own) || own.starts_with(path))
        {
            return true;
        }
        self.ignores.iter().any(|ignore| {
            path.starts_with(ignore.path())
                && ignore
                    .matched_path_or_any_parents(path, path.is_dir())
                    .is_ignore()
        })
    }
}

impl Filter {
    /// Whether `path` is in the temporary folder, where probes and the run write as they go. A
    /// watch of a folder inside the temporary folder (a course under `/tmp`) ignores only the
    /// run's own entries there; anything else of it would be the course.
    fn is_temporary(&self, path: &Path) -> bool {
        self.temporary.iter().any(|tmp| {
            let Ok(below) = path.strip_prefix(tmp) else {
                return false;
            };
            let root_inside = self
                .roots
                .iter()
                .any(|root| path.starts_with(root) && root.starts_with(tmp));
            !root_inside
                || below.components().next().is_some_and(|first| {
                    first
                        .as_os_str()
                        .to_string_lossy()
                        .starts_with(OWN_TEMPORARY)
                })
        })
    }
}

/// `TMPDIR` (or the system's default), absolute and resolved, each once.
fn temporary_folder() -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let mut forms = vec![std::path::absolute(&tmp).unwrap_or_else(|_| tmp.clone())];
    if let Ok(resolved) = tmp.canonicalize() {
        if !forms.contains(&resolved) {
            forms.push(resolved);
        }
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_inside_another_is_watched_with_it() {
        let roots = outermost(&[
            PathBuf::from("/c/course"),
            PathBuf::from("/c"),
            PathBuf::from("/d"),
            PathBuf::from("/d"),
        ]);
        assert_eq!(roots, [PathBuf::from("/c"), PathBuf::from("/d")]);
    }

    #[test]
    fn the_gitignore_editors_files_and_the_runs_own_reports_are_not_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        let filter = Filter::new(
            std::slice::from_ref(&root),
            &[root.join("reports/lesson-30.xml")],
        )
        .unwrap();
        for ignored in [
            "target/debug/app",
            "run.log",
            ".git/index",
            "lessons/.30.md.swp",
            "lessons/30.md~",
            "src/__pycache__/app.cpython-312.pyc",
            ".lessonprobe/last-failed.json",
            "reports/lesson-30.xml",
            "reports/.lessonprobe-Ab12Cd",
            "reports",
        ] {
            assert!(filter.ignores(&root.join(ignored)), "{ignored}");
        }
        for told in ["lessons/30.md", "src/app.py", "reports/notes.md", "logs"] {
            assert!(!filter.ignores(&root.join(told)), "{told}");
        }
    }

    #[test]
    fn the_temporary_folder_is_no_change_and_in_a_watch_of_it_only_the_runs_entries_are() {
        let dir = tempfile::tempdir().unwrap();
        let course = dir.path().join("course");
        let mut filter = Filter::new(std::slice::from_ref(&course), &[]).unwrap();
        filter.temporary = vec![course.join("tmp")];
        for ignored in [
            "tmp/lessonprobe-doc-Ab12/project/a.txt",
            "tmp/tmp.x1",
            "tmp",
        ] {
            assert!(filter.ignores(&course.join(ignored)), "{ignored}");
        }
        assert!(!filter.ignores(&course.join("project/a.txt")));

        // A watch started in the temporary folder, or in a folder inside it: the student's
        // files there are changes, the run's own entries are not.
        for tmp in [course.clone(), dir.path().to_owned()] {
            let mut filter = Filter::new(std::slice::from_ref(&course), &[]).unwrap();
            filter.temporary = vec![tmp.clone()];
            assert!(filter.ignores(&tmp.join("lessonprobe-doc-Ab12/a.txt")));
            assert!(!filter.ignores(&course.join("project/a.txt")));
            assert!(!filter.ignores(&course.join("notes.txt")));
        }
    }
}
