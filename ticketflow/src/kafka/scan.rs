//! Finding a time window's offsets by reading, for brokers that do not answer timestamp
//! lookups: one pass over every partition at once, each read from its log start until the
//! first record at or after `until` or until its position reaches the captured end, and not
//! fetched any further after that.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::broker::{close_consumer, Isolation};
use super::{Broker, KafkaError};

/// How long one poll waits before positions are looked at again: a partition whose last
/// offsets are control markers is done only once its position has moved past them.
const POLL: Duration = Duration::from_millis(20);

/// Records looked at between two readings of the clock.
const CLOCK_EVERY: u32 = 256;

/// A window's bounds on one partition: the first offset at or after `since` and at or after
/// `until`, where there is one.
type Bounds = (Option<i64>, Option<i64>);

/// One partition's scan.
struct Scan {
    end: i64,
    since: Option<i64>,
    until: Option<i64>,
    done: bool,
    /// The offset the scan has accounted for up to, to tell progress from a stall.
    reached: i64,
}

impl Scan {
    /// Accounts for the record at `offset` stamped `timestamp`; whether the scan is done now.
    fn see(&mut self, offset: i64, timestamp: Option<i64>, since_ms: i64, until_ms: i64) -> bool {
        if offset < self.end {
            let at_or_after = |t: i64| timestamp.is_some_and(|ts| ts >= t);
            if self.since.is_none() && at_or_after(since_ms) {
                self.since = Some(offset);
            }
            if at_or_after(until_ms) {
                // Every later record is past the window's end: this one decides.
                self.until = Some(offset);
                self.done = true;
            }
        }
        self.reached = self.reached.max(offset + 1);
        self.done |= self.reached >= self.end;
        self.done
    }
}

/// A read_uncommitted reader assigned every range `(partition, low, end)` that is not empty,
/// from its low offset.
fn assigned_reader(
    broker: &Broker,
    topic: &str,
    ranges: &[(i32, i64, i64)],
) -> Result<BaseConsumer, KafkaError> {
    let what = || format!("scanning {topic} for offsets by time");
    let consumer = broker.reader(
        "lessonprobe-utility",
        "error",
        10,
        Isolation::ReadUncommitted,
    )?;
    let mut tpl = TopicPartitionList::new();
    for &(p, low, end) in ranges {
        if low < end {
            tpl.add_partition_offset(topic, p, Offset::Offset(low))
                .map_err(|e| broker.error(what(), e))?;
        }
    }
    // The leaders known before the assignment: a fresh client assigned partitions whose
    // leaders it does not know yet may wait for librdkafka's one-second topic scan.
    consumer
        .fetch_metadata(Some(topic), broker.op_timeout)
        .map_err(|e| broker.error(what(), e))?;
    consumer.assign(&tpl).map_err(|e| broker.error(what(), e))?;
    Ok(consumer)
}

/// For each `(partition, log_start, end)`, the first offset whose timestamp is at or after
/// `since_ms` and the first at or after `until_ms` (Kafka's rule: the first in offset order;
/// timestamps need not grow with offsets). Records of aborted transactions count, as in the
/// broker's own index (the read is read_uncommitted). Control markers hold no timestamp a
/// client can see, so this differs from a broker's answer in one case: a marker stamped at or
/// after the time (Apache Kafka stamps it when the transaction ends) that follows records
/// stamped before it — a producer that sets timestamps, a mirror that keeps them. The broker
/// then answers the marker's offset, so a window ends at it; the scan reads on to the next
/// record at or after the time. Where the marker is the only difference, both give the same
/// records.
pub(crate) fn scan_windows(
    broker: &Broker,
    topic: &str,
    ranges: &[(i32, i64, i64)],
    since_ms: i64,
    until_ms: i64,
) -> Result<Vec<Bounds>, KafkaError> {
    let mut scans: HashMap<i32, Scan> = ranges
        .iter()
        .map(|&(p, low, end)| {
            (
                p,
                Scan {
                    end,
                    since: None,
                    until: None,
                    done: low >= end,
                    reached: low,
                },
            )
        })
        .collect();
    let mut open = scans.values().filter(|s| !s.done).count();
    let what = || format!("scanning {topic} for offsets by time");
    let consumer = assigned_reader(broker, topic, ranges)?;
    // A partition is paused as soon as its scan is done: its fetches would only read records
    // nobody looks at, and slow those of the partitions still open.
    let stop = |p: i32| -> Result<(), KafkaError> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, p);
        consumer.pause(&tpl).map_err(|e| broker.error(what(), e))
    };
    let mut progress_at = Instant::now();
    let mut positions_at = progress_at;
    // Reading the clock for every record costs as much as looking at the record: it is read
    // once per `CLOCK_EVERY` records and whenever a poll comes back empty.
    let mut unclocked = 0u32;
    let mut progressed = false;
    while open > 0 {
        let now = match consumer.poll(POLL) {
            Some(Ok(m)) => {
                if let Some(scan) = scans.get_mut(&m.partition()).filter(|s| !s.done) {
                    progressed = true;
                    if scan.see(m.offset(), m.timestamp().to_millis(), since_ms, until_ms) {
                        open -= 1;
                        stop(m.partition())?;
                    }
                }
                unclocked += 1;
                if unclocked < CLOCK_EVERY {
                    continue;
                }
                Instant::now()
            }
            Some(Err(e)) => return Err(broker.error(what(), e)),
            None => Instant::now(),
        };
        unclocked = 0;
        if progressed {
            progress_at = now;
            progressed = false;
        }
        if now.duration_since(positions_at) >= POLL {
            positions_at = now;
            let positions = consumer.position().map_err(|e| broker.error(what(), e))?;
            for e in positions.elements() {
                if let (Some(scan), Offset::Offset(p)) = (scans.get_mut(&e.partition()), e.offset())
                {
                    if p > scan.reached && !scan.done {
                        scan.reached = p;
                        scan.done = p >= scan.end;
                        progress_at = now;
                        if scan.done {
                            open -= 1;
                            stop(e.partition())?;
                        }
                    }
                }
            }
        }
        if now.duration_since(progress_at) > broker.op_timeout {
            let stuck: Vec<String> = scans
                .iter()
                .filter(|(_, s)| !s.done)
                .map(|(p, s)| format!("{topic}[{p}] at {} of {}", s.reached, s.end))
                .collect();
            return Err(broker.error(
                what(),
                format!(
                    "no progress for {:?}: {}",
                    broker.op_timeout,
                    stuck.join(", ")
                ),
            ));
        }
    }
    close_consumer(&consumer, broker.op_timeout);
    Ok(ranges
        .iter()
        .map(|(p, _, _)| scans.get(p).map_or((None, None), |s| (s.since, s.until)))
        .collect())
}
