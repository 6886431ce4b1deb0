//! Working copies kept in the user's cache between runs (`$XDG_CACHE_HOME/lessonprobe/copies`):
//! one folder per worker slot of a run-from folder, locked while a process uses it, with the
//! stamps that let the next run bring it up to the course by copying only what differs.

use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::stampfile::{Reader, Writer, CHECKED_MAGIC, STAMPS_MAGIC};
use super::tree::{Kind, Layout, Stamp};

/// The environment variable that caps the kept copies' total size, in megabytes; `0` keeps
/// none (each run copies into the temporary folder and removes its copies at the end).
pub const CAP_VAR: &str = "LESSONPROBE_COPIES_MB";

/// The cap when [`CAP_VAR`] is unset.
pub const DEFAULT_CAP_MB: u64 = 2048;

/// Written before a slot's copy is changed and removed once its stamps are saved again: a slot
/// that has it was left half-reset (or in use) by a process that ended, and is rebuilt.
const RESETTING: &str = "resetting";
/// The course's stamps and those of the copy's entries not [`checked`]: written again only when
/// they changed, so a rerun that reset nothing leaves it as it is.
const STAMPS: &str = "stamps";
/// The stamps of the copy's [`checked`] entries and the filesystem it is on, written at every
/// save (the probes' files made and removed move their folders' times), naming the save of
/// [`STAMPS`] they go with.
const CHECKED: &str = "checked";
/// The stamps of the format before ([`super::stampfile`]): a slot with only this is rebuilt.
const OLD_STAMPS: &str = "stamps.json";
/// The copy's size in bytes, saved with its stamps (what the eviction adds up).
const BYTES: &str = "bytes";
const LOCK: &str = "lock";
/// The folder the copy lives in, inside its slot.
const TREE: &str = "tree";

/// The folder every kept copy lives under.
pub fn root() -> PathBuf {
    crate::environment::provision::cache_root().with_file_name("copies")
}

/// The size cap in bytes, `None` when copies are not kept; a value that is not a whole number
/// of megabytes is an error naming it. The library's own unit tests run in the developer's
/// process and keep none: what they copy must not land in the user's cache.
pub fn cap() -> Result<Option<u64>, super::IsolationError> {
    if cfg!(test) {
        return Ok(None);
    }
    let mb = match std::env::var(CAP_VAR) {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map_err(|_| super::IsolationError::BadCap(v))?,
        Err(_) => DEFAULT_CAP_MB,
    };
    Ok((mb > 0).then(|| mb.saturating_mul(1024 * 1024)))
}

/// Whether the entry `rel` of a copy is checked before the copy is trusted: a folder (its times
/// move with any entry made, removed or renamed in it) or a top-level entry.
pub fn checked(rel: &Path, stamp: &Stamp) -> bool {
    stamp.kind == Kind::Dir || !rel.as_os_str().as_bytes().contains(&b'/')
}

/// What a slot's stamps files hold: the stamps of the course's entries the copy was brought up
/// to, and the stamps of the copy's own entries.
#[derive(Debug, PartialEq)]
pub struct Saved {
    /// Names the save of [`STAMPS`]; the checked entries name the one they go with.
    pub generation: u64,
    /// The course's stamps, in path order.
    pub source: Vec<(PathBuf, Stamp)>,
    /// The copy's entries that are not [`checked`].
    pub deeper: Vec<(PathBuf, Stamp)>,
    /// The copy's [`checked`] entries.
    pub checked: Vec<(PathBuf, Stamp)>,
}

/// What a save writes besides the copy's checked entries.
pub enum Deeper<'a> {
    /// Nothing of it changed since the save `generation`: its file stays as it is.
    Saved(u64),
    /// Written anew: the course's stamps and the copy's entries that are not checked.
    Changed {
        source: &'a [(PathBuf, Stamp)],
        copy: Vec<(&'a Path, &'a Stamp)>,
    },
}

/// The saved stamps in the slot's files `checked` and `stamps` and the filesystem they were
/// saved on; `None` unless both are whole, of this format and of the same save.
fn read(checked: &[u8], stamps: &[u8]) -> Option<(u64, Saved)> {
    let mut file = Reader::new(checked, CHECKED_MAGIC)?;
    let generation = file.u64()?;
    let device = file.u64()?;
    let checked = file.entries()?;
    file.end()?;
    let mut file = Reader::new(stamps, STAMPS_MAGIC)?;
    (file.u64()? == generation).then_some(())?;
    let source = file.entries()?;
    let deeper = file.entries()?;
    file.end()?;
    // A rerun compares them with the course's stamps in one pass, both in path order.
    let ordered = source.is_sorted_by(|a, b| super::tree::path_order(&a.0, &b.0).is_lt());
    ordered.then_some(())?;
    let saved = Saved {
        generation,
        source,
        deeper,
        checked,
    };
    Some((device, saved))
}

/// One worker's slot for a run-from folder, locked by this process while it lives.
#[derive(Debug)]
pub struct Slot {
    dir: PathBuf,
    _lock: File,
}

impl Slot {
    /// The first slot of `layout` no other process holds, made if need be.
    pub fn claim(layout: &Layout) -> io::Result<Slot> {
        let folder = root().join(key(layout));
        fs::create_dir_all(&folder)?;
        fs::write(
            folder.join("source"),
            layout.source.as_os_str().as_encoded_bytes(),
        )?;
        for n in 0.. {
            let dir = folder.join(n.to_string());
            fs::create_dir_all(&dir)?;
            if let Some(lock) = try_lock(&dir.join(LOCK))? {
                return Ok(Slot { dir, _lock: lock });
            }
        }
        unreachable!("a slot is found or made")
    }

    /// The slot at `dir`, wherever it is (the library's tests keep no copy in the cache).
    #[cfg(test)]
    fn at(dir: &Path) -> Slot {
        fs::create_dir_all(dir.join(TREE)).unwrap();
        let lock = try_lock(&dir.join(LOCK)).unwrap().unwrap();
        Slot {
            dir: dir.to_owned(),
            _lock: lock,
        }
    }

    /// Where the copy's root folder (named `name`) is.
    pub fn tree(&self, name: &Path) -> PathBuf {
        self.dir.join(TREE).join(name)
    }

    /// The stamps saved with the copy, unless they cannot be trusted: a reset left unfinished,
    /// files of another format or of two saves, or the copy now on another filesystem.
    pub fn saved(&self) -> Option<Saved> {
        if self.dir.join(RESETTING).exists() {
            tracing::info!(
                "working copy {} was left half-reset: rebuilt",
                self.dir.display()
            );
            return None;
        }
        let files = fs::read(self.dir.join(CHECKED)).and_then(|checked| {
            fs::read(self.dir.join(STAMPS)).map(|stamps| read(&checked, &stamps))
        });
        let Ok(Some((device, saved))) = files else {
            if self.dir.join(TREE).exists() {
                tracing::info!(
                    "working copy {} has no stamps this version reads: rebuilt",
                    self.dir.display()
                );
            }
            return None;
        };
        let now = fs::metadata(self.dir.join(TREE)).ok()?.dev();
        (device == now).then_some(saved)
    }

    /// Marks the copy as being changed: until [`Slot::save`], no later run trusts it.
    pub fn begin(&self) -> io::Result<()> {
        File::create(self.dir.join(RESETTING))?.sync_all()
    }

    /// Empties the slot's folder for a copy made whole; the old copy is removed without
    /// waiting for it ([`remove_later`]).
    pub fn clear(&self) -> io::Result<()> {
        self.begin()?;
        for name in [CHECKED, STAMPS, OLD_STAMPS] {
            let _ = fs::remove_file(self.dir.join(name));
        }
        if self.dir.join(TREE).exists() {
            remove_later(&self.dir.join(TREE));
        }
        fs::create_dir(self.dir.join(TREE))
    }

    /// Saves the stamps of the copy, now pristine (its `checked` entries, and the rest when it
    /// changed), and lifts the mark of [`Slot::begin`]; what the save is named.
    pub fn save(&self, checked: &[(&Path, &Stamp)], deeper: Deeper) -> io::Result<u64> {
        let device = fs::metadata(self.dir.join(TREE))?.dev();
        let generation = match deeper {
            Deeper::Saved(generation) => generation,
            Deeper::Changed { source, copy } => {
                let bytes: u64 = copy.iter().chain(checked).map(|(_, s)| s.size).sum();
                fs::write(self.dir.join(BYTES), bytes.to_string())?;
                let generation = rand::random();
                let mut file = Writer::new(STAMPS_MAGIC);
                file.u64(generation);
                file.entries(source.iter().map(|(p, s)| (p.as_path(), s)));
                file.entries(copy.into_iter());
                self.replace(STAMPS, file.finish())?;
                generation
            }
        };
        let mut file = Writer::new(CHECKED_MAGIC);
        file.u64(generation);
        file.u64(device);
        file.entries(checked.iter().copied());
        self.replace(CHECKED, file.finish())?;
        fs::remove_file(self.dir.join(RESETTING))?;
        Ok(generation)
    }

    /// Writes the slot's file `name` whole: aside first, then renamed over it.
    fn replace(&self, name: &str, bytes: Vec<u8>) -> io::Result<()> {
        let temporary = self.dir.join(format!("{name}.new"));
        fs::write(&temporary, bytes)?;
        fs::rename(&temporary, self.dir.join(name))
    }
}

/// The folder name of a run-from folder's slots: a hash of its absolute path and its shared
/// paths (two courses' `project` folders never share slots).
fn key(layout: &Layout) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::path::absolute(&layout.source)
        .unwrap_or_else(|_| layout.source.clone())
        .hash(&mut hasher);
    layout.shared.hash(&mut hasher);
    let name = layout
        .source
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}-{:016x}", hasher.finish())
}

/// An exclusive lock on `path` (made if missing), `None` when another holder has it.
fn try_lock(path: &Path) -> io::Result<Option<File>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    // SAFETY: the descriptor is open for the duration of the call.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(Some(file));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(None),
        _ => Err(err),
    }
}

/// A kept slot as the eviction and `lessonprobe clean` see it.
#[derive(Debug)]
pub struct Kept {
    pub dir: PathBuf,
    pub bytes: u64,
    pub used: SystemTime,
}

/// Every slot under [`root`] no process holds, least recently used first.
pub fn idle() -> Vec<(Kept, File)> {
    let mut found = Vec::new();
    let Ok(folders) = fs::read_dir(root()) else {
        return found;
    };
    for folder in folders.flatten() {
        // Copies being removed (`remove_later`).
        if folder.file_name().as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let Ok(slots) = fs::read_dir(folder.path()) else {
            continue;
        };
        for slot in slots.flatten() {
            let dir = slot.path();
            if !dir.is_dir() {
                continue;
            }
            let Ok(Some(lock)) = try_lock(&dir.join(LOCK)) else {
                continue;
            };
            // Written by every save.
            let used = fs::metadata(dir.join(CHECKED))
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((
                Kept {
                    bytes: size_of(&dir),
                    dir,
                    used,
                },
                lock,
            ));
        }
    }
    found.sort_by_key(|(kept, _)| kept.used);
    found
}

/// The bytes of the files under `dir`: as saved with its stamps, else counted.
fn size_of(dir: &Path) -> u64 {
    if let Some(bytes) = fs::read_to_string(dir.join(BYTES))
        .ok()
        .and_then(|t| t.trim().parse().ok())
    {
        return bytes;
    }
    let mut bytes = 0;
    let _ = super::tree::walk(dir, Path::new(""), &mut |_, stamp| bytes += stamp.size);
    bytes
}

/// Removes the least recently used idle slots until the kept copies fit `cap` bytes (a slot
/// another process holds is in use, never removed).
pub fn evict(cap: u64) {
    let idle = idle();
    let mut total: u64 = idle.iter().map(|(k, _)| k.bytes).sum::<u64>();
    for (kept, _lock) in idle {
        if total <= cap {
            break;
        }
        total = total.saturating_sub(kept.bytes);
        remove_later(&kept.dir);
    }
}

/// Removes `dir` without waiting for it: renamed away at once (so nothing uses it again), its
/// contents removed by a process of its own that outlives this one.
pub fn remove_later(dir: &Path) {
    let doomed = root().join(format!(
        ".removed-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    if fs::rename(dir, &doomed).is_err() {
        let _ = super::tree::remove(dir);
        return;
    }
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new("sh")
        .args([
            "-c",
            "chmod -R u+rwx -- \"$1\" 2>/dev/null; rm -rf -- \"$1\"",
            "sh",
        ])
        .arg(&doomed)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
    if spawned.is_err() {
        let _ = super::tree::remove(&doomed);
    }
}

/// Every kept copy no process holds, least recently used first; with `remove`, each is removed
/// (locked meanwhile, so no run takes it half-removed), with what removing it gave.
pub fn clean(remove: bool) -> Vec<(Kept, io::Result<()>)> {
    idle()
        .into_iter()
        .map(|(kept, _lock)| {
            let removed = if remove {
                super::tree::remove(&kept.dir)
            } else {
                Ok(())
            };
            (kept, removed)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot whose copy has a folder, a top-level file and a file below, saved; with the
    /// stamps of the course saved with it.
    fn saved_slot(dir: &Path) -> (Slot, Saved) {
        let slot = Slot::at(&dir.join("slot"));
        let tree = slot.tree(Path::new("project"));
        fs::create_dir_all(tree.join("pkg")).unwrap();
        fs::write(tree.join("top.py"), "t").unwrap();
        fs::write(tree.join("pkg/a.py"), "a").unwrap();
        let stamp = |rel: &str| {
            (
                PathBuf::from(rel),
                Stamp::of(&tree.join(rel)).unwrap().unwrap(),
            )
        };
        let source = vec![stamp(""), stamp("pkg"), stamp("pkg/a.py"), stamp("top.py")];
        let checked = vec![stamp(""), stamp("pkg"), stamp("top.py")];
        let deeper = vec![stamp("pkg/a.py")];
        slot.begin().unwrap();
        let generation = slot
            .save(
                &checked
                    .iter()
                    .map(|(p, s)| (p.as_path(), s))
                    .collect::<Vec<_>>(),
                Deeper::Changed {
                    source: &source,
                    copy: deeper.iter().map(|(p, s)| (p.as_path(), s)).collect(),
                },
            )
            .unwrap();
        let saved = Saved {
            generation,
            source: source.clone(),
            deeper: deeper.clone(),
            checked: checked.clone(),
        };
        (slot, saved)
    }

    #[test]
    fn stamps_saved_are_read_back_and_a_save_that_changed_nothing_leaves_their_file_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let (slot, saved) = saved_slot(dir.path());
        assert_eq!(slot.saved().as_ref(), Some(&saved));
        assert!(!slot.dir.join(RESETTING).exists());

        let stamps = || {
            let meta = fs::metadata(slot.dir.join(STAMPS)).unwrap();
            (meta.ino(), meta.modified().unwrap())
        };
        let before = stamps();
        slot.begin().unwrap();
        // Half-reset while marked: not trusted.
        assert_eq!(slot.saved(), None);
        let checked: Vec<_> = saved
            .checked
            .iter()
            .map(|(p, s)| (p.as_path(), s))
            .collect();
        let generation = slot
            .save(&checked, Deeper::Saved(saved.generation))
            .unwrap();
        assert_eq!(generation, saved.generation);
        assert_eq!(stamps(), before);
        assert_eq!(slot.saved().as_ref(), Some(&saved));
    }

    #[test]
    fn stamps_of_the_format_before_or_of_two_saves_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let (slot, _) = saved_slot(dir.path());
        let json = r#"{"device":2049,"source":[],"copy":[["",{"kind":"Dir","ino":1,"mode":493,"size":4096,"mtime":[1,2],"ctime":[1,2]}]]}"#;

        // A slot of the format before: only its JSON file.
        fs::remove_file(slot.dir.join(STAMPS)).unwrap();
        fs::remove_file(slot.dir.join(CHECKED)).unwrap();
        fs::write(slot.dir.join(OLD_STAMPS), json).unwrap();
        assert_eq!(slot.saved(), None);
        // The JSON under this format's names.
        fs::write(slot.dir.join(STAMPS), json).unwrap();
        fs::write(slot.dir.join(CHECKED), json).unwrap();
        assert_eq!(slot.saved(), None);

        // The checked entries of one save beside the stamps of another.
        let (slot, saved) = saved_slot(&dir.path().join("again"));
        let other = fs::read(slot.dir.join(STAMPS)).unwrap();
        let checked: Vec<_> = saved
            .checked
            .iter()
            .map(|(p, s)| (p.as_path(), s))
            .collect();
        slot.begin().unwrap();
        slot.save(&checked, Deeper::Saved(saved.generation ^ 1))
            .unwrap();
        assert_eq!(slot.saved(), None);
        slot.begin().unwrap();
        slot.save(&checked, Deeper::Saved(saved.generation))
            .unwrap();
        assert_eq!(slot.saved().as_ref(), Some(&saved));
        // A file cut short.
        fs::write(slot.dir.join(STAMPS), &other[..other.len() - 1]).unwrap();
        assert_eq!(slot.saved(), None);
    }
}
