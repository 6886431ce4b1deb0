//! Which entries of a working copy a probe touched, told by inotify: a watch on every folder
//! (entries made, removed, moved) and on every file's inode (written, closed after writing,
//! attributes), so a write through a hard link from anywhere is seen too.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchMask};

use super::tree::Kind;

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

    /// Watches the entry `rel` of the copy at `root`: folders and files; links need none (a
    /// changed link is a removal and a creation in its folder).
    pub fn watch(&mut self, root: &Path, rel: &Path, kind: &Kind) -> io::Result<()> {
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
            Kind::Symlink(_) | Kind::Other => return Ok(()),
        };
        let wd = self
            .inotify
            .watches()
            .add(root.join(rel), mask | WatchMask::DONT_FOLLOW)?;
        self.watched.insert(
            wd.get_watch_descriptor_id(),
            (rel.to_owned(), *kind == Kind::Dir),
        );
        Ok(())
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
