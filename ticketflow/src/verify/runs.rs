//! Sorted runs on disk: what must be counted over the whole window — distinct event_ids, the
//! ids with no row, the same facts under several ids — is pushed as small entries into external
//! sorters (bounded memory, spilled to temporary files) and settled in one ordered pass each.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use extsort::{ExternalSorter, PushExternalSorter, Sortable};

use super::findings::{Discrepancy, Findings, Kind};
use super::report::Counts;

/// Entries kept in memory before a sorted run is written to disk: the sorter writes a run once
/// it holds one more than this, so its buffer fills exactly a power of two and never grows
/// past it.
const RUN: usize = (1 << 17) - 1;

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
}

/// One decodable record, keyed by what happened (its facts digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FactEntry {
    pub facts: [u8; 16],
    pub event_id: String,
    pub partition: i32,
    pub offset: i64,
}

fn write_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u32).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn read_str<R: Read>(r: &mut R) -> io::Result<String> {
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

impl Sortable for IdEntry {
    fn encode<W: Write>(&self, w: &mut W) -> io::Result<()> {
        write_str(w, &self.event_id)?;
        w.write_all(&self.partition.to_le_bytes())?;
        w.write_all(&self.offset.to_le_bytes())?;
        w.write_all(&[u8::from(self.missing) | (u8::from(self.quarantined) << 1)])?;
        write_str(w, &self.refused)
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
        })
    }
}

impl Sortable for FactEntry {
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
}

type Cmp<T> = fn(&T, &T) -> Ordering;

fn by_id(a: &IdEntry, b: &IdEntry) -> Ordering {
    (&a.event_id, a.partition, a.offset).cmp(&(&b.event_id, b.partition, b.offset))
}

fn by_facts(a: &FactEntry, b: &FactEntry) -> Ordering {
    (&a.facts, &a.event_id, a.partition, a.offset).cmp(&(
        &b.facts,
        &b.event_id,
        b.partition,
        b.offset,
    ))
}

/// Both sorters of one verification.
pub(crate) struct Runs {
    ids: PushExternalSorter<IdEntry, Cmp<IdEntry>>,
    facts: PushExternalSorter<FactEntry, Cmp<FactEntry>>,
}

impl Runs {
    pub fn new() -> Runs {
        Runs {
            ids: ExternalSorter::new()
                .with_segment_size(RUN)
                .pushed_by(by_id as Cmp<IdEntry>),
            facts: ExternalSorter::new()
                .with_segment_size(RUN)
                .pushed_by(by_facts as Cmp<FactEntry>),
        }
    }

    pub fn push(&mut self, id: IdEntry, facts: FactEntry) -> io::Result<()> {
        self.ids.push(id)?;
        self.facts.push(facts)
    }

    /// Counts distinct and missing event_ids (per partition: among its records; in total: over
    /// the window) and lists each missing id once, at its first record; then lists every id
    /// whose facts an earlier id already carries, naming that id.
    pub fn settle(
        self,
        counts: &mut BTreeMap<i32, Counts>,
        total: &mut Counts,
        findings: &mut Findings,
    ) -> io::Result<()> {
        let mut group: Option<(IdEntry, Vec<i32>, u64)> = None;
        let mut flush =
            |group: (IdEntry, Vec<i32>, u64), findings: &mut Findings| -> io::Result<()> {
                let (first, partitions, records) = group;
                total.distinct_event_ids += 1;
                for p in &partitions {
                    let c = counts.entry(*p).or_default();
                    c.distinct_event_ids += 1;
                    c.missing += u64::from(first.missing);
                }
                if first.missing {
                    total.missing += 1;
                    let mut detail = if first.refused.is_empty() {
                        "no row with this event_id".to_owned()
                    } else {
                        format!("the table's column types refuse it: {}", first.refused)
                    };
                    if records > 1 {
                        detail.push_str(&format!(" ({records} records of it in the window)"));
                    }
                    findings.push(Discrepancy {
                        kind: Kind::Missing,
                        partition: first.partition,
                        offset: first.offset,
                        event_id: Some(first.event_id),
                        quarantined: Some(first.quarantined),
                        detail,
                    })?;
                }
                Ok(())
            };
        for entry in self.ids.done()? {
            let entry = entry?;
            match &mut group {
                Some((first, partitions, records)) if first.event_id == entry.event_id => {
                    *records += 1;
                    if partitions.last() != Some(&entry.partition) {
                        partitions.push(entry.partition);
                    }
                    first.missing |= entry.missing;
                    first.quarantined |= entry.quarantined;
                }
                _ => {
                    if let Some(done) = group.take() {
                        flush(done, findings)?;
                    }
                    let partition = entry.partition;
                    group = Some((entry, vec![partition], 1));
                }
            }
        }
        if let Some(done) = group.take() {
            flush(done, findings)?;
        }
        // Same facts: the first id of each group keeps them; every other id is listed.
        let mut keeper: Option<FactEntry> = None;
        let mut last_id = String::new();
        for entry in self.facts.done()? {
            let entry = entry?;
            match &keeper {
                Some(k) if k.facts == entry.facts => {
                    if entry.event_id == last_id {
                        continue;
                    }
                    total.duplicated_facts += 1;
                    counts.entry(entry.partition).or_default().duplicated_facts += 1;
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
                    last_id = entry.event_id;
                }
                _ => {
                    last_id = entry.event_id.clone();
                    keeper = Some(entry);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(event_id: &str, partition: i32, offset: i64, missing: bool) -> IdEntry {
        IdEntry {
            event_id: event_id.into(),
            partition,
            offset,
            missing,
            quarantined: false,
            refused: String::new(),
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
        runs.settle(&mut counts, &mut total, &mut findings).unwrap();
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
        runs.settle(&mut counts, &mut total, &mut findings).unwrap();
        assert_eq!(total.distinct_event_ids, n as u64);
        assert_eq!(total.missing, (n as u64).div_ceil(1000));
        assert_eq!(total.duplicated_facts, n as u64 - 1);
        assert_eq!(
            findings.examples(Kind::Missing)[1].event_id.as_deref(),
            Some("e00001000")
        );
    }
}
