//! The live service's consumer effects: the audit row plus the business effects a replay must
//! never repeat (a notification, an SLA count), and the ticket projection that keeps the
//! highest business version. The replay module does not import this one.

use crate::event::AuditEvent;
use crate::store::{AuditStore, StoreError};

/// A store that also carries the live service's business effects.
pub trait LiveStore: AuditStore {
    /// In one transaction: the audit row and, only when it is new, one notification and one SLA
    /// change for the tenant. Returns whether the event was new.
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;
    /// `(notifications, sum of SLA changes)`.
    fn business_counts(&mut self) -> Result<(u64, u64), StoreError>;
    /// Deletes audit rows whose `occurred_at` lies in `[from, to)` (RFC 3339 text): the lost
    /// projection a replay repairs.
    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError>;
    /// Sets the ticket's state to this event's version only if it is newer than the stored
    /// one. Returns whether it was applied.
    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;
    /// The stored version of a ticket.
    fn ticket_version(
        &mut self,
        tenant_id: &str,
        ticket_id: &str,
    ) -> Result<Option<i64>, StoreError>;
}

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::kafka::{Broker, KafkaError};

/// What the live consumer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveRun {
    pub records: u64,
    pub new_events: u64,
}

/// The live service's consumer: reads `topic`'s `partitions` from the group's committed
/// positions (`auto.offset.reset=earliest` for a new group) up to the end offsets captured at
/// start, applies each event with its business effects, then commits `offset + 1`.
pub fn run_live_consumer(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
    store: &mut dyn LiveStore,
    deadline: Duration,
) -> Result<LiveRun, String> {
    let started = Instant::now();
    let kafka = |e: KafkaError| e.to_string();
    // Where each partition ends now, and where the group stands (0 when it has not committed).
    let mut ends = HashMap::new();
    for &p in partitions {
        ends.insert(p, broker.watermarks(topic, p).map_err(kafka)?.1);
    }
    let committed =
        crate::kafka::committed_offsets(broker, group, topic, partitions).map_err(kafka)?;
    let mut positions: HashMap<i32, i64> = partitions
        .iter()
        .copied()
        .zip(committed.into_iter().map(|c| c.unwrap_or(0)))
        .collect();
    let consumer = broker.consumer(group, "earliest").map_err(kafka)?;
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition_offset(topic, p, Offset::Stored)
            .map_err(|e| e.to_string())?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| broker.error("assigning the live consumer", e).to_string())?;
    let mut run = LiveRun::default();
    while ends
        .iter()
        .any(|(p, end)| positions.get(p).is_some_and(|at| at < end))
    {
        if started.elapsed() > deadline {
            return Err(format!(
                "live consumer of {group}: deadline of {deadline:?} reached after {} records",
                run.records
            ));
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.map_err(|e| broker.error("live consumer poll", e).to_string())?;
        let event = AuditEvent::from_json(message.payload().unwrap_or_default())
            .map_err(|e| format!("{topic}[{}]@{}: {e}", message.partition(), message.offset()))?;
        if store.apply_live(&event).map_err(|e| e.to_string())? {
            run.new_events += 1;
        }
        let mut commit = TopicPartitionList::new();
        commit
            .add_partition_offset(
                topic,
                message.partition(),
                Offset::Offset(message.offset() + 1),
            )
            .map_err(|e| e.to_string())?;
        consumer
            .commit(&commit, CommitMode::Sync)
            .map_err(|e| broker.error("live consumer commit", e).to_string())?;
        positions.insert(message.partition(), message.offset() + 1);
        run.records += 1;
    }
    Ok(run)
}
