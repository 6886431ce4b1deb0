//! Which entries of a working copy a probe touched, told by inotify: a watch on every folder
//! (entries made, removed, moved) and on every file's inode (written, closed after writing,
//! attributes), so a write through a hard link from anywhere is seen too. Many watches are added
//! from inside each folder, by one-component names: the kernel's path lookup is most of their cost.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchMask};

use super::tree::{entering, Kind};

/// What a settle must look at: the paths touched, or the whole copy when the events cannot say
/// (the queue overflowed, a folder moved and its watches now name old paths).
#[derive(Debug, Default)]
pub struct Touched {
    pub paths: BTreeSet<PathBuf>,
    pub rescan: bool,
}

pub struct Tracker {
    inotify: Inotify,
    /// Each watch's entry, relative to the copy's root, and whether it is a folder.
    watched: HashMap<i32, (PathBuf, bool)>,
    buffer: Vec<u8>,
}

impl Tracker {
    pub fn new() -> io::Result<Tracker> {
        Ok(Tracker {
            inotify: Inotify::init()?,
            watched: HashMap::new(),
            buffer: vec![0; 64 * 1024],
        })
    }

    /// Watches the entries `rel` of the copy at `root`: folders and files; links need none (a
    /// changed link is a removal and a creation in its folder). Many entries are watched from a
    /// thread of their own that enters each folder and names its entries by their names alone.
    pub fn watch<'a>(
        &mut self,
        root: &Path,
        entries: impl IntoIterator<Item = (&'a Path, &'a Kind)>,
    ) -> io::Result<()> {
        // Folders by the bytes of their paths: split and compared without parsing components.
        let mut folders: BTreeMap<&[u8], Vec<Named>> = BTreeMap::new();
        let mut count = 0;
        for (rel, kind) in entries {
            let Some(mask) = mask(kind) else { continue };
            let path = rel.as_os_str().as_bytes();
            let (folder, name) = match (kind, path.iter().rposition(|&b| b == b'/')) {
                (Kind::Dir, _) => (path, &b"."[..]),
                (_, Some(slash)) => (&path[..slash], &path[slash + 1..]),
                (_, None) if path.is_empty() => (path, &b"."[..]),
                (_, None) => (&b""[..], path),
            };
            folders.entry(folder).or_default().push(Named {
                name: CString::new(name).map_err(io::Error::other)?,
                rel,
                mask,
            });
            count += 1;
        }
        let fd = self.inotify.as_raw_fd();
        // Whole paths stay right once the thread has entered a folder.
        let root = &std::path::absolute(root)?;
        let entered = match count < FROM_FOLDERS {
            true => None,
            false => entering(|inside| add(fd, root, &folders, inside)),
        };
        let (added, result) = entered.unwrap_or_else(|| add(fd, root, &folders, false));
        // Grown once, not by doubling through 20,000 watches.
        self.watched.reserve(added.len());
        for (wd, rel, is_dir) in added {
            self.watched.insert(wd, (rel.to_owned(), is_dir));
        }
        result
    }

    /// Closes the instance without waiting for the kernel to remove its watches (about 20 ms
    /// of CPU over 20,000 entries, paid by the process that closes the instance last, and a
    /// process's exit waits for its descriptors to close): the instance is handed as standard
    /// input to a `true` of its own, at the lowest priority so that its exit, which pays for
    /// it, takes no core this process needs. Where none can be started, it is closed here.
    pub fn close_aside(self) {
        let instance = std::os::fd::OwnedFd::from(self.inotify);
        let started = std::process::Command::new("nice")
            .args(["-n", "19", "true"])
            .stdin(instance)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        // Reaped on a thread of its own (a run's end does not wait for it).
        if let Ok(mut child) = started {
            let _ = std::thread::Builder::new().spawn(move || child.wait());
        }
    }

    /// Adds what happened since the last call to `touched`.
    pub fn drain(&mut self, touched: &mut Touched) -> io::Result<()> {
        loop {
            let events = match self.inotify.read_events(&mut self.buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            let mut any = false;
            for event in events {
                any = true;
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    touched.rescan = true;
                    continue;
                }
                let id = event.wd.get_watch_descriptor_id();
                if event.mask.contains(EventMask::IGNORED) {
                    self.watched.remove(&id);
                    continue;
                }
                let Some((base, is_dir)) = self.watched.get(&id) else {
                    continue;
                };
                let folder_moved = (event.mask.contains(EventMask::ISDIR)
                    && event.mask.contains(EventMask::MOVED_FROM))
                    || (*is_dir && event.mask.contains(EventMask::MOVE_SELF));
                if folder_moved {
                    touched.rescan = true;
                }
                let path = match event.name {
                    Some(name) => base.join(name),
                    None => base.clone(),
                };
                touched.paths.insert(path);
            }
            if !any {
                return Ok(());
            }
        }
    }
}

/// From this many entries on, watches are added from inside each folder (a thread's start and
/// one folder change each are then far less than the long lookups saved).
const FROM_FOLDERS: usize = 64;

/// An entry to watch by its name in its folder.
struct Named<'a> {
    name: CString,
    rel: &'a Path,
    mask: WatchMask,
}

/// What an entry of `kind` is watched for; `None` for links and special files.
fn mask(kind: &Kind) -> Option<WatchMask> {
    let mask = match kind {
        Kind::Dir => {
            WatchMask::CREATE
                | WatchMask::DELETE
                | WatchMask::MOVED_FROM
                | WatchMask::MOVED_TO
                | WatchMask::DELETE_SELF
                | WatchMask::MOVE_SELF
                | WatchMask::ATTRIB
                | WatchMask::ONLYDIR
        }
        Kind::File => {
            WatchMask::MODIFY
                | WatchMask::ATTRIB
                | WatchMask::CLOSE_WRITE
                | WatchMask::DELETE_SELF
                | WatchMask::MOVE_SELF
        }
        Kind::Symlink(_) | Kind::Other => return None,
    };
    Some(mask | WatchMask::DONT_FOLLOW)
}

/// Adds the watches of `folders` (entries by folder, relative to `root`) to the inotify instance
/// `fd`: the watches added, and the first error, which stops it. With `enter` (the thread's
/// current folder is its own, [`entering`]), it enters each folder and adds its entries by
/// name; a folder it cannot enter has its entries named by their whole paths.
fn add<'a>(
    fd: i32,
    root: &Path,
    folders: &BTreeMap<&[u8], Vec<Named<'a>>>,
    enter: bool,
) -> (Vec<(i32, &'a Path, bool)>, io::Result<()>) {
    let mut added = Vec::new();
    for (folder, entries) in folders {
        let folder = Path::new(OsStr::from_bytes(folder));
        let inside = enter && std::env::set_current_dir(root.join(folder)).is_ok();
        for entry in entries {
            let whole;
            let path = match inside {
                true => entry.name.as_c_str(),
                false => {
                    whole = match CString::new(root.join(entry.rel).as_os_str().as_bytes()) {
                        Ok(whole) => whole,
                        Err(e) => return (added, Err(io::Error::other(e))),
                    };
                    whole.as_c_str()
                }
            };
            // SAFETY: `path` is a NUL-terminated string that outlives the call; `fd` is open.
            let wd = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), entry.mask.bits()) };
            if wd < 0 {
                return (added, Err(io::Error::last_os_error()));
            }
            added.push((wd, entry.rel, entry.mask.contains(WatchMask::ONLYDIR)));
        }
    }
    (added, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A tree of more entries than [`FROM_FOLDERS`], so its watches are added from inside its
    /// folders.
    fn tree(dir: &Path) -> (PathBuf, Vec<(PathBuf, Kind)>) {
        let root = dir.join("copy");
        std::fs::create_dir(&root).unwrap();
        let mut entries = vec![(PathBuf::new(), Kind::Dir)];
        for folder in ["a", "a/b", "c"] {
            std::fs::create_dir(root.join(folder)).unwrap();
            entries.push((PathBuf::from(folder), Kind::Dir));
            for i in 0..FROM_FOLDERS {
                let file = PathBuf::from(folder).join(format!("f{i}.py"));
                std::fs::write(root.join(&file), "x").unwrap();
                entries.push((file, Kind::File));
            }
        }
        (root, entries)
    }

    /// A tracker of `entries`, the copy's root given as `root`.
    fn watching(root: &Path, entries: &[(PathBuf, Kind)]) -> Tracker {
        let mut tracker = Tracker::new().unwrap();
        tracker
            .watch(root, entries.iter().map(|(p, k)| (p.as_path(), k)))
            .unwrap();
        assert_eq!(tracker.watched.len(), entries.len());
        tracker
    }

    fn touched(tracker: &mut Tracker) -> BTreeSet<PathBuf> {
        let mut touched = Touched::default();
        tracker.drain(&mut touched).unwrap();
        assert!(!touched.rescan);
        touched.paths
    }

    #[test]
    fn watches_added_from_inside_folders_see_entries_made_and_writes_through_a_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let (root, entries) = tree(dir.path());
        let mut tracker = watching(&root, &entries);
        // The process's current folder is not the one the watches were added from.
        assert_ne!(std::env::current_dir().unwrap(), root.join("c"));

        std::fs::write(root.join("a/b/new.txt"), "n").unwrap();
        assert_eq!(
            touched(&mut tracker),
            BTreeSet::from([PathBuf::from("a/b/new.txt")])
        );
        // A hard link outside the copy, made and written: only the inode's watch sees it.
        let outside = dir.path().join("outside");
        std::fs::hard_link(root.join("c/f3.py"), &outside).unwrap();
        std::fs::write(&outside, "changed").unwrap();
        assert_eq!(std::fs::metadata(root.join("c/f3.py")).unwrap().nlink(), 2);
        assert_eq!(
            touched(&mut tracker),
            BTreeSet::from([PathBuf::from("c/f3.py")])
        );
    }

    #[test]
    fn a_relative_root_names_the_same_entries() {
        let dir = tempfile::tempdir().unwrap();
        let (root, entries) = tree(dir.path());
        let mut tracker = watching(&pathdiff(&root), &entries);
        std::fs::write(root.join("a/f1.py"), "y").unwrap();
        assert_eq!(
            touched(&mut tracker),
            BTreeSet::from([PathBuf::from("a/f1.py")])
        );
    }

    /// `path` relative to the current folder (through `..` up to `/`).
    fn pathdiff(path: &Path) -> PathBuf {
        let cwd = std::env::current_dir().unwrap();
        let up: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
        up.join(path.strip_prefix("/").unwrap())
    }
}
