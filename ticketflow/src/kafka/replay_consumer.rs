//! The consumer side of a replay: the `ReplayConsumer` trait the bounded replay reads and
//! commits through (over a real client or a scripted one), the records and re-readings it hands
//! over, the replay group it commits for; and `KafkaReplayConsumer`, the trait over an rdkafka
//! consumer: manual assign and seek, read_committed, commits of
//! explicit offsets for its own group (each answered within the operation timeout, through a
//! `Committer`), end offsets from the high watermark (the last stable offset for a
//! read_committed client), and re-reads of offsets it jumped over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::broker::{close_consumer, partition_count, Isolation};
use super::commit::Committer;
use super::group_member::GroupMember;
use super::{Broker, KafkaError};

/// One record as the replay consumer delivers it.
#[derive(Debug, Clone)]
pub struct ReplayRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the epoch, as the record carries it (`None`: it carries none).
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
}

/// What a re-read of offsets `[from, to)` found, which a read_committed consumer jumped over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapReading {
    /// The partition's log start when re-read: offsets below it are gone.
    pub log_start: i64,
    /// Offsets a read_uncommitted read delivered inside the range: records of transactions.
    pub uncommitted: Vec<i64>,
    /// Offsets a read_committed re-read delivered inside the range (asked only when the
    /// read_uncommitted one found records): committed records the consumer did not hand over.
    pub committed: Vec<i64>,
}

/// Why the consumer side of a replay could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ConsumerError {
    #[error("topic {topic} has {partitions} partitions; the plan needs partition {partition}")]
    NoSuchPartition {
        topic: String,
        partitions: i32,
        partition: i32,
    },
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

/// The consumer side of a replay, over a real client or a scripted one.
pub trait ReplayConsumer {
    /// The consumer group this consumer commits for.
    fn group_id(&self) -> &str;
    /// The partition's end offset (high watermark) now.
    fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError>;
    /// Assigns the partition alone and positions the consumer at `offset`.
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError>;
    /// The next record, or `None` when none arrived within `timeout`.
    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError>;
    /// The offset this consumer reads next on `topic[partition]`: past the last record it
    /// delivered and past control markers after it. `None`: it cannot tell.
    fn position(&mut self, _topic: &str, _partition: i32) -> Result<Option<i64>, ConsumerError> {
        Ok(None)
    }
    /// Re-reads offsets `[from, to)` that this consumer jumped over, to tell control markers
    /// and aborted records from lost ones. `None`: it cannot re-read, so no jump is explained.
    fn reread(
        &mut self,
        _topic: &str,
        _partition: i32,
        _from: i64,
        _to: i64,
    ) -> Result<Option<GapReading>, ConsumerError> {
        Ok(None)
    }
    /// Commits `next_offset` for this consumer's group, synchronously.
    fn commit(
        &mut self,
        topic: &str,
        partition: i32,
        next_offset: i64,
    ) -> Result<(), ConsumerError>;
    /// Commits each `(partition, next_offset)` of `topic` for this consumer's group,
    /// synchronously: one after the other, unless the consumer can ask for all at once.
    fn commit_all(&mut self, topic: &str, offsets: &[(i32, i64)]) -> Result<(), ConsumerError> {
        for &(partition, next_offset) in offsets {
            self.commit(topic, partition, next_offset)?;
        }
        Ok(())
    }
}

/// The consumer group a replay commits for, checked against the live group it must never be:
/// the only way to name the group of a [`KafkaReplayConsumer`],
/// so the replay cannot commit to the live group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayGroup(String);

impl ReplayGroup {
    /// `replay`, unless it is empty or the `live` group itself.
    pub fn new(replay: &str, live: &str) -> Result<Self, GroupError> {
        if replay.trim().is_empty() {
            return Err(GroupError::Empty);
        }
        if replay == live {
            return Err(GroupError::Live(live.to_owned()));
        }
        Ok(ReplayGroup(replay.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Why a name cannot be a replay group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("replay group must not be empty")]
    Empty,
    #[error("the replay group must differ from the live group ({0})")]
    Live(String),
}

/// The replay consumer's fetch wait, in milliseconds.
const REPLAY_FETCH_WAIT_MS: u32 = 10;

pub struct KafkaReplayConsumer {
    group: String,
    servers: String,
    consumer: BaseConsumer,
    /// For metadata and watermarks only.
    meta: BaseConsumer,
    /// Re-readers of jumped-over offsets, made on the first jump.
    uncommitted: Option<BaseConsumer>,
    committed: Option<BaseConsumer>,
    /// Commits the group's offsets, made on the first commit.
    committer: Option<Committer>,
    /// The group member commits go through instead, when this reader serves one of several
    /// workers of a plan.
    through: Option<Arc<GroupMember>>,
    broker_config: Broker,
    timeout: Duration,
    /// Partitions of each topic as last read from the metadata: asked again only for a
    /// partition beyond them.
    partitions: HashMap<String, i32>,
    /// Topics whose leaders this consumer's client has been told of.
    leaders_known: HashSet<String>,
}

impl KafkaReplayConsumer {
    /// A consumer that commits for `group` only: a [`ReplayGroup`] is never the live group.
    pub fn new(broker: &Broker, group: &ReplayGroup) -> Result<Self, KafkaError> {
        let group = group.as_str();
        Ok(KafkaReplayConsumer {
            group: group.to_owned(),
            servers: broker.servers().to_owned(),
            // A replay reads a range that is there: a short fetch wait costs a real broker
            // nothing while records come, and the mock cluster, which holds each fetch for
            // the whole wait, then keeps up with the database.
            consumer: broker.consumer_waiting(group, "error", REPLAY_FETCH_WAIT_MS)?,
            meta: broker.consumer("lessonprobe-utility", "error")?,
            uncommitted: None,
            committed: None,
            committer: None,
            through: None,
            broker_config: broker.same_address(),
            timeout: broker.op_timeout,
            partitions: HashMap::new(),
            leaders_known: HashSet::new(),
        })
    }

    /// Commits through `member` from now on, for one of several workers of a plan: a broker
    /// takes commits only from members of an active group.
    pub fn commit_through(&mut self, member: Arc<GroupMember>) {
        self.through = Some(member);
    }

    /// A failed call of this consumer, with the broker it was talking to.
    fn error(&self, what: String, reason: impl std::fmt::Display) -> ConsumerError {
        ConsumerError::Kafka(KafkaError {
            servers: self.servers.clone(),
            what,
            reason: reason.to_string(),
        })
    }

    /// The offsets in `[from, to)` a reader with `isolation` delivers.
    fn delivered(
        &mut self,
        isolation: Isolation,
        topic: &str,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<Vec<i64>, ConsumerError> {
        let servers = self.servers.clone();
        let fail = |reason: &dyn std::fmt::Display| {
            ConsumerError::Kafka(KafkaError {
                servers: servers.clone(),
                what: format!(
                    "re-reading {topic}[{partition}] offsets [{from}, {to}) ({isolation:?})"
                ),
                reason: reason.to_string(),
            })
        };
        let slot = match isolation {
            Isolation::ReadCommitted => &mut self.committed,
            Isolation::ReadUncommitted => &mut self.uncommitted,
        };
        if slot.is_none() {
            *slot = Some(
                self.broker_config
                    .reader("lessonprobe-utility", "error", 5, isolation)
                    .map_err(ConsumerError::Kafka)?,
            );
        }
        let Some(reader) = slot.as_ref() else {
            return Ok(Vec::new());
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(from))
            .map_err(|e| fail(&e))?;
        reader.assign(&tpl).map_err(|e| fail(&e))?;
        let mut found = Vec::new();
        let started = Instant::now();
        loop {
            match reader.poll(Duration::from_millis(20)) {
                Some(Ok(m)) if m.partition() == partition && m.topic() == topic => {
                    if m.offset() >= to {
                        break;
                    }
                    if m.offset() >= from {
                        found.push(m.offset());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) if one_connection_lost(&e) => {}
                Some(Err(e)) => return Err(fail(&e)),
                None => {}
            }
            let position = reader
                .position()
                .map_err(|e| fail(&e))?
                .find_partition(topic, partition)
                .map(|e| e.offset());
            if matches!(position, Some(Offset::Offset(p)) if p >= to) {
                break;
            }
            if started.elapsed() > self.timeout {
                return Err(fail(&format!("the position stayed below {to}")));
            }
        }
        Ok(found)
    }
}

/// Whether a consumer error only says that one broker connection failed. librdkafka delivers
/// it to the poll as information and recovers by itself: it reconnects, and the partitions that
/// broker led follow their new leaders (a cluster that lost one broker). Waiting on is bounded
/// by the replay's idle timeout and deadline; with no broker left librdkafka says "all brokers
/// down", which stays an error.
fn one_connection_lost(e: &rdkafka::error::KafkaError) -> bool {
    e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::BrokerTransportFailure)
}

impl Drop for KafkaReplayConsumer {
    /// Closes its clients ahead of their drops: each would otherwise wait 100 ms.
    fn drop(&mut self) {
        let clients = [Some(&self.consumer), Some(&self.meta)]
            .into_iter()
            .chain([self.uncommitted.as_ref(), self.committed.as_ref()]);
        for client in clients.flatten() {
            close_consumer(client, self.timeout);
        }
    }
}

impl ReplayConsumer for KafkaReplayConsumer {
    fn group_id(&self) -> &str {
        &self.group
    }

    fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError> {
        // Asked on a client of its own: behind this consumer's outstanding fetch the broker's
        // answer could wait for the whole fetch wait.
        let partitions = match self.partitions.get(topic) {
            Some(&known) if partition < known => known,
            _ => {
                let count = partition_count(&self.meta, topic, self.timeout)
                    .map_err(|e| self.error(format!("reading metadata of {topic}"), e))?;
                self.partitions.insert(topic.to_owned(), count);
                count
            }
        };
        if partition >= partitions {
            return Err(ConsumerError::NoSuchPartition {
                topic: topic.to_owned(),
                partitions,
                partition,
            });
        }
        self.meta
            .fetch_watermarks(topic, partition, self.timeout)
            .map(|(_, high)| high)
            .map_err(|e| self.error(format!("reading watermarks of {topic}[{partition}]"), e))
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
        let what = || format!("assigning {topic}[{partition}] at {offset}");
        // The partition's leader must be known to this client when it is assigned: a fresh
        // client asks for it at once, and when no broker connection is up at that instant
        // librdkafka asks again only on its one-second topic scan (a whole second idle).
        // Once told, the client follows leadership changes itself.
        if !self.leaders_known.contains(topic) {
            self.consumer
                .fetch_metadata(Some(topic), self.timeout)
                .map_err(|e| self.error(what(), e))?;
            self.leaders_known.insert(topic.to_owned());
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .map_err(|e| self.error(what(), e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.error(what(), e))
    }

    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
        match self.consumer.poll(timeout) {
            None => Ok(None),
            Some(Err(e)) if one_connection_lost(&e) => {
                tracing::debug!(
                    "{}: {e}; the client reconnects or follows the leader",
                    self.servers
                );
                Ok(None)
            }
            Some(Err(e)) => Err(self.error("polling".into(), e)),
            Some(Ok(m)) => Ok(Some(ReplayRecord {
                topic: m.topic().to_owned(),
                partition: m.partition(),
                offset: m.offset(),
                timestamp: m.timestamp().to_millis(),
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            })),
        }
    }

    fn position(&mut self, topic: &str, partition: i32) -> Result<Option<i64>, ConsumerError> {
        let positions = self
            .consumer
            .position()
            .map_err(|e| self.error(format!("reading the position on {topic}[{partition}]"), e))?;
        Ok(
            match positions
                .find_partition(topic, partition)
                .map(|e| e.offset())
            {
                Some(Offset::Offset(p)) => Some(p),
                _ => None,
            },
        )
    }

    /// Reads `[from, to)` read_uncommitted; where that delivers records, reads it again
    /// read_committed to show they are not committed ones. The log start comes first: offsets
    /// below it are gone, whatever the reads say.
    fn reread(
        &mut self,
        topic: &str,
        partition: i32,
        from: i64,
        to: i64,
    ) -> Result<Option<GapReading>, ConsumerError> {
        let (log_start, _) = self
            .meta
            .fetch_watermarks(topic, partition, self.timeout)
            .map_err(|e| self.error(format!("reading watermarks of {topic}[{partition}]"), e))?;
        if log_start > from || from >= to {
            return Ok(Some(GapReading {
                log_start,
                ..GapReading::default()
            }));
        }
        let uncommitted = self.delivered(Isolation::ReadUncommitted, topic, partition, from, to)?;
        let committed = if uncommitted.is_empty() {
            Vec::new()
        } else {
            self.delivered(Isolation::ReadCommitted, topic, partition, from, to)?
        };
        Ok(Some(GapReading {
            log_start,
            uncommitted,
            committed,
        }))
    }

    fn commit(
        &mut self,
        topic: &str,
        partition: i32,
        next_offset: i64,
    ) -> Result<(), ConsumerError> {
        self.commit_all(topic, &[(partition, next_offset)])
    }

    /// One request for every partition: a transaction's commit makes the batches of many
    /// partitions durable at once, and each request waits for the group's coordinator.
    fn commit_all(&mut self, topic: &str, offsets: &[(i32, i64)]) -> Result<(), ConsumerError> {
        // The batch is durable in SQL already: a commit the group refuses now (a rebalance in
        // progress) stays owed and is made later, so Kafka lags the database and never leads it.
        if let Some(member) = &self.through {
            for &(partition, next_offset) in offsets {
                if let Err(e) = member.commit(partition, next_offset) {
                    tracing::debug!("{topic}[{partition}]: commit owed: {e}");
                }
            }
            return Ok(());
        }
        if offsets.is_empty() {
            return Ok(());
        }
        let what = || {
            let at: Vec<String> = offsets.iter().map(|(p, o)| format!("[{p}]@{o}")).collect();
            format!("committing {topic}{}", at.join(","))
        };
        let mut tpl = TopicPartitionList::new();
        for &(partition, next_offset) in offsets {
            tpl.add_partition_offset(topic, partition, Offset::Offset(next_offset))
                .map_err(|e| self.error(what(), e))?;
        }
        let mut committer = match self.committer.take() {
            Some(committer) => committer,
            None => {
                Committer::new(&self.broker_config, &self.group).map_err(ConsumerError::Kafka)?
            }
        };
        let committed = committer.commit(&tpl);
        self.committer = Some(committer);
        committed.map_err(|e| self.error(what(), e))
    }
}
