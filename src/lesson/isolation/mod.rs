//! Probe isolation whose cost follows what a probe touches, not the project's size: a pool of
//! working copies of each run-from folder, kept in the user's cache between runs and brought up
//! to the course by copying only what differs, checked out by one probe at a time and reset
//! afterwards by restoring only the entries that changed (docs/running.md).

mod kept;
mod stampfile;
mod tracker;
mod tree;

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use kept::{Deeper, Saved, Slot};
use tracker::{Touched, Tracker};
use tree::{beside, copy_into, copy_plain, remove, walk, Kind, Snapshot, Stamp};

pub use kept::{clean as clean_kept, root as kept_root, Kept, CAP_VAR, DEFAULT_CAP_MB};
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
    #[error("{var}={0:?} is not a size in megabytes (write a whole number; 0 keeps no working copy between runs)", var = kept::CAP_VAR)]
    BadCap(String),
    #[error("cannot copy {} into a working copy: {source}", .from.display())]
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

/// Where a working copy lives: a slot of the user's cache, kept for the next run, or a
/// temporary folder removed when the run ends (copies not kept, or a cache that cannot be used).
enum Home {
    Kept(Slot),
    /// Removed when dropped.
    Temporary {
        _dir: tempfile::TempDir,
    },
}

/// One working copy of a run-from folder with the snapshot of its entries taken when it was
/// made (or last restored), and the stamps of the course's entries it was brought up to.
struct WorkingCopy {
    layout: Layout,
    home: Home,
    cwd: PathBuf,
    snapshot: Snapshot,
    source: Stamps,
    tracker: Option<Tracker>,
    /// The course may have changed since the copy was brought up to it (a watch's next run).
    stale: bool,
    /// The save of the course's stamps and the copy's deeper entries ([`Deeper`]) that are
    /// still the copy's, `None` once either changed: they are saved again only then.
    saved_as: Option<u64>,
}

impl WorkingCopy {
    fn create(layout: &Layout, mode: Mode) -> Result<WorkingCopy, IsolationError> {
        let failed = |source| IsolationError::Copy {
            from: layout.source.clone(),
            source,
        };
        let name = layout
            .source
            .file_name()
            .map_or_else(|| PathBuf::from("project"), PathBuf::from);
        let before = tree::copied();
        let slot = match kept::cap()? {
            None => None,
            Some(_) => Slot::claim(layout)
                .inspect_err(|e| {
                    tracing::warn!(
                        "cannot keep working copies in {} ({e}); this run copies the project",
                        kept::root().display()
                    )
                })
                .ok(),
        };
        let (home, cwd) = match slot {
            Some(slot) => {
                let cwd = slot.tree(&name);
                (Home::Kept(slot), cwd)
            }
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("lessonprobe-doc-")
                    .tempdir()
                    .map_err(failed)?;
                let cwd = dir.path().join(&name);
                (Home::Temporary { _dir: dir }, cwd)
            }
        };
        let mut copy = WorkingCopy {
            layout: layout.clone(),
            home,
            cwd,
            snapshot: Snapshot::new(),
            source: Arc::default(),
            tracker: tracker(mode),
            stale: false,
            saved_as: None,
        };
        // The saved stamps are read, the copy checked against them and its watches added on
        // another thread while this one walks the course.
        let (home, cwd, watches) = (&copy.home, &copy.cwd, &mut copy.tracker);
        let (saved, now) = beside(
            || {
                let saved = trusted(home, cwd)?;
                if let Some(saved) = &saved {
                    let entries = saved.deeper.iter().chain(&saved.checked);
                    watch(watches, cwd, entries.map(|(p, s)| (p.as_path(), &s.kind)));
                }
                io::Result::Ok(saved)
            },
            || course_stamps(layout),
        );
        let (saved, now) = (saved.map_err(failed)?, now.map_err(failed)?);
        match saved {
            Some(saved) => {
                copy.source = Arc::new(saved.source);
                copy.saved_as = Some(saved.generation);
                copy.snapshot.extend(saved.deeper);
                copy.snapshot.extend(saved.checked);
                copy.catch_up_to(now).map_err(failed)?;
            }
            None => {
                if let Home::Kept(slot) = &copy.home {
                    slot.clear().map_err(failed)?;
                }
                // The course's stamps first: a file changed while it is copied is copied again
                // by the next run.
                copy.source = now;
                copy_into(layout, Path::new(""), &copy.cwd, true).map_err(failed)?;
                copy.record(Path::new("")).map_err(failed)?;
            }
        }
        copy.said_copied(before);
        Ok(copy)
    }

    /// Logs what bringing the copy up cost: the files this thread copied since `before`.
    fn said_copied(&self, before: usize) {
        tracing::info!(
            "working copy {}: brought up to the course, files copied: {}",
            self.cwd.display(),
            tree::copied() - before
        );
    }

    /// Brings the copy up to the course's current state, copying or removing only the entries
    /// whose stamps differ from those it was brought up to; the snapshot and the watches of
    /// what changed are taken again.
    fn catch_up(&mut self) -> io::Result<()> {
        let now = course_stamps(&self.layout)?;
        self.catch_up_to(now)
    }

    /// [`WorkingCopy::catch_up`] to the course's stamps `now`.
    fn catch_up_to(&mut self, now: Stamps) -> io::Result<()> {
        let was = Arc::clone(&self.source);
        // Entries copied or removed whole, and folders whose mode alone changed.
        let (mut replaced, mut moded): (Vec<PathBuf>, Vec<PathBuf>) = (Vec::new(), Vec::new());
        for (rel, was, now) in differences(&was, &now) {
            if replaced.iter().any(|r| rel.starts_with(r)) {
                continue;
            }
            let at = self.cwd.join(rel);
            let whole = match (was, now) {
                // A folder's entries are compared one by one: only its mode is its own.
                (Some(w), Some(n)) if w.kind == Kind::Dir && n.kind == Kind::Dir => {
                    set_mode(&at, n.mode)?;
                    false
                }
                (_, Some(_)) => {
                    remove(&at)?;
                    copy_into(&self.layout, rel, &self.cwd, true)?;
                    true
                }
                (_, None) => {
                    remove(&at)?;
                    true
                }
            };
            tracing::debug!(
                "working copy {}: refreshed {}",
                self.cwd.display(),
                rel.display()
            );
            if whole {
                replaced.push(rel.to_owned());
            } else {
                moded.push(rel.to_owned());
            }
            // The course's stamps saved with the copy are no longer these.
            self.saved_as = None;
        }
        for rel in replaced.iter().chain(&moded) {
            self.snapshot.retain(|p, _| !p.starts_with(rel));
            self.record(rel)?;
        }
        self.source = now;
        // What the refresh itself set off is not a probe's doing.
        if let Some(tracker) = &mut self.tracker {
            tracker.drain(&mut Touched::default())?;
        }
        Ok(())
    }

    /// Takes the stamps of `rel` and everything under it, and watches them.
    fn record(&mut self, rel: &Path) -> io::Result<()> {
        let mut found = Vec::new();
        walk(&self.cwd, rel, &mut |p, s| {
            found.push((p.to_owned(), s.clone()))
        })?;
        let entries = found.iter().map(|(p, s)| (p.as_path(), &s.kind));
        watch(&mut self.tracker, &self.cwd, entries);
        self.snapshot.extend(found);
        // The copy's entries saved with it are no longer these.
        self.saved_as = None;
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

/// The saved stamps of the kept copy of `home` at `cwd`, when it is what they say (`None`
/// otherwise, or when the copy is not kept); the copy is then marked as being changed
/// ([`Slot::begin`]).
fn trusted(home: &Home, cwd: &Path) -> io::Result<Option<Saved>> {
    let Home::Kept(slot) = home else {
        return Ok(None);
    };
    let saved = match slot.saved() {
        Some(saved) if trusts(cwd, &saved.checked)? => Some(saved),
        _ => None,
    };
    // Marked before anything in the copy changes.
    slot.begin()?;
    Ok(saved)
}

/// Whether a kept copy at `cwd` is what its saved stamps say, checked without walking it: every
/// folder and every top-level entry (`checked`) has exactly its saved stamp (times included, so
/// an entry made, removed or renamed in any folder is seen). What a run's probes changed was
/// reset before the stamps were saved, and a run that ended before saving left its mark.
fn trusts(cwd: &Path, checked: &[(PathBuf, Stamp)]) -> io::Result<bool> {
    for (rel, was) in checked {
        if Stamp::of(&cwd.join(rel))?.as_ref() != Some(was) {
            tracing::info!(
                "working copy {}: {} is not as saved: rebuilt",
                cwd.display(),
                rel.display()
            );
            return Ok(false);
        }
    }
    Ok(!checked.is_empty())
}

/// What differs between the course's stamps `was` (those a copy was brought up to) and `now`,
/// both in path order, found in one pass: each entry that differs, with its stamp then and now,
/// in path order (a folder before its entries).
fn differences<'a>(
    was: &'a [(PathBuf, Stamp)],
    now: &'a [(PathBuf, Stamp)],
) -> Vec<(&'a Path, Option<&'a Stamp>, Option<&'a Stamp>)> {
    use std::cmp::Ordering;
    let (mut w, mut n) = (0, 0);
    let mut differ = Vec::new();
    loop {
        let order = match (was.get(w), now.get(n)) {
            (None, None) => return differ,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(a), Some(b)) => tree::path_order(&a.0, &b.0),
        };
        match order {
            Ordering::Less => {
                differ.push((was[w].0.as_path(), Some(&was[w].1), None));
                w += 1;
            }
            Ordering::Greater => {
                differ.push((now[n].0.as_path(), None, Some(&now[n].1)));
                n += 1;
            }
            Ordering::Equal => {
                if !was[w].1.unchanged(&now[n].1) {
                    differ.push((now[n].0.as_path(), Some(&was[w].1), Some(&now[n].1)));
                }
                w += 1;
                n += 1;
            }
        }
    }
}

/// Watches `entries` of the copy at `cwd` with `tracker`; out of watches
/// (`fs.inotify.max_user_watches`), the tracker is dropped and the copy scanned instead.
fn watch<'a>(
    tracker: &mut Option<Tracker>,
    cwd: &Path,
    entries: impl IntoIterator<Item = (&'a Path, &'a Kind)>,
) {
    let Some(watching) = tracker else { return };
    if let Err(e) = watching.watch(cwd, entries) {
        tracing::warn!(
            "cannot watch {}: {e}; this working copy is compared entry by entry after each probe",
            cwd.display()
        );
        *tracker = None;
    }
}

/// The course's stamps of each layout, taken once per run and shared by its workers' copies.
static COURSE: Mutex<Vec<(Layout, Stamps)>> = Mutex::new(Vec::new());

/// The stamps of a course's entries, by path relative to its source.
type Stamps = Arc<Vec<(PathBuf, Stamp)>>;

/// The stamps of `layout`'s source as this run found them (the first worker to ask walks it,
/// the others wait for its walk).
fn course_stamps(layout: &Layout) -> io::Result<Stamps> {
    let mut taken = COURSE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, stamps)) = taken.iter().find(|(l, _)| l == layout) {
        return Ok(Arc::clone(stamps));
    }
    let stamps = Arc::new(layout.stamps()?);
    taken.push((layout.clone(), Arc::clone(&stamps)));
    Ok(stamps)
}

/// Forgets the course's stamps: the next run walks the course again.
fn forget_course() {
    COURSE.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// An inotify tracker in the watch mode (`None`, after a warning, where inotify is missing).
fn tracker(mode: Mode) -> Option<Tracker> {
    if mode != Mode::Watch {
        return None;
    }
    Tracker::new()
        .inspect_err(|e| tracing::warn!("inotify unavailable ({e}); working copies are compared entry by entry after each probe"))
        .ok()
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// The working copies not checked out, for every layout this process has used.
static POOL: Mutex<Vec<WorkingCopy>> = Mutex::new(Vec::new());

fn take_pool() -> Vec<WorkingCopy> {
    match POOL.lock() {
        Ok(mut pool) => std::mem::take(&mut *pool),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

/// Puts away every working copy not checked out. Called when a run ends, after its reports are
/// written: a kept copy's stamps are saved for the next run (no file is removed), the least
/// recently used kept copies over the cap are removed by a process of their own, and a
/// temporary copy is removed (none may outlive the process).
pub fn release_all() {
    // Side by side: saving a copy's stamps and taking down its watches (inotify removes each
    // one when the instance closes) take tens of milliseconds over 20,000 files.
    let copies = take_pool();
    // Only a run that kept a copy can have grown the cache: the others (a `replay`, a run of
    // no document probe) do not look through every kept copy on their way out.
    let kept = copies.iter().any(|c| matches!(c.home, Home::Kept(_)));
    std::thread::scope(|scope| {
        for copy in copies {
            let put_away = std::thread::Builder::new().spawn_scoped(scope, move || copy.put_away());
            if let Err(e) = put_away {
                // The copy was dropped unsaved, still marked: the next run rebuilds it.
                tracing::warn!("a working copy was not kept: {e}");
            }
        }
    });
    forget_course();
    if !kept {
        return;
    }
    if let Ok(Some(cap)) = kept::cap() {
        kept::evict(cap);
    }
}

/// Between a watch's runs: the copies stay, each brought up to the course at its next
/// checkout by what changed there.
pub fn between_runs() {
    if let Ok(mut pool) = POOL.lock() {
        for copy in pool.iter_mut() {
            copy.stale = true;
        }
    }
    forget_course();
}

impl WorkingCopy {
    /// Saves a kept copy's stamps (it is pristine: every probe's changes were reset), which
    /// lifts its mark of a reset under way; a temporary copy is removed. Folders' stamps are
    /// taken again: their times moved with the entries the probes made and the resets removed,
    /// and the next run trusts the copy by them ([`trusts`]). The course's stamps and the copy's
    /// deeper entries are written again only when they changed.
    fn put_away(mut self) {
        let Home::Kept(slot) = &self.home else {
            return;
        };
        for (rel, stamp) in self.snapshot.iter_mut() {
            if stamp.kind == Kind::Dir {
                match Stamp::of(&self.cwd.join(rel)) {
                    Ok(Some(now)) if stamp.unchanged(&now) => *stamp = now,
                    _ => {}
                }
            }
        }
        let entries = |checked: bool| {
            let snapshot = self.snapshot.iter().map(|(p, s)| (p.as_path(), s));
            snapshot.filter(move |(p, s)| kept::checked(p, s) == checked)
        };
        let deeper = match self.saved_as {
            Some(generation) => Deeper::Saved(generation),
            None => Deeper::Changed {
                source: &self.source,
                copy: entries(false).collect(),
            },
        };
        let checked: Vec<_> = entries(true).collect();
        if let Err(e) = slot.save(&checked, deeper) {
            tracing::warn!("working copy {} not kept: {e}", self.cwd.display());
        }
        if let Some(tracker) = self.tracker.take() {
            tracker.close_aside();
        }
    }
}

/// A working copy checked out by one probe; handed back, reset, when dropped.
pub struct Checkout {
    copy: Option<Box<WorkingCopy>>,
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout")
            .field("cwd", &self.cwd())
            .finish()
    }
}

impl Checkout {
    /// A working copy of `layout` as pristine, or as the step `after` left it.
    pub fn take(layout: &Layout, after: Option<&Delta>) -> Result<Checkout, IsolationError> {
        let mode = mode()?;
        let before = tree::copied();
        let pooled = POOL.lock().ok().and_then(|mut pool| {
            let at = pool.iter().position(|c| &c.layout == layout)?;
            Some(pool.swap_remove(at))
        });
        let copy = match pooled {
            Some(mut copy) if copy.stale => match copy.catch_up() {
                Ok(()) => {
                    copy.said_copied(before);
                    copy.stale = false;
                    copy
                }
                Err(e) => {
                    tracing::warn!("working copy {} discarded: {e}", copy.cwd.display());
                    drop(copy);
                    WorkingCopy::create(layout, mode)?
                }
            },
            Some(copy) => copy,
            None => WorkingCopy::create(layout, mode)?,
        };
        let checkout = Checkout {
            copy: Some(Box::new(copy)),
        };
        if let Some(delta) = after {
            let cwd = checkout.cwd().to_owned();
            delta
                .apply(&cwd)
                .map_err(|source| IsolationError::Continue { into: cwd, source })?;
        }
        Ok(checkout)
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

impl Drop for Checkout {
    fn drop(&mut self) {
        if let Some(mut copy) = self.copy.take() {
            match copy.settle(None) {
                Ok(()) => give_back(copy),
                // A copy that cannot be reset is removed, never reused.
                Err(e) => {
                    tracing::warn!("working copy {} discarded: {e}", copy.cwd.display())
                }
            }
        }
    }
}

fn give_back(copy: Box<WorkingCopy>) {
    if let Ok(mut pool) = POOL.lock() {
        pool.push(*copy);
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
