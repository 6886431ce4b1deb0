//! One batch made durable with its checkpoint, the same way on every backend: audit rows in
//! (first stored wins), the ones not inserted classified as duplicate or conflict, records the
//! database refuses on their data found by splitting and quarantined, then the checkpoint moved
//! with a compare-and-set and the batch recorded — all in the caller's one transaction.

use std::collections::{HashMap, HashSet};

use super::error::StoreError;
use super::inspect::Adoption;
use super::ledger::{Batch, Counters, Entry, WriteError};
use super::param::Param;
use crate::event::EventRecord;

/// A statement that failed: on a record's data (split, quarantine), or on anything else
/// (the run stops with the last durable offset).
#[derive(Debug)]
pub(crate) enum Fault {
    Data(String),
    Infra(StoreError),
}

impl From<StoreError> for Fault {
    fn from(e: StoreError) -> Self {
        Fault::Infra(e)
    }
}

/// Where a row came from in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// The stored version of an event id, compared with an incoming record in the target's terms.
#[derive(Debug, Clone)]
pub(crate) struct StoredVersion {
    /// The stored row's fields as the database renders them.
    pub stored: EventRecord,
    /// The incoming record's fields converted through the column types, where a column is not
    /// text (so `timestamptz` and `jsonb` compare as the database would store them).
    pub incoming: Option<EventRecord>,
    pub location: Option<Location>,
}

/// A conflict found: the version stored now and the other one.
#[derive(Debug, Clone)]
pub(crate) struct Conflict {
    pub event_id: String,
    pub stored: Option<Location>,
    pub stored_hash: String,
    pub incoming: Location,
    pub incoming_hash: String,
}

/// A quarantined record and the reason.
pub(crate) struct Quarantine<'e, 'a> {
    pub entry: &'e Entry<'a>,
    pub reason: String,
}

/// What a backend offers inside one open transaction.
pub(crate) trait BatchTx {
    /// Inserts the rows with ON CONFLICT (event_id) DO NOTHING; per row, `Ok(inserted)`, or
    /// `Err(the database's reason)` for a row refused on its data, which leaves nothing while
    /// every other row goes in.
    fn insert_each(&mut self, rows: &[&Entry<'_>]) -> Result<InsertedEach, StoreError>;
    /// The stored version of each row's event id (`None` when there is none).
    fn stored(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<Option<StoredVersion>>, StoreError>;
    /// Replaces the stored version of the row's event id with the row.
    fn replace(&mut self, row: &Entry<'_>) -> Result<(), Fault>;
    fn quarantine(&mut self, plan_id: &str, rows: &[Quarantine<'_, '_>]) -> Result<(), StoreError>;
    fn conflicts(&mut self, plan_id: &str, conflicts: &[Conflict]) -> Result<(), StoreError>;
    /// Moves the checkpoint from `batch.first` to `batch.next` and adds the counters, only
    /// where it still is at `batch.first` (and, with the scope's owner, belongs to it).
    fn advance(&mut self, written: Written<'_>) -> Result<Advance, StoreError>;
    /// Records the batch among the plan's batches, with the owner that wrote it.
    fn record_batch(&mut self, written: Written<'_>) -> Result<(), StoreError>;
}

/// A batch whose rows are in, as its bookkeeping takes it: the plan (and owner) it was written
/// for, the batch, and what became of its records.
#[derive(Clone, Copy)]
pub(crate) struct Written<'w> {
    pub scope: &'w PlanScope<'w>,
    pub batch: &'w Batch<'w>,
    pub counters: &'w Counters,
}

impl<'w> Written<'w> {
    /// The values of the bookkeeping's `ADVANCE` (`$1`…`$13`): where the checkpoint moves from
    /// and to, the counters it adds, `at` as the time, and the owner it must belong to.
    pub(crate) fn advance_params(self, at: &'w str) -> [Param<'w>; 13] {
        let (scope, batch, c) = (self.scope, self.batch, self.counters);
        [
            Param::Text(scope.plan_id),
            Param::Int4(batch.partition),
            Param::Int8(batch.first),
            Param::Int8(batch.next),
            Param::count(c.records),
            Param::count(c.inserted),
            Param::count(c.duplicates),
            Param::count(c.conflicts),
            Param::count(c.quarantined),
            Param::count(c.markers),
            Param::count(c.aborted),
            Param::Text(at),
            Param::text(scope.owner),
        ]
    }

    /// The values of the bookkeeping's `INSERT_BATCH` (`$1`…`$7`), applied `at`.
    pub(crate) fn batch_params(self, at: &'w str) -> [Param<'w>; 7] {
        let (scope, batch) = (self.scope, self.batch);
        [
            Param::Text(scope.plan_id),
            Param::Int4(batch.partition),
            Param::Int8(batch.first),
            Param::Int8(batch.next),
            Param::count(batch.entries.len() as u64),
            Param::text(scope.owner),
            Param::Text(at),
        ]
    }
}

/// Per row of an insert, whether it went in, or why the database refused it.
pub(crate) type InsertedEach = Vec<Result<bool, String>>;

/// A backend that inserts many rows in one statement, which a row refused on its data fails
/// whole: the rows go in under a savepoint, split on a refusal (see [`insert_splitting`]).
pub(crate) trait SplitInsert {
    fn savepoint(&mut self) -> Result<(), StoreError>;
    fn release(&mut self) -> Result<(), StoreError>;
    fn rollback_to(&mut self) -> Result<(), StoreError>;
    /// Inserts the rows with ON CONFLICT (event_id) DO NOTHING; for each, whether it was
    /// inserted. Called inside the savepoint [`savepoint`](Self::savepoint) made, to which it
    /// may roll back itself before trying another way. A data error fails the whole call
    /// (after which the caller rolls back to its savepoint).
    fn insert(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<bool>, Fault>;
}

/// What the checkpoint's compare-and-set did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Advance {
    /// The checkpoint moved past the batch.
    Moved,
    /// The checkpoint was not where the batch began, or belongs to another owner: it stays
    /// where it is (`None`: the plan records no such partition).
    Refused { found: Option<i64> },
}

/// What the writer knows of the plan it writes for.
pub struct PlanScope<'p> {
    pub plan_id: &'p str,
    pub topic: &'p str,
    /// `(partition, start, stop)` of every partition of the plan.
    pub ranges: &'p [(i32, i64, i64)],
    pub owner: Option<&'p str>,
    /// Stop at a record the database refuses instead of quarantining it.
    pub fail_on_refused: bool,
}

impl PlanScope<'_> {
    /// Whether a stored row came from this plan's ranges (so the rule "lowest partition and
    /// offset of the plan wins" may replace it, giving one result whatever the order in which
    /// partitions ran).
    fn covers(&self, at: &Location) -> bool {
        at.topic == self.topic
            && self.ranges.iter().any(|&(p, start, stop)| {
                p == at.partition && at.offset >= start && at.offset < stop
            })
    }
}

/// An entry's values for the columns `adoption` writes, in the order of
/// [`Adoption::written_columns`]: the event's, then the record's.
pub(crate) fn row<'e>(
    adoption: &Adoption,
    entry: &'e Entry<'_>,
    event: &'e EventRecord,
) -> Vec<Param<'e>> {
    let mut values: Vec<Param<'e>> = event.columns().into_iter().map(Param::Text).collect();
    values.extend(adoption.record_columns.iter().map(|column| match *column {
        "record" => Param::Bytes(entry.raw),
        "topic" => Param::Text(entry.topic),
        "partition" => Param::Int4(entry.partition),
        "record_offset" => Param::Int8(entry.offset),
        _ => entry.timestamp.map_or(Param::Null, Param::Int8),
    }));
    values
}

fn location(entry: &Entry<'_>) -> Location {
    Location {
        topic: entry.topic.to_owned(),
        partition: entry.partition,
        offset: entry.offset,
    }
}

/// The version of an event id the table holds once the batch is in.
enum Settled<'e, 'a> {
    /// Inserted from this entry.
    Inserted(&'e Entry<'a>),
    /// Its content hash and where it came from.
    Known(String, Option<Location>),
}

impl Settled<'_, '_> {
    /// The hash and place, computed once.
    fn resolve(&mut self) -> (&String, &Option<Location>) {
        if let Settled::Inserted(entry) = *self {
            let hash = entry
                .decoded
                .as_ref()
                .map(EventRecord::content_hash)
                .unwrap_or_default();
            *self = Settled::Known(hash, Some(location(entry)));
        }
        match self {
            Settled::Known(hash, at) => (hash, at),
            Settled::Inserted(_) => unreachable!("resolved above"),
        }
    }
}

/// Inserts `rows`, splitting on data errors until each refused record stands alone; returns,
/// per row, `Ok(inserted)` or `Err(the database's reason)`.
pub(crate) fn insert_splitting<T: SplitInsert + ?Sized>(
    tx: &mut T,
    rows: &[&Entry<'_>],
) -> Result<InsertedEach, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    tx.savepoint()?;
    match tx.insert(rows) {
        Ok(inserted) => {
            tx.release()?;
            Ok(inserted.into_iter().map(Ok).collect())
        }
        Err(Fault::Infra(e)) => Err(e),
        Err(Fault::Data(reason)) => {
            tx.rollback_to()?;
            tx.release()?;
            if rows.len() == 1 {
                return Ok(vec![Err(reason)]);
            }
            let (left, right) = rows.split_at(rows.len() / 2);
            let mut out = insert_splitting(tx, left)?;
            out.extend(insert_splitting(tx, right)?);
            Ok(out)
        }
    }
}

/// Compares each row that was not inserted because its event id is stored already with the
/// stored version: the same content is a duplicate; other content is a conflict, and where the
/// row comes first in this plan's ranges it replaces the stored version.
fn settle_existing<'e, 'a>(
    tx: &mut dyn BatchTx,
    scope: &PlanScope<'_>,
    existing: Vec<&'e Entry<'a>>,
    counters: &mut Counters,
    conflicts: &mut Vec<Conflict>,
    settled: &mut HashMap<&'e str, Settled<'e, 'a>>,
) -> Result<(), WriteError> {
    if existing.is_empty() {
        return Ok(());
    }
    let versions = tx.stored(&existing)?;
    for (entry, version) in existing.into_iter().zip(versions) {
        let Ok(event) = &entry.decoded else { continue };
        let Some(version) = version else {
            // Not inserted, yet not found: the key matched under the column's own
            // equality in a way the lookup did not; the row is there, so count it.
            counters.duplicates += 1;
            continue;
        };
        let incoming_hash = version.incoming.as_ref().unwrap_or(event).content_hash();
        let stored_hash = version.stored.content_hash();
        let id = event.event_id.as_str();
        if incoming_hash == stored_hash {
            counters.duplicates += 1;
            settled.insert(id, Settled::Known(stored_hash, version.location));
            continue;
        }
        counters.conflicts += 1;
        let here = location(entry);
        let wins = version.location.as_ref().is_some_and(|at| {
            scope.covers(at) && (here.partition, here.offset) < (at.partition, at.offset)
        });
        if wins {
            match tx.replace(entry) {
                Ok(()) => {}
                Err(Fault::Infra(e)) => return Err(e.into()),
                Err(Fault::Data(reason)) => {
                    return Err(StoreError::Unavailable(format!(
                        "replacing event {id} with its version at {}[{}]@{}: {reason}",
                        here.topic, here.partition, here.offset
                    ))
                    .into())
                }
            }
            let before = version.location.clone().unwrap_or_else(|| here.clone());
            conflicts.push(Conflict {
                event_id: id.to_owned(),
                stored: Some(here.clone()),
                stored_hash: incoming_hash.clone(),
                incoming: before,
                incoming_hash: stored_hash,
            });
            settled.insert(id, Settled::Known(incoming_hash, Some(here)));
        } else {
            conflicts.push(Conflict {
                event_id: id.to_owned(),
                stored: version.location.clone(),
                stored_hash: stored_hash.clone(),
                incoming: here,
                incoming_hash,
            });
            settled.insert(id, Settled::Known(stored_hash, version.location));
        }
    }
    Ok(())
}

/// Writes `batch` inside the open transaction `tx` and moves the checkpoint; the caller
/// commits on `Ok` and rolls back on `Err`.
pub(crate) fn write(
    tx: &mut dyn BatchTx,
    scope: &PlanScope<'_>,
    batch: &Batch<'_>,
) -> Result<Counters, WriteError> {
    let mut counters = Counters {
        records: batch.entries.len() as u64,
        markers: batch.markers,
        aborted: batch.aborted,
        ..Counters::default()
    };
    let mut quarantine: Vec<Quarantine<'_, '_>> = Vec::new();
    let mut conflicts: Vec<Conflict> = Vec::new();
    // Per event id, the version the table holds once this batch is in: its hash and place.
    // A row this batch inserted keeps only its entry: most ids never come again, and the hash
    // (a canonical form of the payload, digested) is computed when one does.
    let mut settled: HashMap<&str, Settled<'_, '_>> = HashMap::with_capacity(batch.entries.len());
    let mut pending: Vec<&Entry<'_>> = Vec::with_capacity(batch.entries.len());
    for entry in &batch.entries {
        match &entry.decoded {
            Ok(_) => pending.push(entry),
            Err(reason) => quarantine.push(Quarantine {
                entry,
                reason: reason.clone(),
            }),
        }
    }
    // Rounds: the first occurrence of each unsettled id is inserted; later occurrences wait
    // for the next round, where they compare with what the first left (or are tried
    // themselves when the first was refused).
    while !pending.is_empty() {
        let mut firsts: Vec<&Entry<'_>> = Vec::new();
        let mut later: Vec<&Entry<'_>> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::with_capacity(pending.len());
        for entry in pending.drain(..) {
            let Ok(event) = &entry.decoded else { continue };
            let id = event.event_id.as_str();
            if let Some(known) = settled.get_mut(id) {
                let (hash, stored_at) = known.resolve();
                let incoming_hash = event.content_hash();
                if &incoming_hash == hash {
                    counters.duplicates += 1;
                } else {
                    conflicts.push(Conflict {
                        event_id: id.to_owned(),
                        stored: stored_at.clone(),
                        stored_hash: hash.clone(),
                        incoming: location(entry),
                        incoming_hash,
                    });
                    counters.conflicts += 1;
                }
            } else if seen.insert(id) {
                firsts.push(entry);
            } else {
                later.push(entry);
            }
        }
        let results = tx.insert_each(&firsts)?;
        let mut existing: Vec<&Entry<'_>> = Vec::new();
        for (entry, result) in firsts.iter().zip(results) {
            let Ok(event) = &entry.decoded else { continue };
            match result {
                Ok(true) => {
                    counters.inserted += 1;
                    settled.insert(event.event_id.as_str(), Settled::Inserted(entry));
                }
                Ok(false) => existing.push(entry),
                Err(reason) if scope.fail_on_refused => {
                    return Err(WriteError::Refused {
                        offset: entry.offset,
                        reason,
                    })
                }
                Err(reason) => quarantine.push(Quarantine { entry, reason }),
            }
        }
        settle_existing(
            tx,
            scope,
            existing,
            &mut counters,
            &mut conflicts,
            &mut settled,
        )?;
        pending = later;
    }
    counters.quarantined = quarantine.len() as u64;
    if !quarantine.is_empty() {
        tx.quarantine(scope.plan_id, &quarantine)?;
    }
    if !conflicts.is_empty() {
        tx.conflicts(scope.plan_id, &conflicts)?;
    }
    let written = Written {
        scope,
        batch,
        counters: &counters,
    };
    if let Advance::Refused { found } = tx.advance(written)? {
        return Err(WriteError::CheckpointMoved {
            partition: batch.partition,
            expected: batch.first,
            found,
        });
    }
    tx.record_batch(written)?;
    Ok(counters)
}

/// Whether a PostgreSQL SQLSTATE is about the data of a row (so splitting finds the record)
/// rather than the connection, the server or the schema.
pub(crate) fn postgres_data_error(code: &str) -> bool {
    code.starts_with("22") || code.starts_with("23")
}
