//! Planning an operational replay over Kafka: per partition, the time window's offsets, the
//! captured end, the log start (what retention kept), and both groups' committed offsets; and
//! the refusals that keep a replay from hurting anyone.

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

#[derive(Debug, Clone)]
pub struct DayReplayRequest {
    pub topic: String,
    pub live_group: String,
    pub replay_group: String,
    pub window: Window,
    /// Partitions to replay; `None` means all of the topic's.
    pub partitions: Option<Vec<i32>>,
    /// Continue from the replay group's committed offsets inside the plan.
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
    /// Where execution begins: `start`, or the replay group's committed offset with --resume.
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

/// Why a replay must not be planned or run.
#[derive(Debug, thiserror::Error)]
pub enum DayPlanError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

fn refuse(message: String) -> DayPlanError {
    DayPlanError::Refused(message)
}

/// Looks everything up on the broker and decides, per partition, what the replay would do.
pub fn plan_day(broker: &Broker, request: &DayReplayRequest) -> Result<DayPlan, DayPlanError> {
    let r = request;
    if r.live_group == r.replay_group {
        return Err(refuse(format!(
            "the replay group must differ from the live group ({})",
            r.live_group
        )));
    }
    if let Window::Time { since_ms, until_ms } = r.window {
        if until_ms <= since_ms {
            return Err(refuse(
                "empty window: --until must be later than --since".into(),
            ));
        }
    }
    let count = broker.partitions(&r.topic)?;
    if count == 0 {
        return Err(refuse(format!(
            "topic {} does not exist on {}",
            r.topic,
            broker.servers()
        )));
    }
    let partitions: Vec<i32> = match &r.partitions {
        Some(list) => {
            if let Some(p) = list.iter().find(|&&p| p < 0 || p >= count) {
                return Err(refuse(format!(
                    "topic {} has {count} partitions (0 to {}); partition {p} was asked for",
                    r.topic,
                    count - 1
                )));
            }
            list.clone()
        }
        None => (0..count).collect(),
    };
    if matches!(r.window, Window::Offsets { .. }) && partitions.len() != 1 {
        return Err(refuse(
            "--start/--stop name offsets of one partition: give exactly one with --partitions"
                .into(),
        ));
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
                        return Err(refuse(format!(
                            "retention removed part of the window on partition {partition}: offsets [0, {log_start}) are gone and the oldest kept record ({log_start}) is newer than --since"
                        )));
                    }
                }
                (log_start, window.end, since, window.until, start, stop)
            }
            Window::Offsets { start, stop } => {
                let (log_start, end) = broker.watermarks(&r.topic, partition)?;
                if stop <= start || start < 0 {
                    return Err(refuse(format!(
                        "empty window: [{start}, {stop}) holds no offset"
                    )));
                }
                if start < log_start {
                    return Err(refuse(format!(
                        "retention removed part of the window on partition {partition}: offsets [{start}, {log_start}) are gone"
                    )));
                }
                if stop > end {
                    return Err(refuse(format!(
                        "stop {stop} is beyond the end offset {end} of partition {partition}"
                    )));
                }
                (log_start, end, None, None, start, stop)
            }
        };
        let replay_committed = replay[i];
        let resume_from = match replay_committed {
            None => start,
            Some(c) if c < start || c > stop => {
                return Err(refuse(format!(
                    "replay group {} has committed offset {c} on partition {partition}, outside this plan [{start}, {stop}): it belongs to another replay; choose a new replay group",
                    r.replay_group
                )))
            }
            Some(c) if r.resume => c,
            Some(c) => {
                return Err(refuse(format!(
                    "replay group {} already committed offset {c} on partition {partition} inside this plan [{start}, {stop}): rerun with --resume to continue from there",
                    r.replay_group
                )))
            }
        };
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
        return Err(refuse(format!(
            "empty window: no record of {} falls inside it on partitions {partitions:?}",
            r.topic
        )));
    }
    Ok(DayPlan {
        request: request.clone(),
        partitions: plans,
    })
}
