//! A project folder's entries as the isolation sees them: the stamp of each entry (what any
//! change to it alters), copies that reflink where the filesystem can, and walks.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Folders never copied into a working copy: version control, caches, virtual environments.
pub const NOT_COPIED: &[&str] = &[
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    "node_modules",
];

/// What a project folder is made of: where its pristine files are, and which of its paths are
/// linked rather than copied (the course's `shared` folders).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub source: PathBuf,
    /// Paths relative to `source`.
    pub shared: Vec<PathBuf>,
}

impl Layout {
    /// Whether the entry `rel` (a folder when `is_dir`) is left out of a copy: a folder of
    /// [`NOT_COPIED`] that is not shared.
    fn leaves_out(&self, rel: &Path, is_dir: bool) -> bool {
        is_dir
            && !self.shared.iter().any(|s| s == rel)
            && rel
                .file_name()
                .is_some_and(|n| NOT_COPIED.contains(&n.to_string_lossy().as_ref()))
    }

    /// The stamps of every entry of the source a copy is made of (shared paths, which a copy
    /// links, and entries never copied are left out), by path relative to the source, in path
    /// order (a folder right before its entries, each folder's entries by name). The top
    /// folder's folders are walked on [`WALKERS`] threads at once, each entering every folder it
    /// walks ([`entering`]) and naming its entries by their names alone: over 20,000 files this
    /// walk is the longest step before a second run's first probe, which waits for it.
    pub fn stamps(&self) -> io::Result<Vec<(PathBuf, Stamp)>> {
        let source = std::path::absolute(&self.source)?;
        let top = match Stamp::of(&source)? {
            Some(top) if top.kind != Kind::Other => top,
            _ => return Ok(Vec::new()),
        };
        if top.kind != Kind::Dir {
            return Ok(vec![(PathBuf::new(), top)]);
        }
        let entries = self.entries_of(&source, Path::new(""), false)?;
        let folders: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].1.kind == Kind::Dir)
            .collect();
        let next = AtomicUsize::new(0);
        // Takes the next folder no thread took until none is left: what is under each.
        let walk = |inside: bool| {
            let mut walked = Vec::new();
            while let Some(&at) = folders.get(next.fetch_add(1, Ordering::Relaxed)) {
                let mut found = Vec::new();
                let under = self.stamps_under(&source, &entries[at].0, inside, &mut found);
                walked.push((at, under.map(|()| found)));
            }
            walked
        };
        let mut below: Vec<Option<io::Result<Stamps>>> = entries.iter().map(|_| None).collect();
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..WALKERS)
                .filter_map(|_| own_folder(scope, walk))
                .collect();
            let joined = threads.into_iter().map(|t| match t.join() {
                Ok(walked) => walked,
                Err(panic) => std::panic::resume_unwind(panic),
            });
            // What no thread could take (none started) is walked here, by whole paths.
            for (at, under) in joined.flatten().chain(walk(false)) {
                below[at] = Some(under);
            }
        });
        let mut found = vec![(PathBuf::new(), top)];
        for ((child, stamp), under) in entries.into_iter().zip(below) {
            found.push((child, stamp));
            if let Some(under) = under {
                found.extend(under?);
            }
        }
        Ok(found)
    }

    /// [`Layout::stamps`] on this thread alone; with `inside`, this thread's current folder is
    /// its own and it enters each folder (a folder it cannot enter has its entries named by
    /// their whole paths).
    #[cfg(test)]
    fn stamps_from(&self, inside: bool) -> io::Result<Vec<(PathBuf, Stamp)>> {
        let mut found = Vec::new();
        // Whole paths stay right once this thread has entered a folder.
        let source = std::path::absolute(&self.source)?;
        let Some(top) = Stamp::of(&source)? else {
            return Ok(found);
        };
        let is_dir = top.kind == Kind::Dir;
        if top.kind != Kind::Other {
            found.push((PathBuf::new(), top));
        }
        if is_dir {
            self.stamps_under(&source, Path::new(""), inside, &mut found)?;
        }
        Ok(found)
    }

    /// Adds to `found` the stamps of the entries under `folder` of `source`, in path order.
    fn stamps_under(
        &self,
        source: &Path,
        folder: &Path,
        inside: bool,
        found: &mut Vec<(PathBuf, Stamp)>,
    ) -> io::Result<()> {
        for (child, stamp) in self.entries_of(source, folder, inside)? {
            if stamp.kind == Kind::Dir {
                let below = child.clone();
                found.push((child, stamp));
                self.stamps_under(source, &below, inside, found)?;
            } else {
                found.push((child, stamp));
            }
        }
        Ok(())
    }

    /// The entries of `folder` of `source` a copy is made of, with their stamps, by name; with
    /// `inside`, taken from inside the folder.
    fn entries_of(
        &self,
        source: &Path,
        folder: &Path,
        inside: bool,
    ) -> io::Result<Vec<(PathBuf, Stamp)>> {
        let at = source.join(folder);
        let entered = inside && std::env::set_current_dir(&at).is_ok();
        let mut entries = Vec::new();
        for entry in fs::read_dir(if entered { Path::new(".") } else { &at })? {
            let entry = entry?;
            let name = entry.file_name();
            let child = folder.join(&name);
            if self.shared.contains(&child) || self.leaves_out(&child, entry.file_type()?.is_dir())
            {
                continue;
            }
            let path = if entered {
                PathBuf::from(&name)
            } else {
                at.join(&name)
            };
            match Stamp::of(&path)? {
                Some(stamp) if stamp.kind != Kind::Other => entries.push((child, stamp)),
                _ => {}
            }
        }
        entries.sort_unstable_by(|a, b| path_order(&a.0, &b.0));
        Ok(entries)
    }
}

/// How many threads walk a course at once ([`Layout::stamps`]): one a core here.
const WALKERS: usize = 2;

/// Entries' stamps by path relative to a folder, in path order.
type Stamps = Vec<(PathBuf, Stamp)>;

/// Runs `work` on a thread of its own whose current folder is its own (`unshare(CLONE_FS)`),
/// so that it may enter folders and name their entries by their names alone: the kernel's
/// lookup of a long path is most of the cost of a stat or an inotify watch. `work` is told
/// whether the folder is its own (when not, it must use whole paths); `None` when no thread
/// could be started or it panicked.
pub fn entering<T: Send>(work: impl FnOnce(bool) -> T + Send) -> Option<T> {
    std::thread::scope(|scope| own_folder(scope, work)?.join().ok())
}

/// Starts `work` on a thread of `scope` whose current folder is its own ([`entering`]);
/// `None` when no thread could be started.
fn own_folder<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    work: impl FnOnce(bool) -> T + Send + 'scope,
) -> Option<std::thread::ScopedJoinHandle<'scope, T>> {
    std::thread::Builder::new()
        .spawn_scoped(scope, || {
            // SAFETY: unshare takes no pointer; CLONE_FS gives only this thread a copy of the
            // process's current folder, root and umask.
            let own = unsafe { libc::unshare(libc::CLONE_FS) } == 0;
            work(own)
        })
        .ok()
}

/// The order of [`Path`]'s `cmp` (component by component) for paths as a walk names them
/// (relative, no `.`, `..`, doubled or trailing `/`), found on their bytes: at the first byte
/// where they differ, the `/` that ends one's component comes first. Several times faster than
/// `cmp`, which splits both paths into components.
pub fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    match a.iter().zip(b).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) if a[i] == b'/' => std::cmp::Ordering::Less,
        Some(i) if b[i] == b'/' => std::cmp::Ordering::Greater,
        Some(i) => a[i].cmp(&b[i]),
    }
}

/// Runs `other` on a thread of its own while this one runs `here`, and gives both results; both
/// run here, one after the other, when no thread can be started. A panic of `other` goes on here.
pub fn beside<A: Send, B>(other: impl FnOnce() -> A + Send, here: impl FnOnce() -> B) -> (A, B) {
    let other = std::sync::Mutex::new(Some(other));
    let take = || other.lock().ok().and_then(|mut o| o.take());
    std::thread::scope(|scope| {
        let started = std::thread::Builder::new().spawn_scoped(scope, || take().map(|o| o()));
        let then = here();
        let done = match started.map(|t| t.join()) {
            Ok(Ok(done)) => done,
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => None,
        };
        match done.or_else(|| take().map(|o| o())) {
            Some(done) => (done, then),
            None => unreachable!("`other` is taken once, by the thread or here"),
        }
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink(PathBuf),
    /// A FIFO, socket or device: never copied, removed when a probe makes one.
    Other,
}

/// What a change to an entry alters. The inode and ctime catch a rewrite in place that kept
/// size and mtime (`touch -d`), and a write through a hard link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub kind: Kind,
    pub ino: u64,
    pub mode: u32,
    pub size: u64,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of `path` (not followed), `None` when nothing is there.
    pub fn of(path: &Path) -> io::Result<Option<Stamp>> {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            Kind::Symlink(fs::read_link(path)?)
        } else if ft.is_dir() {
            Kind::Dir
        } else if ft.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        Ok(Some(Stamp {
            kind,
            ino: meta.ino(),
            mode: meta.mode() & 0o7777,
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }))
    }

    /// Whether `now` is the entry this stamp was taken of, unchanged. A folder's times move
    /// with its entries, which are compared one by one, so a folder compares its inode and mode.
    pub fn unchanged(&self, now: &Stamp) -> bool {
        match self.kind {
            Kind::Dir => now.kind == Kind::Dir && self.ino == now.ino && self.mode == now.mode,
            _ => self == now,
        }
    }
}

/// NotFound, or a path through something that is no longer a folder.
pub fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR)
}

thread_local! {
    /// Files copied by this thread so far: what the log says bringing a copy up cost (a copy is
    /// brought up on one thread, while other workers copy on theirs).
    static COPIED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many files this thread has copied so far.
pub fn copied() -> usize {
    COPIED.get()
}

/// Whether reflinks are still worth trying: cleared at the first filesystem that refuses one.
static REFLINKS: AtomicBool = AtomicBool::new(true);

/// Copies the file `from` to the new file `to` with permission bits `mode`: a reflink
/// (`FICLONE`) where the filesystem shares blocks, a byte copy otherwise. `reflink` false
/// forces the byte copy.
pub fn clone_file(from: &Path, to: &Path, mode: u32, reflink: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut src = File::open(from)?;
    let mut dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)?;
    let mut cloned = false;
    if reflink && REFLINKS.load(Ordering::Relaxed) {
        // SAFETY: both descriptors are open for the duration of the call; FICLONE takes the
        // source descriptor by value.
        let done = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
        if done == 0 {
            cloned = true;
        } else {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL | libc::ENOTTY) => {
                    REFLINKS.store(false, Ordering::Relaxed);
                }
                _ => return Err(err),
            }
        }
    }
    if !cloned {
        io::copy(&mut src, &mut dst)?;
    }
    COPIED.set(COPIED.get() + 1);
    // The process's umask narrowed the mode given at creation.
    dst.set_permissions(fs::Permissions::from_mode(mode))
}

/// Copies `rel` of `layout`'s source into `root/rel`: folders made, files cloned, symbolic
/// links kept as links, shared paths linked to the source, the folders of [`NOT_COPIED`]
/// left out, FIFOs and devices skipped.
pub fn copy_into(layout: &Layout, rel: &Path, root: &Path, reflink: bool) -> io::Result<()> {
    let from = layout.source.join(rel);
    let to = root.join(rel);
    if layout.shared.iter().any(|s| s == rel) {
        return std::os::unix::fs::symlink(&from, &to);
    }
    let meta = fs::symlink_metadata(&from)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(&from)?, &to)
    } else if ft.is_dir() {
        match fs::create_dir(&to) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && rel.as_os_str().is_empty() => {}
            other => other?,
        }
        for entry in fs::read_dir(&from)? {
            let entry = entry?;
            let name = entry.file_name();
            if layout.leaves_out(&rel.join(&name), entry.file_type()?.is_dir()) {
                continue;
            }
            copy_into(layout, &rel.join(name), root, reflink)?;
        }
        fs::set_permissions(&to, fs::Permissions::from_mode(meta.mode() & 0o7777))
    } else if ft.is_file() {
        clone_file(&from, &to, meta.mode() & 0o7777, reflink)
    } else {
        Ok(())
    }
}

/// Copies the tree at `from` to `to` as it is (no folder left out): what a step left, into the
/// copy of a step that continues it.
pub fn copy_plain(from: &Path, to: &Path, reflink: bool) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if ft.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let name = entry?.file_name();
            copy_plain(&from.join(&name), &to.join(&name), reflink)?;
        }
        fs::set_permissions(to, fs::Permissions::from_mode(meta.mode() & 0o7777))
    } else if ft.is_file() {
        clone_file(from, to, meta.mode() & 0o7777, reflink)
    } else {
        Ok(())
    }
}

/// Removes whatever is at `path` (a folder with its contents); nothing there is not an error.
pub fn remove(path: &Path) -> io::Result<()> {
    let result = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            // A probe may have taken its own write permission away from a folder.
            make_writable(path);
            fs::remove_dir_all(path)
        }
        Ok(_) => fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if is_gone(&e) => Ok(()),
        other => other,
    }
}

/// Gives the owner write and search permission on every folder under `dir`, so it can be
/// emptied.
fn make_writable(dir: &Path) {
    if let Ok(meta) = fs::symlink_metadata(dir) {
        if meta.is_dir() {
            let mode = meta.mode() & 0o7777;
            if mode & 0o700 != 0o700 {
                let _ = fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700));
            }
            if let Ok(entries) = fs::read_dir(dir) {
                for entry in entries.flatten() {
                    make_writable(&entry.path());
                }
            }
        }
    }
}

/// Every entry under `root/rel` (`rel` included), not following links: its path relative to
/// `root` and its stamp.
pub fn walk(root: &Path, rel: &Path, visit: &mut dyn FnMut(&Path, &Stamp)) -> io::Result<()> {
    let Some(stamp) = Stamp::of(&root.join(rel))? else {
        return Ok(());
    };
    visit(rel, &stamp);
    if stamp.kind == Kind::Dir {
        for entry in fs::read_dir(root.join(rel))? {
            walk(root, &rel.join(entry?.file_name()), visit)?;
        }
    }
    Ok(())
}

/// The stamps of a tree, by path relative to its root.
pub type Snapshot = HashMap<PathBuf, Stamp>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_keep_links_skip_caches_and_link_shared_folders() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("pkg/__pycache__")).unwrap();
        std::fs::create_dir_all(from.path().join(".venv/bin")).unwrap();
        std::fs::create_dir_all(from.path().join("node_modules/x")).unwrap();
        std::fs::write(from.path().join("pkg/a.py"), "x").unwrap();
        std::fs::write(from.path().join("pkg/__pycache__/a.pyc"), "x").unwrap();
        std::os::unix::fs::symlink("pkg/a.py", from.path().join("link.py")).unwrap();
        let layout = Layout {
            source: from.path().to_owned(),
            shared: vec![PathBuf::from(".venv")],
        };
        let to = tempfile::tempdir().unwrap();
        let root = to.path().join("p");
        copy_into(&layout, Path::new(""), &root, true).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("pkg/a.py")).unwrap(), "x");
        assert!(!root.join("pkg/__pycache__").exists());
        assert!(!root.join("node_modules").exists());
        assert_eq!(
            std::fs::read_link(root.join("link.py")).unwrap(),
            PathBuf::from("pkg/a.py")
        );
        assert_eq!(
            std::fs::read_link(root.join(".venv")).unwrap(),
            from.path().join(".venv")
        );
        // A copy shares no inode with its source: a write in place cannot reach the course.
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_ne!(
            ino(&root.join("pkg/a.py")),
            ino(&from.path().join("pkg/a.py"))
        );
    }

    #[test]
    fn the_course_walked_from_inside_its_folders_has_the_stamps_of_whole_paths() {
        let from = tempfile::tempdir().unwrap();
        for folder in ["pkg/sub", "pkg/__pycache__", "data", ".venv/bin"] {
            std::fs::create_dir_all(from.path().join(folder)).unwrap();
        }
        for file in [
            "top.py",
            "pkg/a.py",
            "pkg/sub/b.py",
            "pkg/__pycache__/a.pyc",
            "data/x",
        ] {
            std::fs::write(from.path().join(file), file).unwrap();
        }
        std::os::unix::fs::symlink("pkg/a.py", from.path().join("link.py")).unwrap();
        let layout = Layout {
            source: from.path().to_owned(),
            shared: vec![PathBuf::from("data")],
        };
        let sorted = |mut stamps: Vec<(PathBuf, Stamp)>| {
            stamps.sort_by(|a, b| a.0.cmp(&b.0));
            stamps
        };
        // In path order as taken, which a rerun's comparison with the saved stamps relies on.
        let taken = layout.stamps().unwrap();
        assert!(taken.is_sorted_by(|a, b| path_order(&a.0, &b.0).is_lt()));
        let inside = sorted(entering(|own| layout.stamps_from(own)).unwrap().unwrap());
        assert_eq!(inside, taken);
        let whole = sorted(layout.stamps_from(false).unwrap());
        assert_eq!(inside, whole);
        let paths: Vec<&Path> = inside.iter().map(|(p, _)| p.as_path()).collect();
        let want = [
            "",
            "link.py",
            "pkg",
            "pkg/a.py",
            "pkg/sub",
            "pkg/sub/b.py",
            "top.py",
        ];
        assert_eq!(paths, want.map(Path::new));
        assert_eq!(inside[1].1.kind, Kind::Symlink(PathBuf::from("pkg/a.py")));
    }

    #[test]
    fn paths_ordered_on_their_bytes_are_in_the_order_of_their_components() {
        let paths = [
            "", "a", "a b", "a-b", "a.b", "a/b", "a/b/c", "a/bc", "a0", "ab", "b", "é", "a/-", "-",
        ];
        for x in paths {
            for y in paths {
                let (x, y) = (Path::new(x), Path::new(y));
                assert_eq!(path_order(x, y), x.cmp(y), "{x:?} {y:?}");
            }
        }
    }

    #[test]
    fn a_rewrite_in_place_with_its_mtime_put_back_changes_the_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "abc").unwrap();
        let before = Stamp::of(&file).unwrap().unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, "xyz").unwrap();
        let f = File::options().write(true).open(&file).unwrap();
        f.set_modified(mtime).unwrap();
        let after = Stamp::of(&file).unwrap().unwrap();
        assert_eq!((before.size, before.mtime), (after.size, after.mtime));
        assert!(!before.unchanged(&after));
    }
}
