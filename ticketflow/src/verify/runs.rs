//! Sorted runs on disk: what must be counted over the whole window — distinct event_ids, the
//! ids with no row, the same facts under several ids — is pushed as small entries into external
//! sorters (bounded memory, spilled to temporary files) and settled in one ordered pass each;
//! against a scanned table, that pass is also the merge that compares each record with its row.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use std::collections::HashSet;

use super::findings::{
    mismatch_detail, quarantine_reason, undecodable_finding, Discrepancy, Findings, Kind,
};
use super::report::Counts;
use super::sorted::{Entry, Sorter};
use super::VerifyError;
use crate::store::StoredAt;

/// One decodable record, keyed by its event_id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdEntry {
    pub event_id: String,
    pub partition: i32,
    pub offset: i64,
    pub missing: bool,
    pub quarantined: bool,
    /// Why the table cannot hold it, when its column types refused it.
    pub refused: String,
    /// Hashes of its tenant_id, ticket_id, action, occurred_at and payload text, and of its
    /// payload as a JSON value: what a scanned table's rows are compared with.
    pub fields: [u64; 5],
    pub payload: u64,
}

/// One undecodable record whose quarantine is looked up after the window is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UndecodableEntry {
    pub partition: i32,
    pub offset: i64,
    pub reason: String,
}

/// One decodable record, keyed by what happened (its facts digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FactEntry {
    pub facts: [u8; 16],
    pub event_id: String,
    pub partition: i32,
    pub offset: i64,
}

pub(super) fn write_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u32).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

pub(super) fn read_str<R: Read>(r: &mut R) -> io::Result<String> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut bytes)?;
    String::from_utf8(bytes).map_err(io::Error::other)
}

fn read_i32<R: Read>(r: &mut R) -> io::Result<i32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(i32::from_le_bytes(b))
}

fn read_i64<R: Read>(r: &mut R) -> io::Result<i64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(i64::from_le_bytes(b))
}

fn read_u64<R: Read>(r: &mut R) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

pub(super) fn write_hashes<W: Write>(w: &mut W, hashes: &[u64]) -> io::Result<()> {
    hashes
        .iter()
        .try_for_each(|h| w.write_all(&h.to_le_bytes()))
}

pub(super) fn read_hashes<R: Read, const N: usize>(r: &mut R) -> io::Result<[u64; N]> {
    let mut hashes = [0u64; N];
    for h in &mut hashes {
        *h = read_u64(r)?;
    }
    Ok(hashes)
}

impl Entry for IdEntry {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
        write_str(w, &self.event_id)?;
        w.write_all(&self.partition.to_le_bytes())?;
        w.write_all(&self.offset.to_le_bytes())?;
        w.write_all(&[u8::from(self.missing) | (u8::from(self.quarantined) << 1)])?;
        write_str(w, &self.refused)?;
        write_hashes(w, &self.fields)?;
        write_hashes(w, &[self.payload])
    }

    fn decode<R: Read>(r: &mut R) -> io::Result<Self> {
        let event_id = read_str(r)?;
        let partition = read_i32(r)?;
        let offset = read_i64(r)?;
        let mut flags = [0u8; 1];
        r.read_exact(&mut flags)?;
        Ok(IdEntry {
            event_id,
            partition,
            offset,
            missing: flags[0] & 1 != 0,
            quarantined: flags[0] & 2 != 0,
            refused: read_str(r)?,
            fields: read_hashes(r)?,
            payload: read_u64(r)?,
        })
    }

    fn order(&self, other: &Self) -> Ordering {
        (&self.event_id, self.partition, self.offset).cmp(&(
            &other.event_id,
            other.partition,
            other.offset,
        ))
    }

    fn key(&self) -> &[u8] {
        self.event_id.as_bytes()
    }
}

impl Entry for UndecodableEntry {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.partition.to_le_bytes())?;
        w.write_all(&self.offset.to_le_bytes())?;
        write_str(w, &self.reason)
    }

    fn decode<R: Read>(r: &mut R) -> io::Result<Self> {
        Ok(UndecodableEntry {
            partition: read_i32(r)?,
            offset: read_i64(r)?,
            reason: read_str(r)?,
        })
    }

    fn order(&self, other: &Self) -> Ordering {
        (self.partition, self.offset).cmp(&(other.partition, other.offset))
    }

    fn key(&self) -> &[u8] {
        // Few of them: the whole order decides.
        &[]
    }
}

impl Entry for FactEntry {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(&self.facts)?;
        write_str(w, &self.event_id)?;
        w.write_all(&self.partition.to_le_bytes())?;
        w.write_all(&self.offset.to_le_bytes())
    }

    fn decode<R: Read>(r: &mut R) -> io::Result<Self> {
        let mut facts = [0u8; 16];
        r.read_exact(&mut facts)?;
        Ok(FactEntry {
            facts,
            event_id: read_str(r)?,
            partition: read_i32(r)?,
            offset: read_i64(r)?,
        })
    }

    fn order(&self, other: &Self) -> Ordering {
        (&self.facts, &self.event_id, self.partition, self.offset).cmp(&(
            &other.facts,
            &other.event_id,
            other.partition,
            other.offset,
        ))
    }

    fn key(&self) -> &[u8] {
        &self.facts
    }
}

/// The sorters of one verification.
pub(crate) struct Runs {
    ids: Sorter<IdEntry>,
    facts: Sorter<FactEntry>,
    /// Undecodable records whose quarantine is looked up once the window is read (while it was
    /// read, the table was being scanned).
    undecodable: Sorter<UndecodableEntry>,
}

/// The table of a verification that scanned it, as the settling merge asks it: in id order,
/// and the database itself only for what hashes cannot tell.
pub(crate) trait TableSide {
    /// The hashes of the row with `event_id` (asked in ascending order), `None` when there is
    /// none.
    fn fields(&mut self, event_id: &str) -> Result<Option<[u64; 5]>, VerifyError>;
    /// The offsets among `offsets` (sorted) of `partition` that a replay quarantined, each
    /// with its reason.
    fn quarantined(
        &mut self,
        partition: i32,
        offsets: &[i64],
    ) -> Result<Vec<(i64, String)>, VerifyError>;
    /// For each entry, how its row differs.
    fn differences(&mut self, entries: &[IdEntry]) -> Result<Vec<Difference>, VerifyError>;
}

/// How a stored row differs from a record: the fields (none: the same event spelled
/// otherwise), and where the row was stored from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Difference {
    pub fields: Vec<&'static str>,
    pub at: Option<StoredAt>,
}

/// Discrepancies waiting for the database to be finished, at most this many of each.
const CHUNK: usize = 1024;

/// One event_id's records while the id pass is on it (its lists kept from id to id).
#[derive(Default)]
struct Group {
    /// Its first record, carrying what any of its records is (missing, quarantined).
    first: Option<IdEntry>,
    partitions: Vec<i32>,
    records: Vec<(i32, i64)>,
}

impl Group {
    /// Adds a record of the id: the first one when the group is empty.
    fn add(&mut self, entry: IdEntry) {
        self.records.push((entry.partition, entry.offset));
        if self.partitions.last() != Some(&entry.partition) {
            self.partitions.push(entry.partition);
        }
        match &mut self.first {
            Some(first) => {
                first.missing |= entry.missing;
                first.quarantined |= entry.quarantined;
            }
            None => self.first = Some(entry),
        }
    }
}

/// Counts and findings being settled, with what waits for the table.
struct Settling<'a, 't> {
    counts: &'a mut BTreeMap<i32, Counts>,
    total: &'a mut Counts,
    findings: &'a mut Findings,
    table: Option<&'t mut dyn TableSide>,
    /// Missing ids whose records' quarantine is not known yet.
    missing: Vec<(Discrepancy, Vec<(i32, i64)>)>,
    /// Records whose row's hashes differ from theirs.
    mismatched: Vec<IdEntry>,
}

impl Settling<'_, '_> {
    /// Compares one record with the table, when it was scanned.
    fn compare(&mut self, entry: &mut IdEntry) -> Result<(), VerifyError> {
        let Some(table) = self.table.as_deref_mut() else {
            return Ok(());
        };
        match table.fields(&entry.event_id)? {
            None => entry.missing = true,
            Some(stored) if stored == entry.fields => {}
            Some(_) => {
                self.mismatched.push(entry.clone());
                if self.mismatched.len() >= CHUNK {
                    self.resolve()?;
                }
            }
        }
        Ok(())
    }

    /// Counts the event_id of `group` and lists it when it is missing; the group is empty
    /// after.
    fn flush(&mut self, group: &mut Group) -> Result<(), VerifyError> {
        let Some(first) = group.first.take() else {
            return Ok(());
        };
        let counted = self.count(first, &group.partitions, &group.records);
        // The lists' memory serves the next id.
        group.partitions.clear();
        group.records.clear();
        counted
    }

    fn count(
        &mut self,
        first: IdEntry,
        partitions: &[i32],
        records: &[(i32, i64)],
    ) -> Result<(), VerifyError> {
        self.total.distinct_event_ids += 1;
        for p in partitions {
            let c = self.counts.entry(*p).or_default();
            c.distinct_event_ids += 1;
            c.missing += u64::from(first.missing);
        }
        if !first.missing {
            return Ok(());
        }
        self.total.missing += 1;
        let mut detail = if first.refused.is_empty() {
            "no row with this event_id".to_owned()
        } else {
            format!("the table's column types refuse it: {}", first.refused)
        };
        if records.len() > 1 {
            detail.push_str(&format!(" ({} records of it in the window)", records.len()));
        }
        let d = Discrepancy {
            kind: Kind::Missing,
            partition: first.partition,
            offset: first.offset,
            event_id: Some(first.event_id),
            quarantined: Some(first.quarantined),
            detail,
        };
        if self.table.is_none() {
            return Ok(self.findings.push(d)?);
        }
        self.missing.push((d, records.to_vec()));
        if self.missing.len() >= CHUNK {
            self.resolve()?;
        }
        Ok(())
    }

    /// Asks the table what the waiting discrepancies need, and lists them.
    fn resolve(&mut self) -> Result<(), VerifyError> {
        let Some(table) = self.table.as_deref_mut() else {
            return Ok(());
        };
        let mut by_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        for (p, o) in self.missing.iter().flat_map(|(_, records)| records) {
            by_partition.entry(*p).or_default().push(*o);
        }
        let mut quarantined = HashSet::new();
        for (p, mut offsets) in by_partition {
            offsets.sort_unstable();
            offsets.dedup();
            for (o, _) in table.quarantined(p, &offsets)? {
                quarantined.insert((p, o));
            }
        }
        for (mut d, records) in self.missing.drain(..) {
            d.quarantined = Some(records.iter().any(|r| quarantined.contains(r)));
            self.findings.push(d)?;
        }
        let entries = std::mem::take(&mut self.mismatched);
        for (entry, Difference { fields, at }) in entries.iter().zip(table.differences(&entries)?) {
            if fields.is_empty() {
                continue;
            }
            self.counts.entry(entry.partition).or_default().mismatched += 1;
            self.total.mismatched += 1;
            self.findings.push(Discrepancy {
                kind: Kind::Mismatched,
                partition: entry.partition,
                offset: entry.offset,
                event_id: Some(entry.event_id.clone()),
                quarantined: None,
                detail: mismatch_detail(&fields, at.as_ref()),
            })?;
        }
        Ok(())
    }

    /// Counts and lists undecodable records of one partition with their quarantine.
    fn undecodable(&mut self, chunk: &mut Vec<UndecodableEntry>) -> Result<(), VerifyError> {
        let Some(partition) = chunk.first().map(|e| e.partition) else {
            return Ok(());
        };
        let offsets: Vec<i64> = chunk.iter().map(|e| e.offset).collect();
        let quarantine = match self.table.as_deref_mut() {
            Some(table) => table.quarantined(partition, &offsets)?,
            None => Vec::new(),
        };
        let c = self.counts.entry(partition).or_default();
        for e in chunk.drain(..) {
            let q = quarantine_reason(&quarantine, e.offset);
            c.quarantined += u64::from(q.is_some());
            self.total.quarantined += u64::from(q.is_some());
            self.findings
                .push(undecodable_finding(partition, e.offset, &e.reason, q))?;
        }
        Ok(())
    }
}

impl Runs {
    pub fn new() -> Runs {
        Runs {
            ids: Sorter::new(),
            facts: Sorter::new(),
            undecodable: Sorter::new(),
        }
    }

    pub fn push(&mut self, id: IdEntry, facts: FactEntry) -> io::Result<()> {
        self.ids.push(id)?;
        self.facts.push(facts)
    }

    /// An undecodable record to be looked up in the quarantine when the window is settled.
    pub fn push_undecodable(&mut self, entry: UndecodableEntry) -> io::Result<()> {
        self.undecodable.push(entry)
    }

    /// Counts distinct and missing event_ids (per partition: among its records; in total: over
    /// the window) and lists each missing id once, at its first record; then lists every id
    /// whose facts an earlier id already carries, naming that id. With a scanned `table`, each
    /// record is first compared with its row there, and the undecodable records pushed since
    /// are looked up in the quarantine.
    pub fn settle(
        self,
        counts: &mut BTreeMap<i32, Counts>,
        total: &mut Counts,
        findings: &mut Findings,
        table: Option<&mut dyn TableSide>,
    ) -> Result<(), VerifyError> {
        let limit = findings.limit();
        let Runs {
            ids,
            facts,
            undecodable,
        } = self;
        // The facts are settled beside the ids, on a thread of their own.
        std::thread::scope(|scope| {
            let facts = scope.spawn(move || same_facts(facts, limit));
            let mut settling = Settling {
                counts,
                total,
                findings,
                table,
                missing: Vec::new(),
                mismatched: Vec::new(),
            };
            let mut group = Group::default();
            for entry in ids.done()? {
                let mut entry = entry?;
                settling.compare(&mut entry)?;
                if group
                    .first
                    .as_ref()
                    .is_some_and(|f| f.event_id != entry.event_id)
                {
                    settling.flush(&mut group)?;
                }
                group.add(entry);
            }
            settling.flush(&mut group)?;
            settling.resolve()?;
            let mut chunk: Vec<UndecodableEntry> = Vec::new();
            for entry in undecodable.done()? {
                let entry = entry?;
                if chunk.len() >= CHUNK
                    || chunk.last().is_some_and(|l| l.partition != entry.partition)
                {
                    settling.undecodable(&mut chunk)?;
                }
                chunk.push(entry);
            }
            settling.undecodable(&mut chunk)?;
            let Settling {
                counts,
                total,
                findings,
                ..
            } = settling;
            let (by_partition, same_facts) = facts
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            for (p, n) in by_partition {
                counts.entry(p).or_default().duplicated_facts += n;
                total.duplicated_facts += n;
            }
            findings.adopt(same_facts, Kind::DuplicatedFacts)?;
            Ok(())
        })
    }
}

/// Lists every id whose facts an earlier id already carries, naming that id (the first id of
/// each group keeps them), and counts them per partition.
fn same_facts(
    sorted: Sorter<FactEntry>,
    limit: usize,
) -> Result<(BTreeMap<i32, u64>, Findings), VerifyError> {
    let mut counts: BTreeMap<i32, u64> = BTreeMap::new();
    let mut findings = Findings::new(limit)?;
    let mut keeper: Option<FactEntry> = None;
    // The id last listed of the keeper's facts; none listed yet, the keeper's own.
    let mut last_id: Option<String> = None;
    for entry in sorted.done()? {
        let entry = entry?;
        match &keeper {
            Some(k) if k.facts == entry.facts => {
                if entry.event_id == *last_id.as_ref().unwrap_or(&k.event_id) {
                    continue;
                }
                *counts.entry(entry.partition).or_default() += 1;
                findings.push(Discrepancy {
                    kind: Kind::DuplicatedFacts,
                    partition: entry.partition,
                    offset: entry.offset,
                    event_id: Some(entry.event_id.clone()),
                    quarantined: None,
                    detail: format!(
                        "same tenant, ticket, action, occurred_at and payload as event_id {} (partition {} offset {})",
                        k.event_id, k.partition, k.offset
                    ),
                })?;
                last_id = Some(entry.event_id);
            }
            _ => {
                last_id = None;
                keeper = Some(entry);
            }
        }
    }
    Ok((counts, findings))
}

#[cfg(test)]
mod tests {
    use super::super::sorted::RUN;
    use super::*;

    fn id(event_id: &str, partition: i32, offset: i64, missing: bool) -> IdEntry {
        IdEntry {
            event_id: event_id.into(),
            partition,
            offset,
            missing,
            quarantined: false,
            refused: String::new(),
            fields: [0; 5],
            payload: 0,
        }
    }

    fn fact(facts: u8, event_id: &str, partition: i32, offset: i64) -> FactEntry {
        FactEntry {
            facts: [facts; 16],
            event_id: event_id.into(),
            partition,
            offset,
        }
    }

    #[test]
    fn entries_survive_the_disk_round_trip() {
        let mut bytes = Vec::new();
        let mut e = id("é-1", 3, 1 << 40, true);
        e.refused = "SQLSTATE 22P02".into();
        e.fields = [1, u64::MAX, 3, 4, 5];
        e.payload = 6;
        e.encode(&mut bytes).unwrap();
        assert_eq!(IdEntry::decode(&mut bytes.as_slice()).unwrap(), e);
        let f = fact(7, "x", -1, 9);
        let mut bytes = Vec::new();
        f.encode(&mut bytes).unwrap();
        assert_eq!(FactEntry::decode(&mut bytes.as_slice()).unwrap(), f);
        assert_eq!(
            IdEntry::decode(&mut [].as_slice()).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        let u = UndecodableEntry {
            partition: 2,
            offset: -7,
            reason: "not json".into(),
        };
        let mut bytes = Vec::new();
        u.encode(&mut bytes).unwrap();
        assert_eq!(UndecodableEntry::decode(&mut bytes.as_slice()).unwrap(), u);
    }

    /// A scanned table as the merge sees it: rows by id, quarantined records, and a row whose
    /// text differs but which is the same event ("respelled").
    struct Table {
        rows: Vec<(&'static str, [u64; 5])>,
        next: usize,
        asked: Vec<String>,
        quarantined: Vec<(i32, i64)>,
    }

    impl TableSide for Table {
        fn fields(&mut self, event_id: &str) -> Result<Option<[u64; 5]>, VerifyError> {
            assert!(self.asked.last().is_none_or(|l| l.as_str() <= event_id));
            self.asked.push(event_id.to_owned());
            while self.rows.get(self.next).is_some_and(|r| r.0 < event_id) {
                self.next += 1;
            }
            Ok(self
                .rows
                .get(self.next)
                .filter(|r| r.0 == event_id)
                .map(|r| r.1))
        }

        fn quarantined(
            &mut self,
            partition: i32,
            offsets: &[i64],
        ) -> Result<Vec<(i64, String)>, VerifyError> {
            Ok(offsets
                .iter()
                .filter(|o| self.quarantined.contains(&(partition, **o)))
                .map(|o| (*o, "not json".to_owned()))
                .collect())
        }

        fn differences(&mut self, entries: &[IdEntry]) -> Result<Vec<Difference>, VerifyError> {
            Ok(entries
                .iter()
                .map(|e| Difference {
                    fields: match e.event_id.as_str() {
                        "respelled" => Vec::new(),
                        _ => vec!["action"],
                    },
                    at: None,
                })
                .collect())
        }
    }

    #[test]
    fn a_scanned_table_settles_missing_mismatched_and_quarantined_records() {
        let mut runs = Runs::new();
        let with = |mut e: IdEntry, fields: [u64; 5]| {
            e.fields = fields;
            e
        };
        for (i, f) in [
            (with(id("same", 0, 0, false), [1; 5]), fact(1, "same", 0, 0)),
            (with(id("gone", 0, 1, false), [2; 5]), fact(2, "gone", 0, 1)),
            (with(id("gone", 1, 5, false), [2; 5]), fact(2, "gone", 1, 5)),
            (
                with(id("other", 1, 6, false), [3; 5]),
                fact(3, "other", 1, 6),
            ),
            (
                with(id("respelled", 1, 8, false), [4; 5]),
                fact(4, "respelled", 1, 8),
            ),
        ] {
            runs.push(i, f).unwrap();
        }
        for (partition, offset) in [(1, 7), (0, 3)] {
            runs.push_undecodable(UndecodableEntry {
                partition,
                offset,
                reason: "not json".into(),
            })
            .unwrap();
        }
        let mut table = Table {
            rows: vec![("other", [9; 5]), ("respelled", [5; 5]), ("same", [1; 5])],
            next: 0,
            asked: Vec::new(),
            quarantined: vec![(1, 5), (1, 7)],
        };
        let (mut counts, mut total) = (BTreeMap::new(), Counts::default());
        let mut findings = Findings::new(10).unwrap();
        runs.settle(&mut counts, &mut total, &mut findings, Some(&mut table))
            .unwrap();
        assert_eq!(table.asked.len(), 5, "each record is compared once");
        assert_eq!(
            (
                total.distinct_event_ids,
                total.missing,
                total.mismatched,
                total.quarantined
            ),
            (4, 1, 1, 1)
        );
        assert_eq!((counts[&1].mismatched, counts[&0].mismatched), (1, 0));
        assert_eq!((counts[&1].quarantined, counts[&0].quarantined), (1, 0));
        let missing = findings.examples(Kind::Missing);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].event_id.as_deref(), Some("gone"));
        // One of its two records sits in the quarantine.
        assert_eq!(missing[0].quarantined, Some(true));
        let mismatched = findings.examples(Kind::Mismatched);
        assert_eq!(mismatched.len(), 1);
        assert_eq!(mismatched[0].event_id.as_deref(), Some("other"));
        assert!(mismatched[0].detail.contains("differs in action"));
        let undecodable: Vec<(i32, i64, Option<bool>)> = findings
            .examples(Kind::Undecodable)
            .iter()
            .map(|d| (d.partition, d.offset, d.quarantined))
            .collect();
        assert_eq!(undecodable, [(0, 3, Some(false)), (1, 7, Some(true))]);
    }

    #[test]
    fn redeliveries_count_once_and_rewrapped_facts_name_the_first_id() {
        let mut runs = Runs::new();
        // e1 twice (a redelivery) in partition 0, e2 missing in partitions 0 and 1, e3 carries
        // e1's facts under another id.
        for (i, f) in [
            (id("e1", 0, 0, false), fact(1, "e1", 0, 0)),
            (id("e2", 0, 1, true), fact(2, "e2", 0, 1)),
            (id("e1", 0, 2, false), fact(1, "e1", 0, 2)),
            (id("e3", 1, 0, false), fact(1, "e3", 1, 0)),
            (id("e2", 1, 1, true), fact(2, "e2", 1, 1)),
        ] {
            runs.push(i, f).unwrap();
        }
        let (mut counts, mut total) = (BTreeMap::new(), Counts::default());
        let mut findings = Findings::new(10).unwrap();
        runs.settle(&mut counts, &mut total, &mut findings, None)
            .unwrap();
        assert_eq!(
            (
                total.distinct_event_ids,
                total.missing,
                total.duplicated_facts
            ),
            (3, 1, 1)
        );
        assert_eq!(counts[&0].distinct_event_ids, 2);
        assert_eq!((counts[&1].distinct_event_ids, counts[&1].missing), (2, 1));
        let missing = findings.examples(Kind::Missing);
        assert_eq!(missing.len(), 1);
        assert_eq!((missing[0].partition, missing[0].offset), (0, 1));
        assert!(missing[0].detail.contains("2 records"), "{:?}", missing[0]);
        let dup = &findings.examples(Kind::DuplicatedFacts)[0];
        assert_eq!(dup.event_id.as_deref(), Some("e3"));
        assert!(dup.detail.contains("event_id e1 (partition 0 offset 0)"));
    }

    #[test]
    fn runs_larger_than_memory_are_merged_in_order() {
        let mut runs = Runs::new();
        let n = RUN as i64 * 2 + 17;
        for o in (0..n).rev() {
            let e = format!("e{o:08}");
            runs.push(id(&e, 0, o, o % 1000 == 0), fact(0, &e, 0, o))
                .unwrap();
        }
        let (mut counts, mut total) = (BTreeMap::new(), Counts::default());
        let mut findings = Findings::new(3).unwrap();
        runs.settle(&mut counts, &mut total, &mut findings, None)
            .unwrap();
        assert_eq!(total.distinct_event_ids, n as u64);
        assert_eq!(total.missing, (n as u64).div_ceil(1000));
        assert_eq!(total.duplicated_facts, n as u64 - 1);
        assert_eq!(
            findings.examples(Kind::Missing)[1].event_id.as_deref(),
            Some("e00001000")
        );
    }
}
