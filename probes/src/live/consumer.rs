//! The live service's consumer: from the group's committed positions to the end offsets
//! captured at start, each event applied with its business effects, then `offset + 1` committed
//! (sent without waiting; each partition's last position is committed and waited for at the end).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use ticketflow::event::{AuditEvent, DecodeError};
use ticketflow::kafka::{close_consumer, committed_offsets, Broker, KafkaError};
use ticketflow::store::StoreError;

use super::LiveStore;

/// What the live consumer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveRun {
    pub records: u64,
    pub new_events: u64,
}

/// Why the live consumer stopped before the captured end offsets.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error("live consumer of {group}: deadline of {deadline:?} reached after {records} records")]
    Deadline {
        group: String,
        deadline: Duration,
        records: u64,
    },
    #[error("{topic}[{partition}]@{offset}: {source}")]
    Undecodable {
        topic: String,
        partition: i32,
        offset: i64,
        source: DecodeError,
    },
    #[error("{topic}[{partition}]@{offset}: {source}")]
    Store {
        topic: String,
        partition: i32,
        offset: i64,
        source: StoreError,
    },
}

/// Reads `topic`'s `partitions` from `group`'s committed positions (`auto.offset.reset=earliest`
/// for a new group) up to the end offsets captured at start, applies each event with its
/// business effects, then commits `offset + 1`.
pub fn run_live_consumer(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
    store: &mut dyn LiveStore,
    deadline: Duration,
) -> Result<LiveRun, LiveError> {
    let started = Instant::now();
    // Where each partition ends now, and where the group stands (0 when it has not committed).
    let mut ends = HashMap::new();
    for &p in partitions {
        ends.insert(p, broker.watermarks(topic, p)?.1);
    }
    let committed = committed_offsets(broker, group, topic, partitions)?;
    let mut positions: HashMap<i32, i64> = partitions
        .iter()
        .copied()
        .zip(committed.into_iter().map(|c| c.unwrap_or(0)))
        .collect();
    let consumer = broker.consumer(group, "earliest")?;
    // Leaders known before the assignment: otherwise a fresh client may wait for librdkafka's
    // one-second topic scan to learn them.
    consumer
        .fetch_metadata(Some(topic), broker.op_timeout)
        .map_err(|e| broker.error("reading metadata for the live consumer", e))?;
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition_offset(topic, p, Offset::Stored)
            .map_err(|e| broker.error("assigning the live consumer", e))?;
    }
    consumer
        .assign(&tpl)
        .map_err(|e| broker.error("assigning the live consumer", e))?;
    let mut run = LiveRun::default();
    let mut consumed = BTreeSet::new();
    while ends
        .iter()
        .any(|(p, end)| positions.get(p).is_some_and(|at| at < end))
    {
        if started.elapsed() > deadline {
            return Err(LiveError::Deadline {
                group: group.to_owned(),
                deadline,
                records: run.records,
            });
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.map_err(|e| broker.error("live consumer poll", e))?;
        let (partition, offset) = (message.partition(), message.offset());
        let event =
            AuditEvent::from_json(message.payload().unwrap_or_default()).map_err(|source| {
                LiveError::Undecodable {
                    topic: topic.to_owned(),
                    partition,
                    offset,
                    source,
                }
            })?;
        let new = store
            .apply_live(&event)
            .map_err(|source| LiveError::Store {
                topic: topic.to_owned(),
                partition,
                offset,
                source,
            })?;
        if new {
            run.new_events += 1;
        }
        // Sent without waiting, as a live service does in its loop: librdkafka sends a
        // partition's commits in order, and each leaves only after its effect is stored.
        let mut commit = TopicPartitionList::new();
        commit
            .add_partition_offset(topic, partition, Offset::Offset(offset + 1))
            .map_err(|e| broker.error("live consumer commit", e))?;
        consumer
            .commit(&commit, CommitMode::Async)
            .map_err(|e| broker.error("live consumer commit", e))?;
        positions.insert(partition, offset + 1);
        consumed.insert(partition);
        run.records += 1;
    }
    // Before it closes, each partition's last position committed again and waited for: the
    // group's offsets are known to be stored when the run returns.
    if !consumed.is_empty() {
        let mut last = TopicPartitionList::new();
        for p in &consumed {
            last.add_partition_offset(topic, *p, Offset::Offset(positions[p]))
                .map_err(|e| broker.error("live consumer commit", e))?;
        }
        consumer
            .commit(&last, CommitMode::Sync)
            .map_err(|e| broker.error("live consumer commit", e))?;
    }
    close_consumer(&consumer, broker.op_timeout);
    Ok(run)
}
