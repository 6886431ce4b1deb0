//! Flat, serializable rows of a plan and of a report, one per partition, for tables, CSV and
//! JSON: the shape every front end prints.

use serde::Serialize;

use super::report::{PartitionOutcome, PartitionReport, ReplayReport};
use super::window::{DayPlan, DayReplayRequest, PartitionPlan, Window};
use crate::replay::partition::ReplaySummary;
use crate::store::{Counters, PartitionProgress, RecordedPlan};

/// A partition of the plan as a flat row: the offsets found, the range, what it holds, both
/// groups' committed offsets and where execution begins.
#[derive(Serialize)]
pub struct PlanRow {
    pub partition: i32,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub log_start: i64,
    pub end: i64,
    pub start: i64,
    pub stop: i64,
    pub records: i64,
    pub live: Option<i64>,
    pub replay: Option<i64>,
    pub resume_from: i64,
}

impl From<&PartitionPlan> for PlanRow {
    fn from(p: &PartitionPlan) -> Self {
        PlanRow {
            partition: p.partition,
            since: p.found.since,
            until: p.found.until,
            log_start: p.found.log_start,
            end: p.found.end,
            start: p.start,
            stop: p.stop,
            records: p.records(),
            live: p.live_committed,
            replay: p.replay_committed,
            resume_from: p.resume_from,
        }
    }
}

/// A partition of the report as a flat row: what this run did, what the offsets held besides
/// records (control markers, aborted records), records of the range outside the time window and
/// of the window after the range, where the replay group stands, and the live group's offsets
/// before and after.
#[derive(Serialize)]
pub struct ReportRow {
    pub partition: i32,
    /// This run's summary; its `conflicts` are those recorded for the plan whose version not
    /// kept is in this partition.
    #[serde(flatten)]
    pub summary: ReplaySummary,
    pub stop: i64,
    pub live_before: Option<i64>,
    pub live_after: Option<i64>,
    pub status: String,
}

impl From<&PartitionReport> for ReportRow {
    fn from(p: &PartitionReport) -> Self {
        let s = &p.summary;
        ReportRow {
            partition: p.partition,
            summary: ReplaySummary {
                counters: Counters {
                    conflicts: p.conflicts,
                    ..s.counters
                },
                ..s.clone()
            },
            stop: p.stop,
            live_before: p.live_before,
            live_after: p.live_after,
            status: match &p.outcome {
                PartitionOutcome::Replayed => "ok".to_owned(),
                PartitionOutcome::CompleteBefore => "complete before this run".to_owned(),
                PartitionOutcome::ByOtherWorkers => "replayed by other workers".to_owned(),
                PartitionOutcome::Failed(e) => format!("error: {e}"),
            },
        }
    }
}

/// The whole plan as one document: where, which groups, which window, and every partition.
#[derive(Serialize)]
pub struct PlanDocument<'a> {
    pub brokers: &'a str,
    #[serde(flatten)]
    pub request: &'a DayReplayRequest,
    pub partitions: &'a [PartitionPlan],
}

impl<'a> PlanDocument<'a> {
    pub fn new(plan: &'a DayPlan, brokers: &'a str) -> Self {
        PlanDocument {
            brokers,
            request: &plan.request,
            partitions: &plan.partitions,
        }
    }
}

impl DayPlan {
    /// One row per partition.
    pub fn rows(&self) -> Vec<PlanRow> {
        self.partitions.iter().map(PlanRow::from).collect()
    }
}

impl ReplayReport {
    /// One row per partition.
    pub fn rows(&self) -> Vec<ReportRow> {
        self.partitions.iter().map(ReportRow::from).collect()
    }
}

/// One partition of a recorded plan as a flat row for `replay status`: the plan's identity and
/// the partition's state.
#[derive(Serialize)]
pub struct StatusRow {
    pub plan_id: String,
    pub topic: String,
    pub replay_group: String,
    pub window: String,
    pub status: String,
    pub created_at: String,
    pub created_by: String,
    pub finished_at: Option<String>,
    #[serde(flatten)]
    pub partition: PartitionStatus,
}

/// A partition of a recorded plan: its range, checkpoint, owner and counters (markers:
/// offsets that held transaction markers; aborted: records of aborted transactions).
#[derive(Serialize)]
pub struct PartitionStatus {
    pub partition: i32,
    pub start: i64,
    pub stop: i64,
    pub checkpoint: i64,
    pub remaining: i64,
    pub owner: Option<String>,
    #[serde(flatten)]
    pub counters: Counters,
    pub updated_at: String,
}

impl From<&PartitionProgress> for PartitionStatus {
    fn from(p: &PartitionProgress) -> Self {
        PartitionStatus {
            partition: p.partition,
            start: p.start,
            stop: p.stop,
            checkpoint: p.next_offset,
            remaining: (p.stop - p.next_offset).max(0),
            owner: p.owner.clone(),
            counters: p.counters,
            updated_at: p.updated_at.clone(),
        }
    }
}

impl StatusRow {
    pub fn new(plan: &RecordedPlan, p: &PartitionProgress) -> StatusRow {
        StatusRow {
            plan_id: plan.plan_id.clone(),
            topic: plan.topic.clone(),
            replay_group: plan.replay_group.clone(),
            window: Window::from(plan.window).to_string(),
            status: plan.status.as_str().to_owned(),
            created_at: plan.created_at.clone(),
            created_by: plan.created_by.clone(),
            finished_at: plan.finished_at.clone(),
            partition: PartitionStatus::from(p),
        }
    }
}
