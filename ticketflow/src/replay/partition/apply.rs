//! The writing side of a bounded replay: decode a gathered batch, make it durable (in a replay
//! target together with its checkpoint, in one transaction, which may hold batches of other
//! partitions too), and only then commit the offset after it for the replay group — Kafka's
//! committed offset is visible progress, never ahead of what the database holds.

use std::collections::HashMap;

use super::read::Gathered;
use super::{BadRecords, ReplayConsumer, ReplayError, ReplayErrorKind, ReplayOptions, ReplayPlan};
use crate::event::{DecodeError, EventRecord};
use crate::store::{AuditStore, Batch, Counters, PlanScope, ReplayTarget, StoreError, WriteError};

/// Where a replay's batches become durable: on a thread of its own while the next batch is
/// read.
pub trait BatchWriter: Send {
    /// Writes `batch`; on `Ok` every entry is written, and so is the checkpoint where the
    /// writer keeps one (durable now, or with the transaction holding it). On `Err` nothing of
    /// the batch is.
    fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError>;

    /// Called after [`write`](Self::write) of the batch of `partition` ending at `next`: the
    /// offsets durable by now that Kafka has not been told yet, per partition — the batch
    /// itself unless the writer holds it in a transaction still open.
    fn durable(&mut self, partition: i32, next: i64) -> Result<Vec<(i32, i64)>, WriteError> {
        Ok(vec![(partition, next)])
    }
}

/// The lesson's audit store as a writer: each event in its own transaction, a duplicate
/// recognised by the unique key (at-least-once attempts, persisted once). It keeps no
/// checkpoint and has no quarantine.
pub struct StoreWriter<'a> {
    store: &'a mut dyn AuditStore,
}

impl<'a> StoreWriter<'a> {
    pub fn new(store: &'a mut dyn AuditStore) -> Self {
        StoreWriter { store }
    }
}

impl BatchWriter for StoreWriter<'_> {
    fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError> {
        let mut counters = Counters {
            records: batch.entries.len() as u64,
            ..Counters::default()
        };
        for entry in &batch.entries {
            let event = match &entry.decoded {
                Ok(record) => record
                    .to_event()
                    .map_err(|e| WriteError::Store(StoreError::Unavailable(e.to_string())))?,
                Err(reason) => {
                    return Err(WriteError::Store(StoreError::Unavailable(format!(
                        "offset {}: {reason}; this store keeps no quarantine",
                        entry.offset
                    ))))
                }
            };
            if self.store.apply_once(&event)? {
                counters.inserted += 1;
            } else {
                counters.duplicates += 1;
            }
        }
        Ok(counters)
    }
}

/// A replay target as a writer for one plan: each batch with its checkpoint, exactly once.
pub struct TargetWriter<'a> {
    pub target: &'a mut dyn ReplayTarget,
    pub scope: PlanScope<'a>,
    /// Batches share transactions, across partitions; `None`: each batch is one.
    pub shared: Option<&'a mut SharedTransaction>,
}

/// Times a batch is written when the database ends it for running into another transaction.
const TRANSIENT_ATTEMPTS: u32 = 5;

impl BatchWriter for TargetWriter<'_> {
    /// A batch the database rolled back for running into another transaction (a deadlock: two
    /// partitions carrying the same event ids in another order) is written again. Before that
    /// the open transaction is committed — the batches in it stand, each with its checkpoint —
    /// since the rows it holds may be what the other transaction waits for, and writing the
    /// batch again inside it would meet the same wait.
    fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError> {
        let mut attempt = 1;
        loop {
            if let Some(shared) = self.shared.as_deref_mut().filter(|s| !s.open) {
                self.target.begin()?;
                shared.open = true;
            }
            match self.target.write_batch(&self.scope, batch) {
                Err(WriteError::Store(e)) if e.is_transient() && attempt < TRANSIENT_ATTEMPTS => {
                    tracing::warn!(
                        "partition {}: the batch at offset {} was rolled back ({e}); writing it again (attempt {} of {TRANSIENT_ATTEMPTS})",
                        batch.partition,
                        batch.first,
                        attempt + 1
                    );
                    if let Some(shared) = self.shared.as_deref_mut() {
                        shared.early = shared.commit(self.target)?;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
                    attempt += 1;
                }
                Err(e) => return Err(e),
                Ok(counters) => {
                    if let Some(shared) = self.shared.as_deref_mut() {
                        shared.records += batch.entries.len();
                        shared.bytes += batch.entries.iter().map(|e| e.raw.len()).sum::<usize>();
                        shared.pending.insert(batch.partition, batch.next);
                    }
                    return Ok(counters);
                }
            }
        }
    }

    fn durable(&mut self, partition: i32, next: i64) -> Result<Vec<(i32, i64)>, WriteError> {
        match self.shared.as_deref_mut() {
            None => Ok(vec![(partition, next)]),
            Some(shared) if shared.full() => Ok(shared.commit(self.target)?),
            Some(shared) => Ok(std::mem::take(&mut shared.early)),
        }
    }
}

/// One SQL transaction shared by the batches of several partitions (each batch with its own
/// checkpoint and batch row inside it), committed once it holds `records` records or `bytes`
/// of payload, or when the caller says: one commit — one fsync, one rewrite of the index pages
/// it touched — for many batches. Knows, per partition, what is durable.
#[derive(Debug)]
pub struct SharedTransaction {
    records_limit: usize,
    bytes_limit: usize,
    open: bool,
    records: usize,
    bytes: usize,
    /// Per partition with a batch in the open transaction: the checkpoint it moves to.
    pending: HashMap<i32, i64>,
    /// Per partition: the last checkpoint committed.
    durable: HashMap<i32, i64>,
    /// Why the last commit failed, if it did.
    failed: Option<String>,
    /// Checkpoints a commit made durable before the batch being written was (see
    /// [`TargetWriter::write`]), for Kafka to be told with that batch's.
    early: Vec<(i32, i64)>,
}

impl SharedTransaction {
    pub fn new(records: usize, bytes: usize) -> Self {
        SharedTransaction {
            records_limit: records.max(1),
            bytes_limit: bytes.max(1),
            open: false,
            records: 0,
            bytes: 0,
            pending: HashMap::new(),
            durable: HashMap::new(),
            failed: None,
            early: Vec::new(),
        }
    }

    fn full(&self) -> bool {
        self.records >= self.records_limit || self.bytes >= self.bytes_limit
    }

    /// A partition whose checkpoint stands at `at` in the database.
    pub fn starts(&mut self, partition: i32, at: i64) {
        self.durable.entry(partition).or_insert(at);
    }

    /// The partition's last committed checkpoint, if it was started.
    pub fn durable(&self, partition: i32) -> Option<i64> {
        self.durable.get(&partition).copied()
    }

    /// Why the last commit failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Whether a batch of the partition waits in the open transaction.
    pub fn holds(&self, partition: i32) -> bool {
        self.pending.contains_key(&partition)
    }

    /// Forgets the open transaction, whose connection is gone (and with it its batches);
    /// whether there was one.
    pub fn abandon(&mut self) -> bool {
        let was = self.open;
        self.open = false;
        self.records = 0;
        self.bytes = 0;
        self.pending.clear();
        was
    }

    /// Commits the open transaction (if any): the checkpoints it moved are durable and are
    /// returned, to be committed to Kafka. On `Err` none of them is, and the transaction is
    /// gone with its batches.
    pub fn commit(&mut self, target: &mut dyn ReplayTarget) -> Result<Vec<(i32, i64)>, StoreError> {
        // Made durable earlier and not handed on yet: they go with these.
        let mut done = std::mem::take(&mut self.early);
        if !self.open {
            return Ok(done);
        }
        self.open = false;
        self.records = 0;
        self.bytes = 0;
        let pending = std::mem::take(&mut self.pending);
        if let Err(e) = target.commit() {
            self.failed = Some(e.to_string());
            self.early = done;
            return Err(e);
        }
        for (&partition, &next) in &pending {
            self.durable.insert(partition, next);
        }
        done.extend(pending);
        done.sort_unstable();
        Ok(done)
    }
}

/// What one applied batch did.
pub(crate) struct Applied {
    /// Records made durable (events and quarantined ones).
    pub records: u64,
    pub outcome: Counters,
    /// The offset committed after the batch.
    pub next: i64,
    /// An undecodable record that ended the batch before it (with [`BadRecords::Fail`]).
    pub stopped_on: Option<ReplayErrorKind>,
    /// The offsets durable now that Kafka has not been told yet, per partition.
    pub durable: Vec<(i32, i64)>,
}

/// [`write_batch`], then the offsets it made durable committed for the replay group.
pub(crate) fn apply_batch(
    plan: &ReplayPlan,
    options: ReplayOptions,
    gathered: &Gathered,
    committed: i64,
    writer: &mut dyn BatchWriter,
    consumer: &mut dyn ReplayConsumer,
) -> Result<Option<Applied>, ReplayError> {
    let applied = write_batch(plan, options, gathered, decode(gathered), committed, writer)?;
    if let Some(applied) = &applied {
        commit_durable(plan, applied, consumer)?;
    }
    Ok(applied)
}

/// Commits for the replay group the offsets `applied` made durable: Kafka's committed offset
/// follows the database, never leads it.
pub(crate) fn commit_durable(
    plan: &ReplayPlan,
    applied: &Applied,
    consumer: &mut dyn ReplayConsumer,
) -> Result<(), ReplayError> {
    consumer
        .commit_all(plan.topic(), &applied.durable)
        .map_err(|e| ReplayError {
            topic: plan.topic().to_owned(),
            partition: plan.partition(),
            committed: Some(applied.next),
            kind: ReplayErrorKind::Consumer(e),
        })
}

/// Each record of `gathered` decoded, in order.
pub(crate) fn decode(gathered: &Gathered) -> Vec<Result<EventRecord, DecodeError>> {
    gathered
        .records
        .iter()
        .map(|r| EventRecord::decode(&r.payload))
        .collect()
}

/// Takes `gathered`'s records (of offsets `[committed, next)`; the others held control
/// markers or aborted records, as `jumps` tells) with each one `decoded`, writes them as one batch with the checkpoint
/// `next`, and returns what became durable by then (for [`commit_durable`]). With
/// [`BadRecords::Fail`] an undecodable record cuts the batch: the records before it are
/// written, its offset is the checkpoint, and it is returned as `stopped_on`. A batch of markers alone is written too: the checkpoint moves past them.
/// `Ok(None)`: nothing to write and no offset to move.
pub(crate) fn write_batch(
    plan: &ReplayPlan,
    options: ReplayOptions,
    gathered: &Gathered,
    decoded: Vec<Result<EventRecord, DecodeError>>,
    committed: i64,
    writer: &mut dyn BatchWriter,
) -> Result<Option<Applied>, ReplayError> {
    let fail = |committed: i64, kind: ReplayErrorKind| ReplayError {
        topic: plan.topic().to_owned(),
        partition: plan.partition(),
        committed: Some(committed),
        kind,
    };
    let mut entries = Vec::with_capacity(gathered.records.len());
    let mut stopped_on = None;
    let mut next = gathered.next;
    for (record, decoded) in gathered.records.iter().zip(decoded) {
        let decoded = match decoded {
            Ok(event) => Ok(event),
            Err(reason) if options.bad_records == BadRecords::Quarantine => Err(reason.to_string()),
            Err(source) => {
                stopped_on = Some(ReplayErrorKind::Undecodable {
                    offset: record.offset,
                    source,
                });
                next = record.offset;
                break;
            }
        };
        entries.push(crate::store::Entry {
            topic: &record.topic,
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            raw: &record.payload,
            decoded,
        });
    }
    if next <= committed {
        return match stopped_on {
            Some(kind) => Ok(Some(Applied {
                records: 0,
                outcome: Counters::default(),
                next: committed,
                stopped_on: Some(kind),
                durable: Vec::new(),
            })),
            None => Ok(None),
        };
    }
    // Only the jumps below the new checkpoint belong to this batch.
    let (markers, aborted) = gathered.jumps_below(next);
    let batch = Batch {
        partition: plan.partition(),
        first: committed,
        next,
        entries,
        markers,
        aborted,
    };
    let outcome = writer.write(&batch).map_err(|e| {
        fail(
            committed,
            match e {
                WriteError::Refused { offset, reason } => {
                    ReplayErrorKind::Refused { offset, reason }
                }
                WriteError::Store(source) => ReplayErrorKind::Effect {
                    offset: committed,
                    source,
                },
                moved @ WriteError::CheckpointMoved { .. } => ReplayErrorKind::Checkpoint(moved),
            },
        )
    })?;
    // Durable from here (this batch, or the transaction that now held it and others): a
    // failed commit leaves Kafka behind the database, never ahead.
    let durable = writer.durable(plan.partition(), next).map_err(|e| {
        fail(
            committed,
            match e {
                WriteError::Store(source) => ReplayErrorKind::Effect {
                    offset: committed,
                    source,
                },
                other => ReplayErrorKind::Checkpoint(other),
            },
        )
    })?;
    Ok(Some(Applied {
        records: batch.entries.len() as u64,
        outcome: Counters {
            markers,
            aborted,
            ..outcome
        },
        next,
        stopped_on,
        durable,
    }))
}
