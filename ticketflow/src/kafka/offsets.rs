//! Reading offsets back from the broker: a group's committed offsets, and a time window's
//! offsets per partition by Kafka's timestamp rule — from the broker's index where it answers,
//! by one reading pass where it does not.

use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use super::scan::scan_windows;
use super::{Broker, KafkaError};

/// The committed offset of `group` for each of `partitions` (`None`: nothing committed).
/// Read through the broker's client of that group, which never subscribes, so the group is not
/// disturbed (the same client reads it again after a run, and commits for a replay group).
pub fn committed_offsets(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<Option<i64>>, KafkaError> {
    let consumer = broker.group_client(group)?;
    let mut tpl = TopicPartitionList::new();
    for &p in partitions {
        tpl.add_partition(topic, p);
    }
    let what = || format!("reading committed offsets of group {group} on {topic}");
    // A group's coordinator that is not ready yet (a fresh Apache Kafka creating its offsets
    // topic, a coordinator moving to another broker) answers for a moment that it is none: asked
    // again until the operation timeout.
    let started = std::time::Instant::now();
    let answer = loop {
        match consumer.committed_offsets(tpl.clone(), broker.op_timeout) {
            Err(e) if coordinator_not_ready(&e) && started.elapsed() < broker.op_timeout => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            other => break other.map_err(|e| broker.error(what(), e))?,
        }
    };
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
    Ok(offsets)
}

/// Whether `e` says the group's coordinator is not (yet) there: answered again shortly.
fn coordinator_not_ready(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{
        CoordinatorLoadInProgress, CoordinatorNotAvailable, NotCoordinator,
    };
    matches!(
        e.rdkafka_error_code(),
        Some(NotCoordinator | CoordinatorNotAvailable | CoordinatorLoadInProgress)
    )
}

/// Timestamp → offset, many partitions at once, by Kafka's rule (ListOffsets): for each
/// partition the first offset, in offset order, whose timestamp is at or after the time.
/// `None` is the broker's -1: no such offset — never "start at the end".
pub trait OffsetLookup {
    fn offsets_for_time(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp_ms: i64,
    ) -> Result<Vec<Option<i64>>, KafkaError>;
}

/// The broker's own index: one ListOffsets request for all partitions.
pub struct BrokerLookup<'a> {
    pub broker: &'a Broker,
}

impl<'a> BrokerLookup<'a> {
    pub fn new(broker: &'a Broker) -> Self {
        BrokerLookup { broker }
    }
}

/// The lookup [`time_windows`] starts from: the broker's index, read past where the broker
/// does not answer.
pub type AutoLookup<'a> = BrokerLookup<'a>;

impl OffsetLookup for BrokerLookup<'_> {
    fn offsets_for_time(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp_ms: i64,
    ) -> Result<Vec<Option<i64>>, KafkaError> {
        let broker = self.broker;
        let what = || format!("looking up {topic}{partitions:?} at {timestamp_ms} ms");
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition_offset(topic, p, Offset::Offset(timestamp_ms))
                .map_err(|e| broker.error(what(), e))?;
        }
        broker.asking_leaders(topic, partitions, |consumer| {
            let answer = consumer
                .offsets_for_times(tpl.clone(), broker.op_timeout)
                .map_err(|e| broker.error(what(), e))?;
            let offsets = partitions
                .iter()
                .map(
                    |&p| match answer.find_partition(topic, p).map(|e| e.offset()) {
                        Some(Offset::Offset(o)) if o >= 0 => Some(o),
                        _ => None, // -1 / END: nothing at or after that time
                    },
                )
                .collect();
            drop(answer);
            Ok(offsets)
        })
    }
}

/// One partition's offsets for a time window `[since, until)`, looked up now. Serialized as a
/// plan states them (`since_offset`, `until_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimeWindow {
    /// First offset at or after `since` (`None`: no such record).
    #[serde(rename = "since_offset")]
    pub since: Option<i64>,
    /// First offset at or after `until` (`None`: none, so the window runs to the end).
    #[serde(rename = "until_offset")]
    pub until: Option<i64>,
    /// The oldest offset retention kept.
    pub log_start: i64,
    /// The end offset captured while looking (for a read_committed client: the last stable
    /// offset, so no open transaction lies inside).
    pub end: i64,
}

impl TimeWindow {
    /// The watermarks alone, before (or without) any offset looked up for a time.
    pub fn of_watermarks(log_start: i64, end: i64) -> TimeWindow {
        TimeWindow {
            since: None,
            until: None,
            log_start,
            end,
        }
    }

    /// Whether retention kept any offset of the partition.
    fn holds_records(&self) -> bool {
        self.log_start < self.end
    }

    /// `[start, stop)`: `start` is the first offset at or after `since` (the end when there is
    /// none), `stop` the first at or after `until` or else the captured end; `start == stop`
    /// when the window holds no record of this partition.
    pub fn range(&self) -> (i64, i64) {
        let start = self.since.unwrap_or(self.end);
        (start, self.until.unwrap_or(self.end).max(start))
    }

    /// Offsets retention removed that may have held records of the window: all of them when
    /// nothing is kept, and `[0, log_start)` when the oldest kept record is already at or after
    /// `since` (records are appended in time order, so removed ones older than a kept record
    /// older than `since` were outside the window).
    pub fn lost(&self) -> Option<(i64, i64)> {
        let gone = self.log_start > 0;
        let all = self.log_start >= self.end;
        (gone && (all || self.since == Some(self.log_start))).then_some((0, self.log_start))
    }
}

/// Looks up the windows of `partitions` of `topic`, one each in their order: watermarks, then
/// the broker's answers for `since` and `until` (one request each for all partitions) when the
/// broker answers timestamp lookups, else one reading pass over all partitions at once
/// (librdkafka's mock cluster answers -1 to every lookup). A broker is trusted to answer when, asked for time 0,
/// it names an offset on every partition that holds records.
pub fn time_windows(
    broker: &Broker,
    lookup: &mut dyn OffsetLookup,
    topic: &str,
    partitions: &[i32],
    since_ms: i64,
    until_ms: i64,
) -> Result<Vec<TimeWindow>, KafkaError> {
    let mut windows: Vec<TimeWindow> = watermarks(broker, topic, partitions)?
        .into_iter()
        .map(|(log_start, end)| TimeWindow::of_watermarks(log_start, end))
        .collect();
    // The partitions that hold records, with the range each holds.
    let ranges: Vec<(i32, i64, i64)> = partitions
        .iter()
        .zip(&windows)
        .filter(|(_, w)| w.holds_records())
        .map(|(&p, w)| (p, w.log_start, w.end))
        .collect();
    let holding: Vec<i32> = ranges.iter().map(|&(p, ..)| p).collect();
    if holding.is_empty() {
        return Ok(windows);
    }
    let answers = !broker.is_embedded()
        && lookup
            .offsets_for_time(topic, &holding, 0)?
            .iter()
            .all(Option::is_some);
    let found = if answers {
        tracing::debug!(
            "{topic}: offsets by time from the broker's index (ListOffsets) on {} partition(s)",
            holding.len()
        );
        let since = lookup.offsets_for_time(topic, &holding, since_ms)?;
        let until = lookup.offsets_for_time(topic, &holding, until_ms)?;
        since.into_iter().zip(until).collect()
    } else {
        tracing::debug!(
            "{topic}: the broker answers no timestamp lookup; reading {} partition(s) for offsets by time",
            holding.len()
        );
        scan_windows(broker, topic, &ranges, since_ms, until_ms)?
    };
    let mut found = found.into_iter();
    for w in windows.iter_mut().filter(|w| w.holds_records()) {
        if let Some((since, until)) = found.next() {
            // An answer at or past the captured end lies outside what this plan may read.
            let inside = |o: Option<i64>| o.filter(|&o| o < w.end).map(|o| o.max(w.log_start));
            w.since = inside(since);
            w.until = inside(until);
        }
    }
    Ok(windows)
}

/// `(log start, end)` of each of `partitions`, in one ListOffsets request per leader for each
/// (the earliest and the latest offsets): asked partition by partition, that was two round
/// trips per partition. The end is the one a read_committed client sees, as the utility
/// consumer is one.
pub(super) fn watermarks(
    broker: &Broker,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i64, i64)>, KafkaError> {
    let what = || format!("reading watermarks of {topic}{partitions:?}");
    let ask = |at: Offset| {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition_offset(topic, p, at)
                .map_err(|e| broker.error(what(), e))?;
        }
        broker.asking_leaders(topic, partitions, |consumer| {
            let answer = consumer
                .offsets_for_times(tpl.clone(), broker.op_timeout)
                .map_err(|e| broker.error(what(), e))?;
            let offsets =
                partitions
                    .iter()
                    .map(|&p| {
                        let element = answer.find_partition(topic, p);
                        match element.as_ref().map(|e| (e.offset(), e.error())) {
                            Some((Offset::Offset(o), Ok(()))) if o >= 0 => Ok(o),
                            Some((_, Err(e))) => {
                                Err(broker.error(what(), format!("partition {p}: {e}")))
                            }
                            other => Err(broker
                                .error(what(), format!("partition {p}: no offset ({other:?})"))),
                        }
                    })
                    .collect::<Result<Vec<i64>, KafkaError>>();
            drop(answer);
            offsets
        })
    };
    if partitions.is_empty() {
        return Ok(Vec::new());
    }
    let low = ask(Offset::Beginning)?;
    let high = ask(Offset::End)?;
    Ok(low.into_iter().zip(high).collect())
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
    time_windows(broker, lookup, topic, &[partition], since_ms, until_ms)?
        .pop()
        .ok_or_else(|| broker.error(format!("looking up {topic}[{partition}]"), "no answer"))
}
