//! Planning an operational replay over Kafka: per partition, the time window's offsets, the
//! captured end, the log start (what retention kept), and both groups' committed offsets; and
//! the refusals that keep a replay from hurting anyone.

use std::fmt;

use serde::Serialize;

use super::ReplayPlan;
use crate::kafka::{committed_offsets, partition_window, AutoLookup, Broker, KafkaError};

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

#[derive(Debug, Clone)]
pub struct DayReplayRequest {
    pub topic: String,
    pub live_group: String,
    pub replay_group: String,
    pub window: Window,
    /// Partitions to replay; `None` means all of the topic's.
    pub partitions: Option<Vec<i32>>,
    /// Continue a recorded, unfinished plan from its SQL checkpoints.
    pub resume: bool,
}

/// One partition's part of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionPlan {
    pub partition: i32,
    /// First offset at or after `since` (time windows; `None`: no such record).
    pub since_offset: Option<i64>,
    /// First offset at or after `until` (time windows; `None`: none, so stop is the end).
    pub until_offset: Option<i64>,
    /// The oldest offset retention kept.
    pub log_start: i64,
    /// The end offset captured while planning.
    pub end: i64,
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
        ReplayPlan::new(
            &r.live_group,
            &r.replay_group,
            &r.topic,
            p.partition,
            p.resume_from,
            p.stop,
        )
        .ok()
    }
}

/// Why a replay could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum DayPlanError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
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
    #[error("empty window: [{start}, {stop}) holds no offset")]
    EmptyRange { start: i64, stop: i64 },
    #[error("retention removed part of the window on partition {partition}: offsets [0, {log_start}) are gone and the oldest kept record ({log_start}) is newer than the window's start")]
    RetentionRemovedWindowStart { partition: i32, log_start: i64 },
    #[error("retention removed part of the window on partition {partition}: offsets [{start}, {log_start}) are gone")]
    RetentionRemovedOffsets {
        partition: i32,
        start: i64,
        log_start: i64,
    },
    #[error("stop {stop} is beyond the end offset {end} of partition {partition}")]
    StopBeyondEnd { partition: i32, stop: i64, end: i64 },
    #[error("empty window: no record of {topic} falls inside it on partitions {partitions:?}")]
    NothingInWindow { topic: String, partitions: Vec<i32> },
}

/// Looks everything up on the broker and decides, per partition, what the replay would do.
pub fn plan_day(broker: &Broker, request: &DayReplayRequest) -> Result<DayPlan, DayPlanError> {
    let r = request;
    if r.live_group == r.replay_group {
        return Err(Refusal::SameGroup {
            group: r.live_group.clone(),
        }
        .into());
    }
    if let Window::Time { since_ms, until_ms } = r.window {
        if until_ms <= since_ms {
            return Err(Refusal::WindowBackwards.into());
        }
    }
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
    let live = committed_offsets(broker, &r.live_group, &r.topic, &partitions)?;
    let replay = committed_offsets(broker, &r.replay_group, &r.topic, &partitions)?;
    let mut lookup = AutoLookup::new(broker);
    let mut plans = Vec::with_capacity(partitions.len());
    for (i, &partition) in partitions.iter().enumerate() {
        let (log_start, end, since_offset, until_offset, start, stop) = match r.window {
            Window::Time { since_ms, until_ms } => {
                let window =
                    partition_window(broker, &mut lookup, &r.topic, partition, since_ms, until_ms)?;
                let (start, stop) = window.range();
                let (log_start, since) = (window.log_start, window.since);
                if log_start > 0 && since.is_some() {
                    // Records before log_start are gone: were any of them in the window?
                    let oldest = broker.record_timestamp(&r.topic, partition, log_start)?;
                    if oldest.is_some_and(|ts| ts > since_ms) {
                        return Err(Refusal::RetentionRemovedWindowStart {
                            partition,
                            log_start,
                        }
                        .into());
                    }
                }
                (log_start, window.end, since, window.until, start, stop)
            }
            Window::Offsets { start, stop } => {
                let (log_start, end) = broker.watermarks(&r.topic, partition)?;
                if stop <= start || start < 0 {
                    return Err(Refusal::EmptyRange { start, stop }.into());
                }
                if start < log_start {
                    return Err(Refusal::RetentionRemovedOffsets {
                        partition,
                        start,
                        log_start,
                    }
                    .into());
                }
                if stop > end {
                    return Err(Refusal::StopBeyondEnd {
                        partition,
                        stop,
                        end,
                    }
                    .into());
                }
                (log_start, end, None, None, start, stop)
            }
        };
        // Where execution begins is the target's to say (its SQL checkpoint of this plan).
        let replay_committed = replay[i];
        let resume_from = start;
        plans.push(PartitionPlan {
            partition,
            since_offset,
            until_offset,
            log_start,
            end,
            start,
            stop,
            live_committed: live[i],
            replay_committed,
            resume_from,
        });
    }
    if plans.iter().all(|p| p.records() == 0) {
        return Err(Refusal::NothingInWindow {
            topic: r.topic.clone(),
            partitions,
        }
        .into());
    }
    Ok(DayPlan {
        request: request.clone(),
        partitions: plans,
    })
}
