//! The discrepancies a verification finds, kept in temporary files (one per kind) so the full
//! list never has to fit in memory, with the first few of each kind at hand as examples.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};

use serde::{Deserialize, Serialize};

use crate::store::StoredAt;

/// What is wrong with a record, or between a record and the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An event of the window has no row with its event_id.
    Missing,
    /// The row with the event's id holds other content.
    Mismatched,
    /// The same tenant, ticket, action, time and payload under another event_id.
    DuplicatedFacts,
    /// The record is not an audit event.
    Undecodable,
}

impl Kind {
    /// Every kind, in the order they are listed.
    pub const ALL: [Kind; 4] = [
        Kind::Missing,
        Kind::Mismatched,
        Kind::DuplicatedFacts,
        Kind::Undecodable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Missing => "missing",
            Kind::Mismatched => "mismatched",
            Kind::DuplicatedFacts => "duplicated_facts",
            Kind::Undecodable => "undecodable",
        }
    }
}

/// One discrepancy: where in the log, which event, and what was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discrepancy {
    pub kind: Kind,
    pub partition: i32,
    pub offset: i64,
    pub event_id: Option<String>,
    /// Whether the record sits in the replay's quarantine table (missing and undecodable records).
    pub quarantined: Option<bool>,
    pub detail: String,
}

/// What a mismatched record's row differs in, and where the row was stored from.
pub(crate) fn mismatch_detail(fields: &[&str], at: Option<&StoredAt>) -> String {
    let mut detail = format!("the stored row differs in {}", fields.join(", "));
    if let Some(at) = at {
        detail.push_str(&format!(
            " (stored from {}[{}]@{})",
            at.topic, at.partition, at.offset
        ));
    }
    detail
}

/// Why a replay quarantined the record at `offset`, from `quarantine` (sorted by offset, each
/// with its reason, as [`crate::store::Snapshot::quarantined`] returns it).
pub(crate) fn quarantine_reason(quarantine: &[(i64, String)], offset: i64) -> Option<&str> {
    quarantine
        .binary_search_by_key(&offset, |(o, _)| *o)
        .ok()
        .map(|i| quarantine[i].1.as_str())
}

/// An undecodable record, and whether (and why) a replay quarantined it.
pub(crate) fn undecodable_finding(
    partition: i32,
    offset: i64,
    reason: &str,
    quarantined: Option<&str>,
) -> Discrepancy {
    Discrepancy {
        kind: Kind::Undecodable,
        partition,
        offset,
        event_id: None,
        quarantined: Some(quarantined.is_some()),
        detail: match quarantined {
            Some(why) if why == reason => format!("{reason}; quarantined"),
            Some(why) => format!("{reason}; quarantined as: {why}"),
            None => format!("{reason}; not in the quarantine table"),
        },
    }
}

struct Spill {
    file: BufWriter<File>,
    count: u64,
    examples: Vec<Discrepancy>,
}

/// Every discrepancy found, by kind.
pub struct Findings {
    spills: Vec<Spill>,
    limit: usize,
}

impl Findings {
    /// Keeps the first `limit` discrepancies of each kind as examples.
    pub(crate) fn new(limit: usize) -> io::Result<Findings> {
        let spills = Kind::ALL
            .iter()
            .map(|_| {
                Ok(Spill {
                    file: BufWriter::new(tempfile::tempfile()?),
                    count: 0,
                    examples: Vec::new(),
                })
            })
            .collect::<io::Result<_>>()?;
        Ok(Findings { spills, limit })
    }

    fn spill(&self, kind: Kind) -> &Spill {
        &self.spills[Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0)]
    }

    pub(crate) fn push(&mut self, d: Discrepancy) -> io::Result<()> {
        let limit = self.limit;
        let i = Kind::ALL.iter().position(|&k| k == d.kind).unwrap_or(0);
        let spill = &mut self.spills[i];
        serde_json::to_writer(&mut spill.file, &d)?;
        spill.file.write_all(b"\n")?;
        spill.count += 1;
        if spill.examples.len() < limit {
            spill.examples.push(d);
        }
        Ok(())
    }

    /// How many examples of each kind are kept.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Takes what `other` found of `kind` after what this found of it.
    pub(crate) fn adopt(&mut self, other: Findings, kind: Kind) -> io::Result<()> {
        let i = Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
        let limit = self.limit;
        let mut theirs = other
            .spills
            .into_iter()
            .nth(i)
            .ok_or_else(|| io::Error::other("no such kind"))?;
        let ours = &mut self.spills[i];
        if ours.count == 0 {
            theirs.examples.truncate(limit);
            *ours = theirs;
            return Ok(());
        }
        let mut file = theirs.file.into_inner().map_err(|e| e.into_error())?;
        file.seek(SeekFrom::Start(0))?;
        io::copy(&mut file, &mut ours.file)?;
        ours.count += theirs.count;
        let room = limit.saturating_sub(ours.examples.len());
        ours.examples.extend(theirs.examples.into_iter().take(room));
        Ok(())
    }

    /// How many of `kind` were found.
    pub fn count(&self, kind: Kind) -> u64 {
        self.spill(kind).count
    }

    /// The first ones of `kind`, at most the limit.
    pub fn examples(&self, kind: Kind) -> &[Discrepancy] {
        &self.spill(kind).examples
    }

    /// Every discrepancy, kind after kind, read back from the files.
    pub fn read_back(self) -> io::Result<impl Iterator<Item = io::Result<Discrepancy>>> {
        let mut readers = Vec::with_capacity(self.spills.len());
        for spill in self.spills {
            let mut file = spill.file.into_inner().map_err(|e| e.into_error())?;
            file.seek(SeekFrom::Start(0))?;
            readers.push(BufReader::new(file).lines());
        }
        Ok(readers.into_iter().flatten().map(|line| {
            let line = line?;
            serde_json::from_str(&line).map_err(io::Error::other)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(kind: Kind, offset: i64) -> Discrepancy {
        Discrepancy {
            kind,
            partition: 0,
            offset,
            event_id: Some(format!("e{offset}")),
            quarantined: None,
            detail: "x".into(),
        }
    }

    #[test]
    fn examples_stop_at_the_limit_and_the_full_list_comes_back_by_kind() {
        let mut f = Findings::new(2).unwrap();
        for o in 0..5 {
            f.push(d(Kind::Undecodable, o)).unwrap();
            f.push(d(Kind::Missing, 10 + o)).unwrap();
        }
        assert_eq!(f.count(Kind::Missing), 5);
        assert_eq!(f.examples(Kind::Missing).len(), 2);
        assert_eq!(f.count(Kind::Mismatched), 0);
        let all: Vec<Discrepancy> = f.read_back().unwrap().map(Result::unwrap).collect();
        assert_eq!(all.len(), 10);
        assert_eq!(all[0], d(Kind::Missing, 10));
        assert_eq!(all[9], d(Kind::Undecodable, 4));
    }

    #[test]
    fn adopted_findings_follow_what_was_found_of_their_kind() {
        let mut ours = Findings::new(2).unwrap();
        let mut theirs = Findings::new(2).unwrap();
        ours.push(d(Kind::Missing, 1)).unwrap();
        for o in 0..3 {
            theirs.push(d(Kind::DuplicatedFacts, o)).unwrap();
        }
        theirs.push(d(Kind::Missing, 99)).unwrap();
        ours.adopt(theirs, Kind::DuplicatedFacts).unwrap();
        assert_eq!(ours.count(Kind::DuplicatedFacts), 3);
        assert_eq!(ours.examples(Kind::DuplicatedFacts).len(), 2);
        assert_eq!(
            ours.count(Kind::Missing),
            1,
            "only the kind asked for is taken"
        );
        // Into a kind that already has findings, after them.
        let mut more = Findings::new(2).unwrap();
        more.push(d(Kind::DuplicatedFacts, 7)).unwrap();
        ours.adopt(more, Kind::DuplicatedFacts).unwrap();
        let all: Vec<Discrepancy> = ours.read_back().unwrap().map(Result::unwrap).collect();
        let offsets: Vec<i64> = all
            .iter()
            .filter(|x| x.kind == Kind::DuplicatedFacts)
            .map(|x| x.offset)
            .collect();
        assert_eq!(offsets, [0, 1, 2, 7]);
        assert_eq!(all.len(), 5);
    }
}
