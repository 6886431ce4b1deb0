//! Reading offsets back from the broker: a group's committed offsets, and the first offset at
//! or after a timestamp, per partition.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::broker::read_one;
use super::{Broker, KafkaError};

/// The committed offset of `group` for each of `partitions` (`None`: nothing committed).
/// Read through a consumer in that group that never subscribes, so the group is not disturbed.
pub fn committed_offsets(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<Option<i64>>, KafkaError> {
    let consumer = broker.consumer(group, "earliest")?;
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition(topic, p);
    }
    let what = || format!("reading committed offsets of group {group} on {topic}");
    let answer = consumer
        .committed_offsets(tpl, broker.op_timeout)
        .map_err(|e| broker.error(what(), e))?;
    let offsets = partitions
        .iter()
        .map(
            |&p| match answer.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => Some(o),
                _ => None,
            },
        )
        .collect();
    // The list must go before the consumer: dropping a consumer while a list it returned is
    // alive can hang inside librdkafka.
    drop(answer);
    drop(consumer);
    Ok(offsets)
}

/// Timestamp → offset, per partition. `None` means no record at or after the timestamp — never
/// "start at the end".
pub trait OffsetLookup {
    fn offset_at_or_after(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<i64>, KafkaError>;
}

/// The broker's own index (ListOffsets by timestamp), for real brokers.
pub struct BrokerLookup<'a> {
    pub broker: &'a Broker,
}

impl OffsetLookup for BrokerLookup<'_> {
    fn offset_at_or_after(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<i64>, KafkaError> {
        let broker = self.broker;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(timestamp_ms))
            .map_err(|e| broker.error("building a lookup", e))?;
        broker.with_utility(|consumer| {
            let answer = consumer
                .offsets_for_times(tpl, broker.op_timeout)
                .map_err(|e| {
                    broker.error(
                        format!("looking up {topic}[{partition}] at {timestamp_ms} ms"),
                        e,
                    )
                })?;
            let offset = match answer.find_partition(topic, partition).map(|e| e.offset()) {
                Some(Offset::Offset(o)) if o >= 0 => Some(o),
                _ => None, // -1 / END: nothing at or after that time
            };
            drop(answer);
            Ok(offset)
        })
    }
}

/// Finds the offset by reading the partition from its start: for brokers that do not answer
/// timestamp lookups (librdkafka's mock cluster answers END to every one).
pub struct ScanLookup<'a> {
    pub broker: &'a Broker,
}

impl OffsetLookup for ScanLookup<'_> {
    fn offset_at_or_after(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<i64>, KafkaError> {
        let broker = self.broker;
        let (low, high) = broker.watermarks(topic, partition)?;
        if low >= high {
            return Ok(None);
        }
        // Nothing at or after the time when even the newest record is older: no scan needed.
        if broker
            .record_timestamp(topic, partition, high - 1)?
            .is_some_and(|ts| ts < timestamp_ms)
        {
            return Ok(None);
        }
        broker.with_utility(|consumer| {
            let scanning = || format!("scanning {topic}[{partition}]");
            let Some((first, ts)) = read_one(broker, consumer, topic, partition, low)? else {
                return Err(broker.error(scanning(), "no records arrived"));
            };
            if ts.is_some_and(|ts| ts >= timestamp_ms) {
                return Ok(Some(first));
            }
            let mut idle_since = Instant::now();
            loop {
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(message)) => {
                        idle_since = Instant::now();
                        if message
                            .timestamp()
                            .to_millis()
                            .is_some_and(|ts| ts >= timestamp_ms)
                        {
                            return Ok(Some(message.offset()));
                        }
                        if message.offset() + 1 >= high {
                            return Ok(None);
                        }
                    }
                    Some(Err(e)) => return Err(broker.error(scanning(), e)),
                    None if idle_since.elapsed() > broker.op_timeout => {
                        return Err(broker.error(scanning(), "no records arrived"))
                    }
                    None => {}
                }
            }
        })
    }
}

/// The broker's index when it answers, reading when it does not: an END answer is checked by
/// reading (which costs one record when the newest record really is older), and a broker
/// caught answering END wrongly (the mock cluster) is read from then on.
pub struct AutoLookup<'a> {
    broker: &'a Broker,
    scan: bool,
}

impl<'a> AutoLookup<'a> {
    pub fn new(broker: &'a Broker) -> Self {
        AutoLookup {
            broker,
            scan: broker.is_embedded(),
        }
    }
}

impl OffsetLookup for AutoLookup<'_> {
    fn offset_at_or_after(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp_ms: i64,
    ) -> Result<Option<i64>, KafkaError> {
        if !self.scan {
            let answer = BrokerLookup {
                broker: self.broker,
            }
            .offset_at_or_after(topic, partition, timestamp_ms)?;
            if answer.is_some() {
                return Ok(answer);
            }
        }
        let scanned = ScanLookup {
            broker: self.broker,
        }
        .offset_at_or_after(topic, partition, timestamp_ms)?;
        if scanned.is_some() && !self.scan {
            tracing::info!(
                "kafka {}: timestamp lookups answer END wrongly; finding offsets by reading",
                self.broker.servers()
            );
            self.scan = true;
        }
        Ok(scanned)
    }
}

/// One partition's offsets for a time window `[since, until)`, looked up now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// The oldest offset retention kept.
    pub log_start: i64,
    /// The end offset captured while looking.
    pub end: i64,
    /// First offset at or after `since` (`None`: no such record).
    pub since: Option<i64>,
    /// First offset at or after `until` (`None`: none, so the window runs to the end).
    pub until: Option<i64>,
}

impl TimeWindow {
    /// `[start, stop)`: `start` is the first offset at or after `since` (the end when there is
    /// none), `stop` the first at or after `until` or else the captured end; `start == stop`
    /// when the window holds no record of this partition.
    pub fn range(&self) -> (i64, i64) {
        let start = self.since.unwrap_or(self.end);
        (start, self.until.unwrap_or(self.end).max(start))
    }
}

/// Looks up one partition's [`TimeWindow`].
pub fn partition_window(
    broker: &Broker,
    lookup: &mut dyn OffsetLookup,
    topic: &str,
    partition: i32,
    since_ms: i64,
    until_ms: i64,
) -> Result<TimeWindow, KafkaError> {
    let (log_start, end) = broker.watermarks(topic, partition)?;
    let since = lookup.offset_at_or_after(topic, partition, since_ms)?;
    let until = lookup.offset_at_or_after(topic, partition, until_ms)?;
    Ok(TimeWindow {
        log_start,
        end,
        since,
        until,
    })
}
