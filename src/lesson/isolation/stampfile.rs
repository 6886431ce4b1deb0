//! The format of a kept copy's saved stamps: little-endian, length-prefixed binary written and
//! read by this module alone, so that a rerun reads 40,000 stamps with one allocation a path.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::tree::{Kind, Stamp};

/// Opens the file of the course's stamps and the copy's deeper entries: what it is and the
/// format's version. A file that does not open so (the JSON of the format before, or another
/// file) is never read.
pub const STAMPS_MAGIC: &[u8] = b"lessonprobe stamps 2\n";

/// Opens the file of the copy's folders and top-level entries (see [`STAMPS_MAGIC`]).
pub const CHECKED_MAGIC: &[u8] = b"lessonprobe checked 2\n";

/// A file being written: its magic, then numbers and lists of stamps.
pub struct Writer(Vec<u8>);

impl Writer {
    pub fn new(magic: &[u8]) -> Writer {
        Writer(magic.to_vec())
    }

    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn bytes(&mut self, b: &[u8]) {
        // A path is far shorter than 4 GiB (PATH_MAX).
        self.0.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.0.extend_from_slice(b);
    }

    /// Their count, then each path and stamp.
    pub fn entries<'a>(&mut self, entries: impl ExactSizeIterator<Item = (&'a Path, &'a Stamp)>) {
        self.u64(entries.len() as u64);
        for (path, stamp) in entries {
            self.bytes(path.as_os_str().as_bytes());
            match &stamp.kind {
                Kind::File => self.0.push(0),
                Kind::Dir => self.0.push(1),
                Kind::Symlink(target) => {
                    self.0.push(2);
                    self.bytes(target.as_os_str().as_bytes());
                }
                Kind::Other => self.0.push(3),
            }
            self.u64(stamp.ino);
            self.0.extend_from_slice(&stamp.mode.to_le_bytes());
            self.u64(stamp.size);
            for t in [stamp.mtime.0, stamp.mtime.1, stamp.ctime.0, stamp.ctime.1] {
                self.0.extend_from_slice(&t.to_le_bytes());
            }
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// A file being read; every read is `None` past its end, so a cut file is never taken whole.
pub struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    /// A reader past `magic`, `None` when the file does not open with it.
    pub fn new(file: &'a [u8], magic: &[u8]) -> Option<Reader<'a>> {
        file.strip_prefix(magic).map(Reader)
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    fn i64(&mut self) -> Option<i64> {
        self.take().map(i64::from_le_bytes)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.take()?) as usize;
        let (head, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        Some(head)
    }

    fn path(&mut self) -> Option<PathBuf> {
        Some(PathBuf::from(OsString::from_vec(self.bytes()?.to_vec())))
    }

    /// A list written by [`Writer::entries`].
    pub fn entries(&mut self) -> Option<Vec<(PathBuf, Stamp)>> {
        let count = self.u64()?;
        // The smallest entry is 57 bytes: a count beyond what is left is a damaged file.
        if count > (self.0.len() / 57) as u64 {
            return None;
        }
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let path = self.path()?;
            let kind = match self.take::<1>()?[0] {
                0 => Kind::File,
                1 => Kind::Dir,
                2 => Kind::Symlink(self.path()?),
                3 => Kind::Other,
                _ => return None,
            };
            let ino = self.u64()?;
            let mode = u32::from_le_bytes(self.take()?);
            let size = self.u64()?;
            let mtime = (self.i64()?, self.i64()?);
            let ctime = (self.i64()?, self.i64()?);
            let stamp = Stamp {
                kind,
                ino,
                mode,
                size,
                mtime,
                ctime,
            };
            entries.push((path, stamp));
        }
        Some(entries)
    }

    /// `Some` when the whole file was read.
    pub fn end(self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_back_as_written_and_a_cut_or_foreign_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "abc").unwrap();
        std::os::unix::fs::symlink("f", dir.path().join("l")).unwrap();
        let entries: Vec<(PathBuf, Stamp)> = ["", "f", "l"]
            .iter()
            .map(|p| {
                let stamp = Stamp::of(&dir.path().join(p)).unwrap().unwrap();
                (PathBuf::from(p), stamp)
            })
            .collect();
        let mut writer = Writer::new(STAMPS_MAGIC);
        writer.u64(7);
        writer.entries(entries.iter().map(|(p, s)| (p.as_path(), s)));
        let file = writer.finish();

        let mut reader = Reader::new(&file, STAMPS_MAGIC).unwrap();
        assert_eq!(reader.u64(), Some(7));
        assert_eq!(reader.entries().as_ref(), Some(&entries));
        assert_eq!(reader.end(), Some(()));

        assert!(Reader::new(&file, CHECKED_MAGIC).is_none());
        let cut = &file[..file.len() - 1];
        let mut reader = Reader::new(cut, STAMPS_MAGIC).unwrap();
        reader.u64();
        assert_eq!(reader.entries(), None);
    }
}
