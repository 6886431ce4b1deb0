//! The writing side of a bounded replay: decode a gathered batch, make it durable in the audit
//! store in one transaction, and only then commit the offset after it for the replay group.

use super::{
    BadRecords, ReplayConsumer, ReplayError, ReplayErrorKind, ReplayOptions, ReplayPlan,
    ReplayRecord,
};
use crate::event::AuditEvent;
use crate::store::{AuditStore, BatchOutcome, Quarantined};

/// What one applied batch did.
pub(crate) struct Applied {
    /// Records made durable (events and quarantined ones).
    pub records: u64,
    pub outcome: BatchOutcome,
    /// The offset committed after the batch.
    pub next: i64,
    /// An undecodable record that ended the batch before it (with [`BadRecords::Fail`]).
    pub stopped_on: Option<ReplayErrorKind>,
}

/// Decodes `records` (the records of offsets `[committed, next)`; the others held control
/// markers or aborted records), applies them in one transaction, then commits `next`. With
/// [`BadRecords::Fail`] an undecodable record cuts the batch: the records before it are
/// applied and its offset is committed, and it is returned as `stopped_on`.
/// `Ok(None)`: nothing to apply and no offset to move.
pub(crate) fn apply_batch(
    plan: &ReplayPlan,
    options: ReplayOptions,
    records: &[ReplayRecord],
    next: i64,
    committed: i64,
    store: &mut dyn AuditStore,
    consumer: &mut dyn ReplayConsumer,
) -> Result<Option<Applied>, ReplayError> {
    let fail = |kind: ReplayErrorKind| ReplayError {
        topic: plan.topic().to_owned(),
        partition: plan.partition(),
        committed: Some(committed),
        kind,
    };
    let mut events: Vec<AuditEvent> = Vec::with_capacity(records.len());
    let mut bad: Vec<Quarantined> = Vec::new();
    let mut stopped_on = None;
    let mut next = next;
    for record in records {
        match AuditEvent::decode(&record.payload) {
            Ok(event) => events.push(event),
            Err(reason) if options.bad_records == BadRecords::Quarantine => bad.push(Quarantined {
                topic: record.topic.clone(),
                partition: record.partition,
                offset: record.offset,
                raw: record.payload.clone(),
                reason: reason.to_string(),
            }),
            Err(source) => {
                stopped_on = Some(ReplayErrorKind::Undecodable {
                    offset: record.offset,
                    source,
                });
                next = record.offset;
                break;
            }
        }
    }
    if next <= committed {
        return match stopped_on {
            Some(kind) => Ok(Some(Applied {
                records: 0,
                outcome: BatchOutcome::default(),
                next: committed,
                stopped_on: Some(kind),
            })),
            None => Ok(None),
        };
    }
    let outcome = if events.is_empty() && bad.is_empty() {
        BatchOutcome::default() // only markers or aborted records: nothing to make durable
    } else {
        store.apply_batch(&events, &bad).map_err(|source| {
            fail(ReplayErrorKind::Effect {
                offset: committed,
                source,
            })
        })?
    };
    consumer
        .commit(plan.topic(), plan.partition(), next)
        .map_err(|e| fail(ReplayErrorKind::Consumer(e)))?;
    Ok(Some(Applied {
        records: (events.len() + bad.len()) as u64,
        outcome,
        next,
        stopped_on,
    }))
}
