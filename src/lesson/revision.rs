//! A course as of a git revision (`--rev`), extracted with `git archive` into a temporary
//! folder so the checkout is never touched, and the files changed since one (`--changed-since`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::CourseError;

/// The course's files at one revision, removed when dropped.
#[derive(Debug)]
pub struct Snapshot {
    _dir: tempfile::TempDir,
    /// The course folder inside the snapshot.
    pub root: PathBuf,
    /// The revision as git resolved it.
    pub commit: String,
}

impl Snapshot {
    /// The course folder `course` (inside a git work tree) as of `rev`.
    pub fn extract(course: &Path, rev: &str) -> Result<Snapshot, CourseError> {
        let commit = git(
            course,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map_err(|e| {
            CourseError::Revision(format!(
                "--rev {rev:?} is not a revision of the course at {}{}",
                course.display(),
                e.map_or_else(String::new, |e| format!(": {e}"))
            ))
        })?;
        let dir = tempfile::Builder::new()
            .prefix("lessonprobe-rev-")
            .tempdir()
            .map_err(|e| CourseError::io(Path::new("(temporary folder)"), e))?;
        // Run from the course folder, `git archive COMMIT` holds that folder only, with paths
        // relative to it, whether the course is the repository's root or a folder inside it.
        let mut archive = Command::new("git")
            .arg("-C")
            .arg(course)
            .args(["archive", "--format=tar", &commit])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CourseError::Revision(format!("cannot run git: {e}")))?;
        let tar_in = archive
            .stdout
            .take()
            .ok_or_else(|| CourseError::Revision("git archive gave no output".into()))?;
        let tar = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(dir.path())
            .stdin(tar_in)
            .output()
            .map_err(|e| CourseError::Revision(format!("cannot run tar: {e}")))?;
        let archived = archive
            .wait_with_output()
            .map_err(|e| CourseError::Revision(format!("git archive: {e}")))?;
        if !archived.status.success() || !tar.status.success() {
            return Err(CourseError::Revision(format!(
                "cannot extract {rev} of {}: {}{}",
                course.display(),
                String::from_utf8_lossy(&archived.stderr).trim(),
                String::from_utf8_lossy(&tar.stderr).trim()
            )));
        }
        let empty = std::fs::read_dir(dir.path()).map_or(true, |mut d| d.next().is_none());
        if empty {
            return Err(CourseError::Revision(format!(
                "{rev} has no files in the course folder {}",
                course.display()
            )));
        }
        Ok(Snapshot {
            root: dir.path().to_owned(),
            _dir: dir,
            commit,
        })
    }
}

/// Files of the course folder that differ from `rev` (committed, staged or not, and new
/// untracked files), relative to the course folder.
pub fn changed_files(course: &Path, rev: &str) -> Result<BTreeSet<PathBuf>, CourseError> {
    let fail = |e: Option<String>| {
        CourseError::Revision(format!(
            "--changed-since {rev:?}: {}{}",
            course.display(),
            e.map_or_else(String::new, |e| format!(": {e}"))
        ))
    };
    let changed = git(
        course,
        &[
            "diff",
            "--name-only",
            "--no-renames",
            "--relative",
            rev,
            "--",
        ],
    )
    .map_err(fail)?;
    let untracked = git(course, &["ls-files", "--others", "--exclude-standard"]).map_err(fail)?;
    Ok(changed
        .lines()
        .chain(untracked.lines())
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect())
}

/// `git -C dir ARGS` standard output, trimmed; `Err(stderr)` when git fails.
fn git(dir: &Path, args: &[&str]) -> Result<String, Option<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Some(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err((!err.is_empty()).then_some(err));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
