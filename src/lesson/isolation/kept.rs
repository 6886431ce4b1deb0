//! Working copies kept in the user's cache between runs (`$XDG_CACHE_HOME/lessonprobe/copies`):
//! one folder per worker slot of a run-from folder, locked while a process uses it, with the
//! stamps that let the next run bring it up to the course by copying only what differs.

use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::tree::{Layout, Stamp};

/// The environment variable that caps the kept copies' total size, in megabytes; `0` keeps
/// none (each run copies into the temporary folder and removes its copies at the end).
pub const CAP_VAR: &str = "LESSONPROBE_COPIES_MB";

/// The cap when [`CAP_VAR`] is unset.
pub const DEFAULT_CAP_MB: u64 = 2048;

/// Written before a slot's copy is changed and removed once its stamps are saved again: a slot
/// that has it was left half-reset (or in use) by a process that ended, and is rebuilt.
const RESETTING: &str = "resetting";
const STAMPS: &str = "stamps.json";
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

/// What a slot's stamps file holds: the filesystem the copy is on, the stamps of the course's
/// entries the copy was brought up to, and the stamps of the copy's own entries.
#[derive(Debug, Serialize, Deserialize)]
pub struct Saved {
    pub device: u64,
    pub source: Vec<(PathBuf, Stamp)>,
    pub copy: Vec<(PathBuf, Stamp)>,
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

    /// Where the copy's root folder (named `name`) is.
    pub fn tree(&self, name: &Path) -> PathBuf {
        self.dir.join(TREE).join(name)
    }

    /// The stamps saved with the copy, unless they cannot be trusted: a reset left unfinished,
    /// or the copy now on another filesystem.
    pub fn saved(&self) -> Option<Saved> {
        if self.dir.join(RESETTING).exists() {
            tracing::info!(
                "working copy {} was left half-reset: rebuilt",
                self.dir.display()
            );
            return None;
        }
        let text = fs::read(self.dir.join(STAMPS)).ok()?;
        let saved: Saved = serde_json::from_slice(&text).ok()?;
        let device = fs::metadata(self.dir.join(TREE)).ok()?.dev();
        (device == saved.device).then_some(saved)
    }

    /// Marks the copy as being changed: until [`Slot::save`], no later run trusts it.
    pub fn begin(&self) -> io::Result<()> {
        File::create(self.dir.join(RESETTING))?.sync_all()
    }

    /// Empties the slot's folder for a copy made whole; the old copy is removed without
    /// waiting for it ([`remove_later`]).
    pub fn clear(&self) -> io::Result<()> {
        self.begin()?;
        let _ = fs::remove_file(self.dir.join(STAMPS));
        if self.dir.join(TREE).exists() {
            remove_later(&self.dir.join(TREE));
        }
        fs::create_dir(self.dir.join(TREE))
    }

    /// Saves the stamps of the copy, now pristine, and lifts the mark of [`Slot::begin`].
    pub fn save(
        &self,
        source: Vec<(PathBuf, Stamp)>,
        copy: Vec<(PathBuf, Stamp)>,
    ) -> io::Result<()> {
        let device = fs::metadata(self.dir.join(TREE))?.dev();
        let bytes: u64 = copy.iter().map(|(_, s)| s.size).sum();
        fs::write(self.dir.join(BYTES), bytes.to_string())?;
        let saved = Saved {
            device,
            source,
            copy,
        };
        let text = serde_json::to_vec(&saved).map_err(io::Error::other)?;
        let temporary = self.dir.join(format!("{STAMPS}.new"));
        fs::write(&temporary, text)?;
        fs::rename(&temporary, self.dir.join(STAMPS))?;
        fs::remove_file(self.dir.join(RESETTING))
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
            let used = fs::metadata(dir.join(STAMPS))
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
