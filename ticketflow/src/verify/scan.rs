//! Comparing by scanning: the table read once, whole, each row reduced to its event_id and
//! hashes of its other columns and sorted by event_id, then merged with the window's sorted ids.
//! Chosen over looking each event_id up when the table is not much larger than the window:
//! a lookup costs a descent of the event_id index per record, a scan a fraction of that per row.

use std::io::{self, Read, Write};
use std::iter::Peekable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::runs::{read_hashes, read_str, write_hashes, write_str, Difference, IdEntry, TableSide};
use super::sorted::{Entry, Merged, Sorter};
use super::VerifyError;
use crate::event::{hash64, EventRecord};
use crate::store::{Adoption, Lookup, Snapshot, StoreError};

/// The columns compared by hash, in the order of [`hashes`].
const COMPARED: [&str; 5] = ["tenant_id", "ticket_id", "action", "occurred_at", "payload"];

/// Hashes of the text of an event's columns after its event_id, as [`COMPARED`] names them.
pub(crate) fn hashes(columns: &[&str; 6]) -> [u64; 5] {
    std::array::from_fn(|i| hash64(columns[i + 1].as_bytes()))
}

/// One row of the table, keyed by its event_id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableEntry {
    event_id: String,
    fields: [u64; 5],
}

impl Entry for TableEntry {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
        write_str(w, &self.event_id)?;
        write_hashes(w, &self.fields)
    }

    fn decode<R: Read>(r: &mut R) -> io::Result<Self> {
        Ok(TableEntry {
            event_id: read_str(r)?,
            fields: read_hashes(r)?,
        })
    }

    fn order(&self, other: &Self) -> std::cmp::Ordering {
        self.event_id.cmp(&other.event_id)
    }

    fn key(&self) -> &[u8] {
        self.event_id.as_bytes()
    }
}

/// The table's rows sorted by event_id.
pub(crate) type SortedTable = Merged<TableEntry>;

enum Failed {
    Store(StoreError),
    Spill(io::Error),
    /// The window could not be read: the scan stops too.
    Stopped,
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Failed::Store(e)
    }
}

/// Reads every row of the table in `snapshot` into sorted runs (bounded memory, spilled to
/// temporary files), unless `stop` is set meanwhile (an error is returned then, which the
/// error that set it takes the place of).
fn sort_table(
    snapshot: &mut Snapshot,
    place: &str,
    stop: &AtomicBool,
) -> Result<SortedTable, VerifyError> {
    let mut sorter = Sorter::new();
    snapshot
        .scan(|row| -> Result<(), Failed> {
            if stop.load(Ordering::Relaxed) {
                return Err(Failed::Stopped);
            }
            sorter
                .push(TableEntry {
                    event_id: row[0].to_owned(),
                    fields: hashes(&row),
                })
                .map_err(Failed::Spill)
        })
        .map_err(|e| match e {
            Failed::Store(source) => VerifyError::Target {
                db: place.to_owned(),
                source,
            },
            Failed::Spill(e) => VerifyError::Spill(e),
            Failed::Stopped => VerifyError::Spill(io::Error::other("stopped")),
        })?;
    // Read only once the window is: its last run waits on disk, not in memory.
    sorter.spill()?;
    Ok(sorter.done()?)
}

/// A scan of the table running on a thread of its own, on the session it was given. Dropped
/// before it is finished, it stops the scan and waits for the thread.
pub(crate) struct Scanner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Scanned>>,
}

/// The session back from a scan, and the table sorted by event_id.
type Scanned = (Snapshot, Result<SortedTable, VerifyError>);

impl Scanner {
    /// Starts scanning the table in `snapshot` (its database named `place` in errors).
    pub fn start(mut snapshot: Snapshot, place: String) -> Scanner {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let sorted = sort_table(&mut snapshot, &place, &stopped);
            (snapshot, sorted)
        });
        Scanner {
            stop,
            thread: Some(thread),
        }
    }

    /// Waits for the scan to end: the session back, and the table sorted by event_id.
    pub fn finish(mut self) -> Scanned {
        self.join()
    }

    /// Stops the scan where it is: the session back.
    pub fn abandon(mut self) -> Snapshot {
        self.stop.store(true, Ordering::Relaxed);
        self.join().0
    }

    fn join(&mut self) -> Scanned {
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(scanned)) => scanned,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            // Taken only here, by `finish` or `abandon`, which consume the scanner.
            None => unreachable!("a scanner is joined once"),
        }
    }
}

impl Drop for Scanner {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

/// A scanned table, merged with the window's ids as the settling asks, and the session that
/// scanned it for the few questions hashes cannot answer.
pub(crate) struct ScannedTable<'a> {
    pub rows: Peekable<SortedTable>,
    pub snapshot: &'a mut Snapshot,
    pub adoption: &'a Adoption,
    pub topic: &'a str,
    pub place: &'a str,
}

impl ScannedTable<'_> {
    fn fail(&self, source: StoreError) -> VerifyError {
        VerifyError::Target {
            db: self.place.to_owned(),
            source,
        }
    }
}

impl TableSide for ScannedTable<'_> {
    fn fields(&mut self, event_id: &str) -> Result<Option<[u64; 5]>, VerifyError> {
        loop {
            match self.rows.peek() {
                None => return Ok(None),
                Some(Err(_)) => {
                    return match self.rows.next() {
                        Some(Err(e)) => Err(e.into()),
                        _ => Ok(None),
                    }
                }
                Some(Ok(row)) => match row.event_id.as_str().cmp(event_id) {
                    std::cmp::Ordering::Less => {
                        self.rows.next();
                    }
                    std::cmp::Ordering::Equal => return Ok(Some(row.fields)),
                    std::cmp::Ordering::Greater => return Ok(None),
                },
            }
        }
    }

    fn quarantined(
        &mut self,
        partition: i32,
        offsets: &[i64],
    ) -> Result<Vec<(i64, String)>, VerifyError> {
        self.snapshot
            .quarantined(self.topic, partition, offsets)
            .map_err(|e| self.fail(e))
    }

    /// Asks for each entry's row by asking for an event that carries only its id: every row
    /// comes back as it is stored (one whose every other column is empty, as `Same`).
    fn differences(&mut self, entries: &[IdEntry]) -> Result<Vec<Difference>, VerifyError> {
        let bare: Vec<EventRecord> = entries
            .iter()
            .map(|e| EventRecord {
                event_id: e.event_id.clone(),
                tenant_id: String::new(),
                ticket_id: String::new(),
                action: String::new(),
                occurred_at: String::new(),
                payload: String::new(),
            })
            .collect();
        let asked: Vec<&EventRecord> = bare.iter().collect();
        let found = self
            .snapshot
            .stored(self.adoption, &asked)
            .map_err(|e| self.fail(e))?;
        Ok(entries
            .iter()
            .zip(found)
            .zip(&bare)
            .map(|((entry, lookup), bare)| match lookup {
                Lookup::Row { stored, at, .. } => Difference {
                    fields: differing(entry, &stored),
                    at,
                },
                Lookup::Same => Difference {
                    fields: differing(entry, bare),
                    at: None,
                },
                // Not found again inside the same snapshot: nothing of it can be compared.
                Lookup::Absent | Lookup::Refused(_) => Difference {
                    fields: COMPARED.to_vec(),
                    at: None,
                },
            })
            .collect())
    }
}

/// The columns in which `stored` differs from the record `entry` stands for: the payload only
/// when it differs as a JSON value too.
fn differing(entry: &IdEntry, stored: &EventRecord) -> Vec<&'static str> {
    let theirs = hashes(&stored.columns());
    let mut fields: Vec<&'static str> = COMPARED
        .iter()
        .zip(theirs.iter().zip(&entry.fields))
        .filter(|(_, (a, b))| a != b)
        .map(|(name, _)| *name)
        .collect();
    if fields.last() == Some(&"payload") && stored.payload_hash() == entry.payload {
        fields.pop();
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(action: &str, payload: &str) -> EventRecord {
        EventRecord {
            event_id: "e-1".into(),
            tenant_id: "t".into(),
            ticket_id: "k".into(),
            action: action.into(),
            occurred_at: "2026-09-22T10:00:00+00:00".into(),
            payload: payload.into(),
        }
    }

    fn entry(e: &EventRecord) -> IdEntry {
        IdEntry {
            event_id: e.event_id.clone(),
            partition: 0,
            offset: 0,
            missing: false,
            quarantined: false,
            refused: String::new(),
            fields: hashes(&e.columns()),
            payload: e.facts_digest_and_payload_hash().1,
        }
    }

    #[test]
    fn a_table_entry_survives_the_disk_round_trip() {
        let entry = TableEntry {
            event_id: "é-2".into(),
            fields: [u64::MAX, 0, 1 << 63, 4, 5],
        };
        let mut bytes = Vec::new();
        entry.encode(&mut bytes).unwrap();
        assert_eq!(bytes.len(), 4 + "é-2".len() + 5 * 8);
        assert_eq!(TableEntry::decode(&mut bytes.as_slice()).unwrap(), entry);
    }

    #[test]
    fn a_row_differs_in_the_fields_whose_text_differs_and_in_a_payload_only_by_value() {
        let record = entry(&event("a", r#"{"x":1,"y":[1,2]}"#));
        assert_eq!(
            differing(&record, &event("a", r#"{"x":1,"y":[1,2]}"#)),
            Vec::<&str>::new()
        );
        // The same JSON spelled otherwise: the text's hash differs, the value does not.
        let respelled = event("a", r#"{"y": [1, 2], "x": 1}"#);
        assert_ne!(hashes(&respelled.columns()), record.fields);
        assert_eq!(differing(&record, &respelled), Vec::<&str>::new());
        assert_eq!(
            differing(&record, &event("b", r#"{"x":1,"y":[1,2]}"#)),
            ["action"]
        );
        assert_eq!(
            differing(&record, &event("b", r#"{"x":2,"y":[1,2]}"#)),
            ["action", "payload"]
        );
        assert_eq!(
            entry(&event("a", "{}")).payload,
            event("b", "{ }").payload_hash(),
            "the payload hash is of the value alone"
        );
    }
}
