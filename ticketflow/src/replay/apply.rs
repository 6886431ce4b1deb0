//! The writing side of a bounded replay: decode a gathered batch, make it durable (in a replay
//! target together with its checkpoint, in one transaction), and only then commit the offset
//! after it for the replay group — Kafka's committed offset is visible progress, never ahead
//! of what the database holds.

use super::read::Gathered;
use super::{BadRecords, ReplayConsumer, ReplayError, ReplayErrorKind, ReplayOptions, ReplayPlan};
use crate::event::EventRecord;
use crate::store::{AuditStore, Batch, Counters, PlanScope, ReplayTarget, StoreError, WriteError};

/// Where a replay's batches become durable.
pub trait BatchWriter {
    /// Makes `batch` durable; on `Ok` every entry is, and so is the checkpoint where the writer
    /// keeps one. On `Err` nothing of the batch is.
    fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError>;
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
}

impl BatchWriter for TargetWriter<'_> {
    fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError> {
        self.target.write_batch(&self.scope, batch)
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
}

/// Decodes `records` (the records of offsets `[committed, next)`; the others held control
/// markers or aborted records, as `jumps` tells), writes them as one batch with the checkpoint
/// `next`, then commits `next`. With [`BadRecords::Fail`] an undecodable record cuts the batch:
/// the records before it are written and its offset is committed, and it is returned as
/// `stopped_on`. A batch of markers alone is written too: the checkpoint moves past them.
/// `Ok(None)`: nothing to write and no offset to move.
pub(crate) fn apply_batch(
    plan: &ReplayPlan,
    options: ReplayOptions,
    gathered: &Gathered,
    committed: i64,
    writer: &mut dyn BatchWriter,
    consumer: &mut dyn ReplayConsumer,
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
    for record in &gathered.records {
        let decoded = match EventRecord::decode(&record.payload) {
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
    // Durable from here: a failed commit leaves Kafka behind the database, never ahead.
    consumer
        .commit(plan.topic(), plan.partition(), next)
        .map_err(|e| fail(next, ReplayErrorKind::Consumer(e)))?;
    Ok(Some(Applied {
        records: batch.entries.len() as u64,
        outcome: Counters {
            markers,
            aborted,
            ..outcome
        },
        next,
        stopped_on,
    }))
}
