//! An external sort with bounded memory: entries pushed in any order come back in order, each
//! full run sorted in memory and written to a temporary file, the last one merged from memory.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// Entries kept in memory at most: a run is written to disk once it holds this many, so its
/// buffer fills no more than a power of two. Half of the 131,071 it was: the last runs held
/// through the merge took verify's peak memory past 256 MiB at 1M records, and the smaller
/// sorts cost less CPU than the wider merge adds.
pub(super) const RUN: usize = (1 << 16) - 1;

/// What a sorted run holds: written to disk and read back, in an order.
pub(super) trait Entry: Sized {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()>;
    fn decode<R: Read>(r: &mut R) -> io::Result<Self>;
    /// The order the entries come back in.
    fn order(&self, other: &Self) -> Ordering;
    /// Bytes the order starts with: of two entries whose keys differ, the one whose key is
    /// smaller byte for byte (a key before every longer key it begins) comes first. Most
    /// comparisons are then of eight of these bytes as a number (see [`Lead`]), the whole
    /// order asked only where two numbers are equal.
    fn key(&self) -> &[u8];
}

/// Where the bytes of the keys that differ begin: past the prefix every key shares (ids of one
/// window share most of their bytes: `evt-<seed>-` and a counter).
#[derive(Clone)]
struct Lead {
    prefix: Vec<u8>,
}

impl Lead {
    /// The prefix all of `keys` share.
    fn of<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> Lead {
        let mut prefix = keys.next().unwrap_or_default().to_vec();
        for key in keys {
            prefix.truncate(shared(&prefix, key));
        }
        Lead { prefix }
    }

    /// The prefix this and `other` share.
    fn with(mut self, other: &Lead) -> Lead {
        self.prefix.truncate(shared(&self.prefix, &other.prefix));
        self
    }

    /// The eight bytes of `key` past the shared prefix (zeros past its end), as a big-endian
    /// number: a shorter key pads with zeros, which sort before any byte it could hold there,
    /// so a key that begins another gets the smaller or the same number, never a larger one.
    fn of_key(&self, key: &[u8]) -> u64 {
        let mut lead = [0u8; 8];
        let tail = &key[self.prefix.len().min(key.len())..];
        let n = tail.len().min(8);
        lead[..n].copy_from_slice(&tail[..n]);
        u64::from_be_bytes(lead)
    }
}

/// How many bytes `a` and `b` begin with alike.
fn shared(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Entries being sorted: the run in memory, and the runs already written.
pub(super) struct Sorter<T: Entry> {
    run: Vec<T>,
    /// Each run on disk, its entries, and the prefix they share.
    written: Vec<(File, u64, Lead)>,
}

impl<T: Entry> Sorter<T> {
    pub fn new() -> Sorter<T> {
        Sorter {
            run: Vec::new(),
            written: Vec::new(),
        }
    }

    pub fn push(&mut self, entry: T) -> io::Result<()> {
        self.run.push(entry);
        if self.run.len() >= RUN {
            self.write_run()?;
        }
        Ok(())
    }

    /// The order in which the run in memory is to be read, and the prefix its keys share.
    fn sorted_run(&self) -> (Vec<u32>, Lead) {
        let lead = Lead::of(self.run.iter().map(Entry::key));
        let mut order: Vec<(u64, u32)> = self
            .run
            .iter()
            .map(|e| lead.of_key(e.key()))
            .zip(0..)
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| self.run[a.1 as usize].order(&self.run[b.1 as usize]))
        });
        (order.into_iter().map(|(_, i)| i).collect(), lead)
    }

    /// Sorts the run in memory and writes it to a file of its own (unnamed: gone with its
    /// handle), keeping the memory for the next run.
    fn write_run(&mut self) -> io::Result<()> {
        let (order, lead) = self.sorted_run();
        let mut file = BufWriter::with_capacity(1 << 16, tempfile::tempfile()?);
        for i in order {
            self.run[i as usize].encode(&mut file)?;
        }
        let mut file = file.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        self.written.push((file, self.run.len() as u64, lead));
        self.run.clear();
        Ok(())
    }

    /// Writes the run in memory to disk too, when one is there already: for a sorter done
    /// long before it is read, whose memory is better given back meanwhile.
    pub fn spill(&mut self) -> io::Result<()> {
        if self.written.is_empty() || self.run.is_empty() {
            return Ok(());
        }
        self.write_run()
    }

    /// Every entry pushed, in order: the runs on disk merged with the last one, still in
    /// memory.
    pub fn done(mut self) -> io::Result<Merged<T>> {
        let (mut order, mut lead) = self.sorted_run();
        let mut last = std::mem::take(&mut self.run);
        permute(&mut last, &mut order);
        if last.is_empty() {
            // No key of its own: it must not shorten the prefix the others share. Nor does it
            // keep the memory of the runs written before it.
            lead = self.written.first().map_or(lead, |w| w.2.clone());
            last = Vec::new();
        }
        let mut sources = Vec::with_capacity(self.written.len() + 1);
        for (file, left, theirs) in self.written {
            lead = lead.with(&theirs);
            sources.push(Source::Disk {
                reader: BufReader::with_capacity(1 << 16, file),
                left,
            });
        }
        sources.push(Source::Memory(last.into_iter()));
        let mut heads = BinaryHeap::with_capacity(sources.len());
        for (from, source) in sources.iter_mut().enumerate() {
            if let Some(entry) = source.next()? {
                heads.push(Head {
                    lead: lead.of_key(entry.key()),
                    entry,
                    from,
                });
            }
        }
        Ok(Merged {
            sources,
            heads,
            lead,
        })
    }
}

/// Puts `run` in `order` (the index of the entry each place is to hold) in place, cycle after
/// cycle; `order` is used up.
fn permute<T>(run: &mut [T], order: &mut [u32]) {
    for start in 0..order.len() {
        // Each place is marked done by pointing at itself.
        let mut at = start;
        loop {
            let from = order[at] as usize;
            order[at] = at as u32;
            if from == start || from == at {
                break;
            }
            run.swap(at, from);
            at = from;
        }
    }
}

/// Where a merged run is read from.
enum Source<T> {
    Disk { reader: BufReader<File>, left: u64 },
    Memory(std::vec::IntoIter<T>),
}

impl<T: Entry> Source<T> {
    fn next(&mut self) -> io::Result<Option<T>> {
        match self {
            Source::Disk { reader, left } if *left > 0 => {
                *left -= 1;
                T::decode(reader).map(Some)
            }
            Source::Disk { .. } => Ok(None),
            Source::Memory(entries) => Ok(entries.next()),
        }
    }
}

/// The first entry not yet taken of one run, with its lead.
struct Head<T> {
    lead: u64,
    entry: T,
    from: usize,
}

impl<T: Entry> Ord for Head<T> {
    /// Reversed: the heap's greatest is the first entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .lead
            .cmp(&self.lead)
            .then_with(|| other.entry.order(&self.entry))
    }
}

impl<T: Entry> PartialOrd for Head<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Entry> PartialEq for Head<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T: Entry> Eq for Head<T> {}

/// The sorted runs of a [`Sorter`], merged.
pub(super) struct Merged<T> {
    sources: Vec<Source<T>>,
    heads: BinaryHeap<Head<T>>,
    /// The prefix every run's keys share.
    lead: Lead,
}

impl<T: Entry> Iterator for Merged<T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        let mut head = self.heads.peek_mut()?;
        let next = match self.sources[head.from].next() {
            Ok(next) => next,
            Err(e) => {
                // A run that cannot be read ends the merge.
                drop(head);
                self.heads.clear();
                return Some(Err(e));
            }
        };
        let taken = match next {
            Some(entry) => {
                head.lead = self.lead.of_key(entry.key());
                std::mem::replace(&mut head.entry, entry)
            }
            None => std::collections::binary_heap::PeekMut::pop(head).entry,
        };
        Some(Ok(taken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Id(String, i64);

    impl Entry for Id {
        fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
            w.write_all(&(self.0.len() as u32).to_le_bytes())?;
            w.write_all(self.0.as_bytes())?;
            w.write_all(&self.1.to_le_bytes())
        }

        fn decode<R: Read>(r: &mut R) -> io::Result<Self> {
            let mut len = [0u8; 4];
            r.read_exact(&mut len)?;
            let mut id = vec![0u8; u32::from_le_bytes(len) as usize];
            r.read_exact(&mut id)?;
            let mut n = [0u8; 8];
            r.read_exact(&mut n)?;
            Ok(Id(
                String::from_utf8(id).map_err(io::Error::other)?,
                i64::from_le_bytes(n),
            ))
        }

        fn order(&self, other: &Self) -> Ordering {
            (&self.0, self.1).cmp(&(&other.0, other.1))
        }

        fn key(&self) -> &[u8] {
            self.0.as_bytes()
        }
    }

    #[test]
    fn leads_never_contradict_the_order_of_the_keys() {
        let ids = [
            "evt-00ff-9",
            "evt-00ff-10",
            "evt-00ff-1",
            "evt-00ff-",
            "evt-00ff-123456789",
            "evt-00ff-123456780",
            "evt-00ff-1\u{1}",
            "evt-00fe",
        ];
        let lead = Lead::of(ids.iter().map(|s| s.as_bytes()));
        assert_eq!(lead.prefix, b"evt-00f");
        for a in ids {
            for b in ids {
                if lead.of_key(a.as_bytes()) < lead.of_key(b.as_bytes()) {
                    assert!(a < b, "{a} before {b}");
                }
            }
        }
        assert!(Lead::of(std::iter::empty()).prefix.is_empty());
    }

    #[test]
    fn runs_on_disk_and_in_memory_come_back_in_one_order() {
        let mut sorter = Sorter::new();
        let n = RUN as i64 * 2 + 17;
        // Ids of varied lengths and a shared prefix, each twice (two offsets).
        let id = |i: i64| format!("evt-1f-{}", (i * 7919) % n);
        for i in 0..n {
            sorter.push(Id(id(i), i % 3)).unwrap();
        }
        for i in 0..5 {
            sorter.push(Id(format!("evt-{i}"), 7)).unwrap();
        }
        let mut spilled = Sorter::new();
        for i in 0..RUN as i64 + 3 {
            spilled.push(Id(id(i), 0)).unwrap();
        }
        spilled.spill().unwrap();
        assert!(spilled.run.is_empty());
        for (sorter, len) in [(sorter, n as usize + 5), (spilled, RUN + 3)] {
            let merged: Vec<Id> = sorter.done().unwrap().map(Result::unwrap).collect();
            assert_eq!(merged.len(), len);
            assert!(merged
                .windows(2)
                .all(|w| w[0].order(&w[1]) == Ordering::Less));
        }
        let empty: Sorter<Id> = Sorter::new();
        assert_eq!(empty.done().unwrap().count(), 0);
    }

    #[test]
    fn a_run_is_put_in_order_in_place() {
        let mut run = ["c", "a", "d", "b", "e"];
        let mut order = [1, 3, 0, 2, 4];
        permute(&mut run, &mut order);
        assert_eq!(run, ["a", "b", "c", "d", "e"]);
    }
}
