//! Probe isolation whose cost follows what a probe touches, not the project's size: a pool of
//! working copies of each run-from folder, each copied once, checked out by one probe at a
//! time and reset afterwards by restoring only the entries that changed (docs/running.md).

mod tracker;
mod tree;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tracker::{Touched, Tracker};
use tree::{copy_into, copy_plain, remove, walk, Kind, Snapshot, Stamp};

pub use tree::{Layout, NOT_COPIED};

/// The environment variable that chooses how a reset finds what changed (for tests and
/// diagnosis): `watch` (the default) or `scan`, the fallback used where inotify is missing.
pub const MODE_VAR: &str = "LESSONPROBE_ISOLATION";

/// How a working copy's changes are found after a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// inotify watches say which entries were touched: cost follows what the probe touched.
    Watch,
    /// Every entry's stamp is compared with the snapshot: cost follows the project's size.
    Scan,
}

#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    #[error("{MODE_VAR}={0:?} is not a mode (write watch or scan)")]
    BadMode(String),
    #[error("cannot copy {} into a scratch folder: {source}", .from.display())]
    Copy { from: PathBuf, source: io::Error },
    #[error("cannot bring back what the step it continues left in {}: {source}", .into.display())]
    Continue { into: PathBuf, source: io::Error },
}

/// The mode this process runs with, read once.
pub fn mode() -> Result<Mode, IsolationError> {
    static MODE: OnceLock<Result<Mode, String>> = OnceLock::new();
    MODE.get_or_init(|| match std::env::var(MODE_VAR) {
        Err(_) => Ok(Mode::Watch),
        Ok(v) if v == "watch" || v.is_empty() => Ok(Mode::Watch),
        Ok(v) if v == "scan" => Ok(Mode::Scan),
        Ok(v) => Err(v),
    })
    .clone()
    .map_err(IsolationError::BadMode)
}

/// One working copy of a run-from folder with the snapshot of its entries taken when it was
/// made (or last restored).
struct Copy {
    layout: Layout,
    dir: tempfile::TempDir,
    cwd: PathBuf,
    snapshot: Snapshot,
    tracker: Option<Tracker>,
}

impl Copy {
    fn create(layout: &Layout, mode: Mode) -> Result<Copy, IsolationError> {
        let failed = |source| IsolationError::Copy {
            from: layout.source.clone(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix("lessonprobe-doc-")
            .tempdir()
            .map_err(failed)?;
        let name = layout
            .source
            .file_name()
            .map_or_else(|| PathBuf::from("project"), PathBuf::from);
        let cwd = dir.path().join(name);
        copy_into(layout, Path::new(""), &cwd, true).map_err(failed)?;
        let mut copy = Copy {
            layout: layout.clone(),
            dir,
            cwd,
            snapshot: Snapshot::new(),
            tracker: None,
        };
        if mode == Mode::Watch {
            match Tracker::new() {
                Ok(tracker) => copy.tracker = Some(tracker),
                Err(e) => tracing::warn!("inotify unavailable ({e}); scratch copies are compared entry by entry after each probe"),
            }
        }
        copy.record(Path::new("")).map_err(failed)?;
        Ok(copy)
    }

    /// Takes the stamps of `rel` and everything under it, and watches them.
    fn record(&mut self, rel: &Path) -> io::Result<()> {
        let mut found = Vec::new();
        walk(&self.cwd, rel, &mut |p, s| {
            found.push((p.to_owned(), s.clone()))
        })?;
        for (path, stamp) in found {
            if let Some(tracker) = &mut self.tracker {
                if let Err(e) = tracker.watch(&self.cwd, &path, &stamp.kind) {
                    // Out of watches (fs.inotify.max_user_watches): this copy scans instead.
                    tracing::warn!("cannot watch {}: {e}; this scratch copy is compared entry by entry after each probe", path.display());
                    self.tracker = None;
                }
            }
            self.snapshot.insert(path, stamp);
        }
        Ok(())
    }

    /// Every entry that differs from the snapshot, found by walking the whole copy.
    fn scan(&self, into: &mut BTreeSet<PathBuf>) -> io::Result<()> {
        let mut seen = std::collections::HashSet::new();
        walk(&self.cwd, Path::new(""), &mut |p, s| {
            if !self.snapshot.get(p).is_some_and(|was| was.unchanged(s)) {
                into.insert(p.to_owned());
            }
            seen.insert(p.to_owned());
        })?;
        into.extend(self.snapshot.keys().filter(|p| !seen.contains(*p)).cloned());
        Ok(())
    }

    /// The entries a probe may have changed since the last settle.
    fn touched(&mut self) -> io::Result<BTreeSet<PathBuf>> {
        let mut touched = Touched::default();
        match &mut self.tracker {
            Some(tracker) => tracker.drain(&mut touched)?,
            None => touched.rescan = true,
        }
        if touched.rescan {
            self.scan(&mut touched.paths)?;
        }
        Ok(touched.paths)
    }

    /// Brings the copy back to its snapshot, restoring only what differs; with `keep`, what the
    /// probe left is moved there first (for the steps that continue it).
    fn settle(&mut self, mut keep: Option<&mut Delta>) -> io::Result<()> {
        let touched = self.touched()?;
        let mut replaced: Vec<PathBuf> = Vec::new();
        for rel in touched {
            // Under a folder removed or restored whole.
            if replaced.iter().any(|r| rel.starts_with(r)) {
                continue;
            }
            let at = self.cwd.join(&rel);
            let now = Stamp::of(&at)?;
            let was = self.snapshot.get(&rel).cloned();
            match (was, now) {
                (None, None) => {}
                (None, Some(_)) => {
                    match keep.as_deref_mut() {
                        Some(delta) => delta.take(&self.cwd, &rel)?,
                        None => remove(&at)?,
                    }
                    replaced.push(rel);
                }
                (Some(was), None) => {
                    if let Some(delta) = keep.as_deref_mut() {
                        delta.changes.push((rel.clone(), Change::Removed));
                    }
                    self.restore(&rel, &was)?;
                    replaced.push(rel);
                }
                (Some(was), Some(now)) if was.unchanged(&now) => {}
                (Some(was), Some(now))
                    if was.kind == Kind::Dir && now.kind == Kind::Dir && was.ino == now.ino =>
                {
                    if let Some(delta) = keep.as_deref_mut() {
                        delta.changes.push((rel.clone(), Change::Mode(now.mode)));
                    }
                    set_mode(&at, was.mode)?;
                    self.refresh(&rel)?;
                }
                (Some(was), Some(_)) => {
                    match keep.as_deref_mut() {
                        Some(delta) => delta.take(&self.cwd, &rel)?,
                        None => remove(&at)?,
                    }
                    self.restore(&rel, &was)?;
                    replaced.push(rel);
                }
            }
        }
        // What the restoring itself set off is not a probe's doing.
        if let Some(tracker) = &mut self.tracker {
            tracker.drain(&mut Touched::default())?;
        }
        Ok(())
    }

    /// Puts back entry `rel` as the snapshot had it, from the pristine source.
    fn restore(&mut self, rel: &Path, was: &Stamp) -> io::Result<()> {
        let at = self.cwd.join(rel);
        match &was.kind {
            Kind::Symlink(target) => std::os::unix::fs::symlink(target, &at)?,
            Kind::File | Kind::Dir => copy_into(&self.layout, rel, &self.cwd, true)?,
            Kind::Other => return Ok(()),
        }
        if rel.as_os_str().is_empty() {
            self.snapshot.clear();
        }
        self.record(rel)
    }

    /// Takes the stamp of `rel` again (after the settle changed it).
    fn refresh(&mut self, rel: &Path) -> io::Result<()> {
        if let Some(stamp) = Stamp::of(&self.cwd.join(rel))? {
            self.snapshot.insert(rel.to_owned(), stamp);
        }
        Ok(())
    }
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The working copies not checked out, for every layout this process has used.
static POOL: Mutex<Vec<Copy>> = Mutex::new(Vec::new());

/// Removes every working copy not checked out. Called when a run ends: a copy left in the pool
/// would outlive the process as a temp folder.
pub fn release_all() {
    let copies = match POOL.lock() {
        Ok(mut pool) => std::mem::take(&mut *pool),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    drop(copies);
}

/// A working copy checked out by one probe; handed back, reset, when dropped.
pub struct Scratch {
    copy: Option<Copy>,
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch").field("cwd", &self.cwd()).finish()
    }
}

impl Scratch {
    /// A working copy of `layout` as pristine, or as the step `after` left it.
    pub fn checkout(layout: &Layout, after: Option<&Delta>) -> Result<Scratch, IsolationError> {
        let mode = mode()?;
        let pooled = POOL.lock().ok().and_then(|mut pool| {
            let at = pool.iter().position(|c| &c.layout == layout)?;
            Some(pool.swap_remove(at))
        });
        let copy = match pooled {
            Some(copy) => copy,
            None => Copy::create(layout, mode)?,
        };
        let scratch = Scratch { copy: Some(copy) };
        if let Some(delta) = after {
            let cwd = scratch.cwd().to_owned();
            delta
                .apply(&cwd)
                .map_err(|source| IsolationError::Continue { into: cwd, source })?;
        }
        Ok(scratch)
    }

    /// The folder the probe runs in.
    pub fn cwd(&self) -> &Path {
        self.copy
            .as_ref()
            .map_or(Path::new(""), |c| c.cwd.as_path())
    }

    /// What the probe left (for the steps that continue it); the copy goes back reset.
    pub fn keep(mut self) -> io::Result<Delta> {
        let mut delta = Delta {
            dir: tempfile::Builder::new()
                .prefix("lessonprobe-doc-left-")
                .tempdir()?,
            changes: Vec::new(),
        };
        if let Some(mut copy) = self.copy.take() {
            copy.settle(Some(&mut delta))?;
            give_back(copy);
        }
        Ok(delta)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(mut copy) = self.copy.take() {
            match copy.settle(None) {
                Ok(()) => give_back(copy),
                // A copy that cannot be reset is removed, never reused.
                Err(e) => {
                    tracing::warn!("scratch copy {} discarded: {e}", copy.dir.path().display())
                }
            }
        }
    }
}

fn give_back(copy: Copy) {
    if let Ok(mut pool) = POOL.lock() {
        pool.push(copy);
    }
}

/// One change a step made to its copy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    /// Made or replaced: the entry as the step left it is in the delta's folder.
    Put,
    Removed,
    /// A folder whose permissions changed.
    Mode(u32),
}

/// What a step changed in its copy, kept for the steps that continue it: the entries it made or
/// changed (moved out of its copy, so keeping them costs no copying), those it removed, and
/// folder permissions.
#[derive(Debug)]
pub struct Delta {
    dir: tempfile::TempDir,
    changes: Vec<(PathBuf, Change)>,
}

impl Delta {
    /// Moves entry `rel` of the copy at `cwd` into the delta.
    fn take(&mut self, cwd: &Path, rel: &Path) -> io::Result<()> {
        let to = self.dir.path().join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(cwd.join(rel), &to)?;
        self.changes.push((rel.to_owned(), Change::Put));
        Ok(())
    }

    /// Makes the pristine copy at `cwd` what the step left.
    fn apply(&self, cwd: &Path) -> io::Result<()> {
        for (rel, change) in &self.changes {
            let at = cwd.join(rel);
            match change {
                Change::Removed => remove(&at)?,
                Change::Put => {
                    remove(&at)?;
                    copy_plain(&self.dir.path().join(rel), &at, true)?;
                }
                Change::Mode(mode) => set_mode(&at, *mode)?,
            }
        }
        Ok(())
    }
}
