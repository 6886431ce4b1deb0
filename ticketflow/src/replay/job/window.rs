//! Planning an operational replay over Kafka: per partition, the time window's offsets, the
//! captured end, the log start (what retention kept), and both groups' committed offsets; and
//! the refusals that keep a replay from hurting anyone.

use std::fmt;

use serde::Serialize;

use crate::kafka::{
    committed_offsets, time_windows, Broker, BrokerLookup, KafkaError, OffsetLookup, TimeWindow,
};
use crate::replay::partition::{PartitionRequest, ReplayPlan};

/// What to replay: a time window on every chosen partition, or explicit offsets on one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Window {
    /// `[since, until)` in milliseconds since the epoch.
    Time { since_ms: i64, until_ms: i64 },
    /// `[start, stop)` on the one chosen partition.
    Offsets { start: i64, stop: i64 },
}

/// `[since, until)` in RFC 3339, or `offsets [start, stop)`.
impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Window::Time { since_ms, until_ms } => {
                let t = |ms| {
                    chrono::DateTime::from_timestamp_millis(ms)
                        .map_or_else(|| ms.to_string(), |t| t.to_rfc3339())
                };
                write!(f, "[{}, {})", t(since_ms), t(until_ms))
            }
            Window::Offsets { start, stop } => write!(f, "offsets [{start}, {stop})"),
        }
    }
}

/// Serialized as it is displayed.
impl Serialize for Window {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What to plan: serialized as a plan's document states it (topic, groups and window; the
/// partitions are the plan's own).
#[derive(Debug, Clone, Serialize)]
pub struct DayReplayRequest {
    pub topic: String,
    pub live_group: String,
    pub replay_group: String,
    pub window: Window,
    /// Partitions to replay; `None` means all of the topic's.
    #[serde(skip)]
    pub partitions: Option<Vec<i32>>,
    /// Continue a recorded, unfinished plan from its SQL checkpoints.
    #[serde(skip)]
    pub resume: bool,
}

/// One partition's part of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionPlan {
    pub partition: i32,
    /// The watermarks captured while planning and, for a time window, its offsets at `since`
    /// and `until` (`None` for explicit offsets).
    #[serde(flatten)]
    pub found: TimeWindow,
    pub start: i64,
    pub stop: i64,
    pub live_committed: Option<i64>,
    pub replay_committed: Option<i64>,
    /// Where execution begins: `start`, or the plan's SQL checkpoint when it is recorded.
    pub resume_from: i64,
}

impl PartitionPlan {
    pub fn records(&self) -> i64 {
        self.stop - self.start
    }
    pub fn remaining(&self) -> i64 {
        self.stop - self.resume_from
    }
}

#[derive(Debug, Clone)]
pub struct DayPlan {
    pub request: DayReplayRequest,
    pub partitions: Vec<PartitionPlan>,
    /// Why planning would refuse this run as a new plan (retention passed the window's start,
    /// or the window is empty), when it was asked to resume: the target's record decides.
    pub(crate) unless_recorded: Option<Refusal>,
}

impl DayPlan {
    /// Records in the window, over every partition.
    pub fn records(&self) -> i64 {
        self.partitions.iter().map(PartitionPlan::records).sum()
    }

    /// Records still to replay (all of them, unless resuming).
    pub fn remaining(&self) -> i64 {
        self.partitions.iter().map(PartitionPlan::remaining).sum()
    }

    /// The primitive's plan for one partition's remaining range, if any remains.
    pub fn bounded(&self, p: &PartitionPlan) -> Option<ReplayPlan> {
        let r = &self.request;
        let plan = ReplayPlan::new(PartitionRequest {
            live_group: &r.live_group,
            replay_group: &r.replay_group,
            topic: &r.topic,
            partition: p.partition,
            start: p.resume_from,
            stop: p.stop,
        })
        .ok()?;
        Some(match r.window {
            Window::Time { since_ms, until_ms } => plan.timed(since_ms, until_ms),
            Window::Offsets { .. } => plan,
        })
    }
}

/// Why a replay could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum DayPlanError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The broker failed or did not answer while the window was planned; nothing was written.
    #[error("planning: {0}")]
    Kafka(#[from] KafkaError),
}

/// A replay that must not run, and why; nothing was touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the replay group must differ from the live group ({group})")]
    SameGroup { group: String },
    #[error("empty window: its end must be later than its start")]
    WindowBackwards,
    #[error("topic {topic} does not exist on {servers}")]
    NoSuchTopic { topic: String, servers: String },
    #[error("topic {topic} has {count} partitions (0 to {}); partition {asked} was asked for", count - 1)]
    NoSuchPartition {
        topic: String,
        count: i32,
        asked: i32,
    },
    #[error("explicit offsets belong to one partition, and {chosen} were chosen")]
    OffsetsNeedOnePartition { chosen: usize },
    #[error("partition {partition} is listed twice")]
    DuplicatePartition { partition: i32 },
    #[error("--{which} {offset} is negative: offsets start at 0")]
    NegativeOffset { which: &'static str, offset: i64 },
    #[error("empty window: [{start}, {stop}) holds no offset")]
    EmptyRange { start: i64, stop: i64 },
    #[error("retention removed offsets the replay needs: {}", lost.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    RetentionRemoved { lost: Vec<Lost> },
    #[error("stop {stop} is beyond the end offset {end} of partition {partition}")]
    StopBeyondEnd { partition: i32, stop: i64, end: i64 },
    #[error("empty window: no record of {topic} falls inside it on partitions {partitions:?}")]
    NothingInWindow { topic: String, partitions: Vec<i32> },
}

/// Offsets of one partition that retention removed although the replay may need them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub partition: i32,
    pub from: i64,
    pub to: i64,
    /// Why they matter.
    pub why: LostWhy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostWhy {
    /// The partition keeps no record at all (its log start is its end).
    Everything,
    /// The oldest kept record is already at or after the window's start.
    WindowStart,
    /// They lie inside the explicit range, or between a resumed plan's checkpoint and the
    /// log start.
    InRange,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, from, to) = (self.partition, self.from, self.to);
        write!(f, "partition {p}: offsets [{from}, {to}) are gone")?;
        match self.why {
            LostWhy::Everything => write!(f, " (every record of the partition)"),
            LostWhy::WindowStart => write!(
                f,
                " and the oldest kept record ({to}) is not older than the window's start"
            ),
            LostWhy::InRange => Ok(()),
        }
    }
}

/// Looks everything up on the broker and decides, per partition, what the replay would do.
pub fn plan_day(broker: &Broker, request: &DayReplayRequest) -> Result<DayPlan, DayPlanError> {
    plan_day_with(broker, &mut BrokerLookup::new(broker), request)
}

/// [`plan_day`] with the timestamp lookups answered by `lookup` where the broker itself would.
pub(crate) fn plan_day_with(
    broker: &Broker,
    lookup: &mut dyn OffsetLookup,
    request: &DayReplayRequest,
) -> Result<DayPlan, DayPlanError> {
    let r = request;
    refuse_before_asking(r)?;
    let clock = std::time::Instant::now();
    let partitions = chosen_partitions(broker, r)?;
    let metadata = clock.elapsed();
    let live = committed_offsets(broker, &r.live_group, &r.topic, &partitions)?;
    let replay = committed_offsets(broker, &r.replay_group, &r.topic, &partitions)?;
    let groups = clock.elapsed();
    let windows = match r.window {
        Window::Time { since_ms, until_ms } => {
            time_windows(broker, lookup, &r.topic, &partitions, since_ms, until_ms)?
        }
        Window::Offsets { .. } => Vec::new(),
    };
    tracing::debug!(
        "planning {}: metadata {metadata:.2?}, both groups' offsets {:.2?}, time windows {:.2?}",
        r.topic,
        groups - metadata,
        clock.elapsed() - groups
    );
    let mut plans = Vec::with_capacity(partitions.len());
    let mut lost = Vec::new();
    for (i, &partition) in partitions.iter().enumerate() {
        let (found, (start, stop)) = match r.window {
            Window::Time { .. } => (windows[i], time_range(partition, &windows[i], &mut lost)),
            Window::Offsets { start, stop } => {
                let (log_start, end) = broker.watermarks(&r.topic, partition)?;
                let found = TimeWindow::of_watermarks(log_start, end);
                let range = offsets_range(partition, (start, stop), &found, &mut lost)?;
                (found, range)
            }
        };
        plans.push(PartitionPlan {
            partition,
            found,
            start,
            stop,
            live_committed: live[i],
            replay_committed: replay[i],
            // Where execution begins is the target's to say (its SQL checkpoint of this plan).
            resume_from: start,
        });
    }
    let refusal = if !lost.is_empty() {
        Some(Refusal::RetentionRemoved { lost })
    } else if plans.iter().all(|p| p.records() == 0) {
        Some(Refusal::NothingInWindow {
            topic: r.topic.clone(),
            partitions,
        })
    } else {
        None
    };
    match refusal {
        Some(refusal) if !r.resume => Err(refusal.into()),
        // A plan to resume is judged on the ranges it recorded, which retention may have
        // passed only where they were replayed already.
        unless_recorded => Ok(DayPlan {
            request: request.clone(),
            partitions: plans,
            unless_recorded,
        }),
    }
}

/// What the request alone says must not run: the same group twice, a window backwards, a
/// negative offset, a partition named twice.
fn refuse_before_asking(r: &DayReplayRequest) -> Result<(), Refusal> {
    if r.live_group == r.replay_group {
        return Err(Refusal::SameGroup {
            group: r.live_group.clone(),
        });
    }
    match r.window {
        Window::Time { since_ms, until_ms } if until_ms <= since_ms => {
            return Err(Refusal::WindowBackwards)
        }
        Window::Offsets { start, stop } => {
            for (which, offset) in [("start", start), ("stop", stop)] {
                if offset < 0 {
                    return Err(Refusal::NegativeOffset { which, offset });
                }
            }
        }
        Window::Time { .. } => {}
    }
    if let Some(list) = &r.partitions {
        let mut seen = std::collections::HashSet::new();
        if let Some(&partition) = list.iter().find(|&&p| !seen.insert(p)) {
            return Err(Refusal::DuplicatePartition { partition });
        }
    }
    Ok(())
}

/// The partitions the request names (every one of the topic when it names none), refused when
/// the topic or a partition does not exist, or when an offset range names more than one.
fn chosen_partitions(broker: &Broker, r: &DayReplayRequest) -> Result<Vec<i32>, DayPlanError> {
    let count = broker.partitions(&r.topic)?;
    if count == 0 {
        return Err(Refusal::NoSuchTopic {
            topic: r.topic.clone(),
            servers: broker.servers().to_owned(),
        }
        .into());
    }
    let partitions: Vec<i32> = match &r.partitions {
        Some(list) => {
            if let Some(&asked) = list.iter().find(|&&p| p < 0 || p >= count) {
                return Err(Refusal::NoSuchPartition {
                    topic: r.topic.clone(),
                    count,
                    asked,
                }
                .into());
            }
            list.clone()
        }
        None => (0..count).collect(),
    };
    if matches!(r.window, Window::Offsets { .. }) && partitions.len() != 1 {
        return Err(Refusal::OffsetsNeedOnePartition {
            chosen: partitions.len(),
        }
        .into());
    }
    Ok(partitions)
}

/// The range `[start, stop)` of a time window on one partition; what retention removed of it is
/// added to `lost`.
fn time_range(partition: i32, window: &TimeWindow, lost: &mut Vec<Lost>) -> (i64, i64) {
    if let Some((from, to)) = window.lost() {
        let why = if window.log_start >= window.end {
            LostWhy::Everything
        } else {
            LostWhy::WindowStart
        };
        lost.push(Lost {
            partition,
            from,
            to,
            why,
        });
    }
    window.range()
}

/// An explicit range `[start, stop)` on one partition between its watermarks (`found`); refused
/// when empty or past the end, and what retention removed of it added to `lost`.
fn offsets_range(
    partition: i32,
    (start, stop): (i64, i64),
    found: &TimeWindow,
    lost: &mut Vec<Lost>,
) -> Result<(i64, i64), Refusal> {
    let TimeWindow { log_start, end, .. } = *found;
    if stop <= start {
        return Err(Refusal::EmptyRange { start, stop });
    }
    if start < log_start {
        lost.push(Lost {
            partition,
            from: start,
            to: log_start.min(stop),
            why: if log_start >= end {
                LostWhy::Everything
            } else {
                LostWhy::InRange
            },
        });
    } else if stop > end {
        return Err(Refusal::StopBeyondEnd {
            partition,
            stop,
            end,
        });
    }
    Ok((start, stop))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Answers timestamp lookups as a Kafka broker does (ListOffsets): the first offset, in
    /// offset order, whose timestamp is at or after the time, or -1 (`None`) when none is.
    struct KafkaRule {
        timestamps: HashMap<i32, Vec<i64>>,
        requests: usize,
    }

    impl OffsetLookup for KafkaRule {
        fn offsets_for_time(
            &mut self,
            _: &str,
            partitions: &[i32],
            timestamp_ms: i64,
        ) -> Result<Vec<Option<i64>>, KafkaError> {
            self.requests += 1;
            Ok(partitions
                .iter()
                .map(|p| {
                    self.timestamps[p]
                        .iter()
                        .position(|&t| t >= timestamp_ms)
                        .map(|i| i as i64)
                })
                .collect())
        }
    }

    fn request(partition: i32, since_ms: i64, until_ms: i64) -> DayReplayRequest {
        DayReplayRequest {
            topic: "ooo".into(),
            live_group: "live".into(),
            replay_group: "replay".into(),
            window: Window::Time { since_ms, until_ms },
            partitions: Some(vec![partition]),
            resume: false,
        }
    }

    #[test]
    fn out_of_order_timestamps_plan_kafkas_answer_from_a_broker_that_answers_and_by_reading() {
        let mut mock = Broker::embedded(1).unwrap();
        mock.create_topic("ooo", 2).unwrap();
        let timestamps: HashMap<i32, Vec<i64>> = [
            (0, vec![1000, 5000, 2000, 3000]),
            (1, vec![1000, 9000, 2000, 3000]),
        ]
        .into();
        for (&p, ts) in &timestamps {
            for &t in ts {
                mock.produce("ooo", [(p, "k", b"{}".as_slice(), t)])
                    .unwrap();
            }
        }
        // The same cluster reached by address, as a broker that answers lookups would be.
        let broker = mock.same_address();
        for (partition, since, until, want) in [(0, 4000, 10_000, (1, 4)), (1, 500, 5000, (0, 1))] {
            let mut kafka = KafkaRule {
                timestamps: timestamps.clone(),
                requests: 0,
            };
            let plan =
                plan_day_with(&broker, &mut kafka, &request(partition, since, until)).unwrap();
            let p = &plan.partitions[0];
            assert_eq!(
                (p.start, p.stop),
                want,
                "broker answers, partition {partition}"
            );
            assert_eq!(
                kafka.requests, 3,
                "time 0, since and until: one request each"
            );
            // -1 for `until` on partition 0 (no timestamp reaches 10 s): stop is the end.
            if partition == 0 {
                assert_eq!(p.found.until, None);
            }
            // The mock itself answers -1 to every lookup: the plan comes from reading.
            let read = plan_day(&mock, &request(partition, since, until)).unwrap();
            assert_eq!((read.partitions[0].start, read.partitions[0].stop), want);
        }
        // Nothing at or after the window: refused as empty, both ways.
        let mut kafka = KafkaRule {
            timestamps,
            requests: 0,
        };
        assert!(matches!(
            plan_day_with(&broker, &mut kafka, &request(1, 20_000, 30_000)),
            Err(DayPlanError::Refused(Refusal::NothingInWindow { .. }))
        ));
    }

    #[test]
    fn lost_offsets_name_every_partition() {
        let lost = Refusal::RetentionRemoved {
            lost: vec![
                Lost {
                    partition: 0,
                    from: 0,
                    to: 4,
                    why: LostWhy::Everything,
                },
                Lost {
                    partition: 2,
                    from: 0,
                    to: 120,
                    why: LostWhy::WindowStart,
                },
            ],
        };
        assert_eq!(
            lost.to_string(),
            "retention removed offsets the replay needs: partition 0: offsets [0, 4) are gone \
             (every record of the partition); partition 2: offsets [0, 120) are gone and the \
             oldest kept record (120) is not older than the window's start"
        );
    }
}
