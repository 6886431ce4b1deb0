//! Where a report file goes, decided once from the path's file type (`symlink_metadata`): a
//! regular file or a new path is replaced atomically, a symlink's target is (the link stays),
//! and a FIFO, a device or `-` (standard output) is written through, never renamed over.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The path that means standard output.
pub const STDOUT: &str = "-";

/// How a report reaches the path it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output.
    Stdout,
    /// A FIFO, a character or block device: opened for writing and written through, so the
    /// reader (or the device) gets the report and the node stays what it was.
    Stream(PathBuf),
    /// A regular file or a path that does not exist yet, symlinks resolved: written into a new
    /// file beside it and renamed over it, so nobody reads half a report.
    File(PathBuf),
}

/// Set once a report was delivered, for the closing line that names it (a stream leaves
/// nothing on disk to look at afterwards).
#[derive(Debug, Clone, Default)]
pub struct Delivered(std::rc::Rc<std::cell::Cell<bool>>);

impl Delivered {
    pub fn mark(&self) {
        self.0.set(true);
    }

    pub fn get(&self) -> bool {
        self.0.get()
    }
}

/// Symlinks followed before giving up (the kernel's own limit).
const MAX_LINKS: usize = 40;

impl Destination {
    /// What `path` is now. A folder, or a symlink loop, is an error of its own kind.
    pub fn of(path: &Path) -> Result<Destination, OutputError> {
        if path.as_os_str() == STDOUT {
            return Ok(Destination::Stdout);
        }
        let mut at = path.to_owned();
        for _ in 0..MAX_LINKS {
            let meta = match std::fs::symlink_metadata(&at) {
                Ok(meta) => meta,
                // Nothing there yet; a file in its way is met when its folder is made.
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ENOTDIR) =>
                {
                    return Ok(Destination::File(at))
                }
                Err(source) => return Err(OutputError::Io { path: at, source }),
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = std::fs::read_link(&at).map_err(|source| OutputError::Io {
                    path: at.clone(),
                    source,
                })?;
                // A relative target is relative to the link's folder.
                at = match at.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            } else if kind.is_dir() {
                return Err(OutputError::IsFolder { path: at });
            } else if kind.is_file() {
                return Ok(Destination::File(at));
            } else {
                return Ok(Destination::Stream(at));
            }
        }
        Err(OutputError::Io {
            path: path.to_owned(),
            source: std::io::Error::other("too many levels of symbolic links"),
        })
    }

    /// Whether the report goes to standard output (the human lines then go to standard error).
    pub fn is_stdout(&self) -> bool {
        *self == Destination::Stdout
    }

    /// Before anything runs: a file's folder is created and shown writable, and a report an
    /// earlier run left there is removed, so a run that cannot finish leaves no stale report.
    /// A stream is not opened (a FIFO would wait for its reader).
    pub fn prepare(&self) -> Result<(), OutputError> {
        let Destination::File(path) = self else {
            return Ok(());
        };
        new_file_beside(path)?;
        match std::fs::remove_file(path) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => Err(OutputError::Io {
                path: path.clone(),
                source,
            }),
            _ => Ok(()),
        }
    }

    /// Writes `bytes` whole: a file atomically, a stream directly and flushed.
    pub fn write(&self, bytes: &[u8]) -> Result<(), OutputError> {
        match self {
            Destination::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .map_err(|source| OutputError::Io {
                        path: PathBuf::from(STDOUT),
                        source,
                    })
            }
            Destination::Stream(path) => std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .and_then(|mut f| f.write_all(bytes).and_then(|()| f.flush()))
                .map_err(|source| OutputError::Io {
                    path: path.clone(),
                    source,
                }),
            Destination::File(path) => {
                let mut file = new_file_beside(path)?;
                let io = |source| OutputError::Io {
                    path: path.clone(),
                    source,
                };
                file.write_all(bytes).map_err(io)?;
                file.persist(path).map_err(|e| io(e.error))?;
                Ok(())
            }
        }
    }

    /// The path written: `-`, the stream, or the file with symlinks resolved.
    pub fn path(&self) -> &Path {
        match self {
            Destination::Stdout => Path::new(STDOUT),
            Destination::Stream(path) | Destination::File(path) => path,
        }
    }
}

/// A new temporary file in the folder of `path` (created if missing), removed when dropped.
fn new_file_beside(path: &Path) -> Result<tempfile::NamedTempFile, OutputError> {
    use std::os::unix::fs::PermissionsExt;

    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|source| OutputError::Folder {
                dir: dir.to_owned(),
                source,
            })?;
            dir
        }
        None => Path::new("."),
    };
    // The mode std::fs::write gives a new file (before the umask), not a temp file's 0600.
    tempfile::Builder::new()
        .prefix(".lessonprobe-")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|source| OutputError::Io {
            path: path.to_owned(),
            source,
        })
}

/// Why a report could not go where it was asked.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{}: is a folder; give the path of a file", path.display())]
    IsFolder { path: PathBuf },
    #[error("{}: cannot create the folder: {source}", dir.display())]
    Folder {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl OutputError {
    /// The path the error is about and the OS error, for a report that names them its way.
    pub fn into_parts(self) -> (PathBuf, std::io::Error) {
        match self {
            OutputError::IsFolder { path } => (path, std::io::Error::other("is a folder")),
            OutputError::Folder { dir, source } => (dir, source),
            OutputError::Io { path, source } => (path, source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_path_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.xml");
        assert_eq!(
            Destination::of(&file).unwrap(),
            Destination::File(file.clone())
        );
        std::fs::write(&file, "x").unwrap();
        assert_eq!(
            Destination::of(&file).unwrap(),
            Destination::File(file.clone())
        );
        let link = dir.path().join("link.xml");
        std::os::unix::fs::symlink("r.xml", &link).unwrap();
        assert_eq!(
            Destination::of(&link).unwrap(),
            Destination::File(file.clone())
        );
        let dangling = dir.path().join("dangling.xml");
        std::os::unix::fs::symlink("sub/new.xml", &dangling).unwrap();
        assert_eq!(
            Destination::of(&dangling).unwrap(),
            Destination::File(dir.path().join("sub/new.xml"))
        );
        assert!(matches!(
            Destination::of(dir.path()),
            Err(OutputError::IsFolder { .. })
        ));
        assert_eq!(
            Destination::of(Path::new("-")).unwrap(),
            Destination::Stdout
        );
        let looped = dir.path().join("loop");
        std::os::unix::fs::symlink("loop", &looped).unwrap();
        assert!(Destination::of(&looped).is_err());
    }
}
