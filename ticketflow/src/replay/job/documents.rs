//! A prepared replay and an executed one as the documents `--format json` prints: the plan
//! with what this run does with it and the target as found; the report with every partition's
//! row and the totals of findings; and the rows of the plans a target records.

use std::fmt;

use serde::Serialize;

use super::identity::Decision;
use super::outage::Outages;
use super::prepare::Prepared;
use super::report::ReplayReport;
use super::rows::{PartitionStatus, PlanDocument, ReportRow, StatusRow};
use super::window::{DayPlan, PartitionPlan};
use crate::store::{Adoption, Inspection, RecordedPlan};

/// A prepared replay: the plan, its id, the decision and the target.
#[derive(Serialize)]
pub struct PreparedDocument<'a> {
    pub plan: PlanDocument<'a>,
    pub plan_id: &'a str,
    /// `new`, `resume` or `complete`.
    pub decision: &'static str,
    pub target: TargetDocument<'a>,
}

/// The target as found, how it is adopted, and both said in words.
#[derive(Serialize)]
pub struct TargetDocument<'a> {
    pub found: &'a Inspection,
    pub adoption: &'a Adoption,
    pub summary: Vec<String>,
}

/// An executed replay: its plan's partitions, a row per partition, the findings' totals.
#[derive(Serialize)]
pub struct ReportDocument<'a> {
    pub plan_id: &'a str,
    pub plan: &'a [PartitionPlan],
    pub results: Vec<ReportRow>,
    pub conflicts: u64,
    pub quarantined: u64,
    /// The outages the run rode through (each with the time it cost), and the one it ended on.
    pub outages: &'a Outages,
}

impl Decision {
    /// What this run does with the plan, in one word.
    pub fn name(&self) -> &'static str {
        match self {
            Decision::New(_) => "new",
            Decision::Resume { .. } => "resume",
            Decision::Complete(_) => "complete",
        }
    }
}

impl Prepared<'_> {
    /// The document of this prepared replay.
    pub fn document(&self) -> PreparedDocument<'_> {
        let view = &self.view;
        PreparedDocument {
            plan: PlanDocument::new(&self.plan, self.job.servers()),
            plan_id: &self.decision.plan().plan_id,
            decision: self.decision.name(),
            target: TargetDocument {
                found: &view.inspection,
                adoption: &view.adoption,
                summary: view.adoption.describe(&view.inspection),
            },
        }
    }
}

impl ReplayReport {
    /// The document of this report of `plan`.
    pub fn document<'a>(&'a self, plan: &'a DayPlan) -> ReportDocument<'a> {
        ReportDocument {
            plan_id: &self.plan_id,
            plan: &plan.partitions,
            results: self.rows(),
            conflicts: self.conflicts(),
            quarantined: self.quarantined(),
            outages: &self.outages,
        }
    }
}

/// The plan's line above its table: where, which groups, which window.
impl fmt::Display for PlanDocument<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.request;
        write!(
            f,
            "replay plan: topic {} on {}; live group {} (read only); replay group {}; window {}",
            r.topic, self.brokers, r.live_group, r.replay_group, r.window
        )
    }
}

impl StatusRow {
    /// A row per partition of every plan in `plans`.
    pub fn all(plans: &[RecordedPlan]) -> Vec<StatusRow> {
        plans
            .iter()
            .flat_map(|plan| plan.partitions.iter().map(move |p| StatusRow::new(plan, p)))
            .collect()
    }
}

impl PartitionStatus {
    /// A row per partition of `plan`.
    pub fn all(plan: &RecordedPlan) -> Vec<PartitionStatus> {
        plan.partitions.iter().map(PartitionStatus::from).collect()
    }
}
