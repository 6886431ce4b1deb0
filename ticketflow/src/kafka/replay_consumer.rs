//! The consumer side of a replay: the `ReplayConsumer` trait the bounded replay reads and
//! commits through (over a real client or a scripted one), the records and re-readings it hands
//! over, the replay group it commits for; and `KafkaReplayConsumer`, the trait over an rdkafka
//! consumer: manual assign and seek, read_committed, records taken from the partition's own
//! queue in batches, commits of explicit offsets for its own group (each answered within the
//! operation timeout, through a `Committer`), end offsets from the high watermark (the last
//! stable offset for a read_committed client) asked on the broker's lookup client, and re-reads
//! of offsets it jumped over.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::bindings as rdsys;
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

impl ConsumerError {
    /// Whether the broker is away for a while (see [`KafkaError::is_outage`]); a partition the
    /// topic lacks is no outage.
    pub fn is_outage(&self) -> bool {
        match self {
            ConsumerError::Kafka(e) => e.is_outage(),
            ConsumerError::NoSuchPartition { .. } => false,
        }
    }
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

/// Records taken from the partition's queue at once: one call into librdkafka per this many
/// records instead of one per record (and no event, clock read or reference count per record).
const TAKE: usize = 1024;

/// The fetch queue of the one assigned partition, no longer forwarded to the consumer's own
/// queue: its records are taken from it in batches, while the consumer's queue keeps what is
/// not a record (errors, logs) and is served on every wait.
struct PartitionQueue(*mut rdsys::rd_kafka_queue_t);

// SAFETY: a librdkafka queue handle may be used from any thread (librdkafka locks the queue);
// this one is used by one thread at a time, through `&mut KafkaReplayConsumer`.
unsafe impl Send for PartitionQueue {}

impl PartitionQueue {
    /// `topic[partition]`'s fetch queue on `consumer`, taken out of the consumer's queue
    /// before the partition is assigned (as rdkafka's `split_partition_queue` does). `None`
    /// when librdkafka has no such partition.
    fn split(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<PartitionQueue> {
        let topic = std::ffi::CString::new(topic).ok()?;
        // SAFETY: the client is alive; the queue returned is a new reference, destroyed in drop.
        let queue = unsafe {
            rdsys::rd_kafka_queue_get_partition(
                consumer.client().native_ptr(),
                topic.as_ptr(),
                partition,
            )
        };
        if queue.is_null() {
            return None;
        }
        // SAFETY: `queue` is the live reference just taken.
        unsafe { rdsys::rd_kafka_queue_forward(queue, std::ptr::null_mut()) };
        Some(PartitionQueue(queue))
    }

    /// Takes up to `max` records (or errors) into `into`, waiting at most `wait` for the
    /// first one.
    fn take(
        &self,
        wait: Duration,
        max: usize,
        into: &mut Vec<*mut rdsys::rd_kafka_message_t>,
    ) -> usize {
        into.clear();
        into.resize(max, std::ptr::null_mut());
        let wait_ms = |d: Duration| d.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `into` has room for `max` pointers; librdkafka fills the first n of them
        // with messages this side must destroy (see `taken`).
        let mut n =
            unsafe { rdsys::rd_kafka_consume_batch_queue(self.0, 0, into.as_mut_ptr(), max) };
        if n == 0 && !wait.is_zero() {
            // librdkafka waits for the whole batch or the whole timeout: the first record is
            // waited for alone, then what arrived with it is taken at once.
            n = unsafe {
                rdsys::rd_kafka_consume_batch_queue(
                    self.0,
                    wait_ms(wait).max(1),
                    into.as_mut_ptr(),
                    1,
                )
            };
            if n == 1 && max > 1 {
                let more = unsafe {
                    rdsys::rd_kafka_consume_batch_queue(
                        self.0,
                        0,
                        into.as_mut_ptr().add(1),
                        max - 1,
                    )
                };
                n += more.max(0);
            }
        }
        let n = n.max(0) as usize;
        into.truncate(n);
        n
    }
}

impl Drop for PartitionQueue {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `split`, destroyed once.
        unsafe { rdsys::rd_kafka_queue_destroy(self.0) };
    }
}

/// One message taken from a partition queue: what the replay keeps of it, then destroyed.
fn taken(
    message: *mut rdsys::rd_kafka_message_t,
) -> Result<ReplayRecord, rdkafka::error::KafkaError> {
    // SAFETY: `message` is a live message librdkafka handed over, read and then destroyed once
    // here; the slices read from it are copied before that.
    unsafe {
        let m = &*message;
        let result = if m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            Err(rdkafka::error::KafkaError::MessageConsumption(m.err.into()))
        } else {
            let bytes = |ptr: *mut std::ffi::c_void, len: usize| {
                if ptr.is_null() {
                    None
                } else {
                    Some(std::slice::from_raw_parts(ptr as *const u8, len).to_vec())
                }
            };
            let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
            let timestamp = rdsys::rd_kafka_message_timestamp(message, &mut kind);
            let topic = if m.rkt.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(rdsys::rd_kafka_topic_name(m.rkt))
                    .to_string_lossy()
                    .into_owned()
            };
            Ok(ReplayRecord {
                topic,
                partition: m.partition,
                offset: m.offset,
                // As rdkafka's `Timestamp::to_millis` reads it: none when its type says so or
                // it is -1.
                timestamp: (kind
                    != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
                    && timestamp != -1)
                    .then_some(timestamp),
                key: bytes(m.key, m.key_len),
                payload: bytes(m.payload, m.len).unwrap_or_default(),
            })
        };
        rdsys::rd_kafka_message_destroy(message);
        result
    }
}

pub struct KafkaReplayConsumer {
    group: String,
    servers: String,
    /// The assigned partition's queue, records taken from it in batches; `None` before the
    /// first seek (or when librdkafka could not give it: then records come one per poll).
    queue: Option<PartitionQueue>,
    /// Records taken from the queue and not handed over yet, and an error met after them.
    taken: VecDeque<ReplayRecord>,
    failed: Option<rdkafka::error::KafkaError>,
    consumer: BaseConsumer,
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
            queue: None,
            taken: VecDeque::new(),
            failed: None,
            // A replay reads a range that is there: a short fetch wait costs a real broker
            // nothing while records come, and the mock cluster, which holds each fetch for
            // the whole wait, then keeps up with the database.
            consumer: broker.consumer_waiting(group, "error", REPLAY_FETCH_WAIT_MS)?,
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

impl KafkaReplayConsumer {
    /// What one poll found, in the replay's terms.
    fn polled(
        &self,
        polled: Option<Result<ReplayRecord, rdkafka::error::KafkaError>>,
    ) -> Result<Option<ReplayRecord>, ConsumerError> {
        match polled {
            None => Ok(None),
            Some(Err(e)) if one_connection_lost(&e) => {
                tracing::debug!(
                    "{}: {e}; the client reconnects or follows the leader",
                    self.servers
                );
                Ok(None)
            }
            Some(Err(e)) => Err(self.error("polling".into(), e)),
            Some(Ok(record)) => Ok(Some(record)),
        }
    }
}

/// A message polled the ordinary way, in the replay's terms.
fn record_of(m: &rdkafka::message::BorrowedMessage<'_>) -> ReplayRecord {
    ReplayRecord {
        topic: m.topic().to_owned(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp: m.timestamp().to_millis(),
        key: m.key().map(<[u8]>::to_vec),
        payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
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
        // Messages and the queue reference go before the client they belong to.
        self.taken.clear();
        self.queue = None;
        let clients = [Some(&self.consumer)]
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
        // Asked on the broker's lookup client: behind this consumer's outstanding fetch the
        // broker's answer could wait for the whole fetch wait.
        let partitions = match self.partitions.get(topic) {
            Some(&known) if partition < known => known,
            _ => {
                let timeout = self.timeout;
                let count = self
                    .broker_config
                    .with_utility(|c| {
                        partition_count(c, topic, timeout)
                            .map_err(|e| self.broker_config.error("", e))
                    })
                    .map_err(|e| self.error(format!("reading metadata of {topic}"), e.reason))?;
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
        self.broker_config
            .watermarks(topic, partition)
            .map(|(_, high)| high)
            .map_err(|e| {
                self.error(
                    format!("reading watermarks of {topic}[{partition}]"),
                    e.reason,
                )
            })
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
        // What was taken of the partition read before is not this one's; its queue goes back.
        self.taken.clear();
        self.failed = None;
        self.queue = None;
        self.queue = PartitionQueue::split(&self.consumer, topic, partition);
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.error(what(), e))
    }

    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
        if let Some(record) = self.taken.pop_front() {
            return Ok(Some(record));
        }
        if let Some(e) = self.failed.take() {
            return self.polled(Some(Err(e)));
        }
        let Some(queue) = &self.queue else {
            let polled = self
                .consumer
                .poll(timeout)
                .map(|m| m.map(|m| record_of(&m)));
            return self.polled(polled);
        };
        // The consumer's own queue first, without waiting: errors and logs are served there.
        match self.consumer.poll(Duration::ZERO) {
            Some(Err(e)) => return self.polled(Some(Err(e))),
            // Not expected (the assigned partition's records go to its own queue), but a record
            // is never dropped: the reader judges it.
            Some(Ok(m)) => return Ok(Some(record_of(&m))),
            None => {}
        }
        let mut slots = Vec::new();
        queue.take(timeout, TAKE, &mut slots);
        for message in slots {
            match taken(message) {
                Ok(record) if self.failed.is_none() => self.taken.push_back(record),
                Ok(_) => {}
                Err(e) => {
                    self.failed.get_or_insert(e);
                }
            }
        }
        match self.taken.pop_front() {
            Some(record) => Ok(Some(record)),
            None => {
                let failed = self.failed.take().map(Err);
                self.polled(failed)
            }
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
            .broker_config
            .watermarks(topic, partition)
            .map_err(|e| {
                self.error(
                    format!("reading watermarks of {topic}[{partition}]"),
                    e.reason,
                )
            })?;
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
