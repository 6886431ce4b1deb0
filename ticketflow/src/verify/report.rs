//! What a verification reports: counts per partition and in total, the recorded replay plans
//! that cover the window with their progress, the live group's offsets and lag, and the
//! discrepancies — as serializable rows for every front end.

use std::time::Duration;

use serde::Serialize;

use super::findings::{Findings, Kind};
use crate::replay::PartitionPlan;
use crate::store::RecordedPlan;

/// What one partition's range (or the whole window) held, and how the table compares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub records: u64,
    pub decodable: u64,
    pub distinct_event_ids: u64,
    pub undecodable: u64,
    /// Undecodable records that sit in the replay's quarantine table.
    pub quarantined: u64,
    /// Distinct event_ids with no row.
    pub missing: u64,
    /// Records whose row holds other content.
    pub mismatched: u64,
    /// Event_ids whose facts an earlier event_id already carries.
    pub duplicated_facts: u64,
}

impl Counts {
    /// Nothing of the window missing from the table, nothing stored with other content.
    pub fn clean(&self) -> bool {
        self.missing == 0 && self.mismatched == 0
    }
}

/// One partition's range and its counts.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionCounts {
    pub partition: i32,
    pub start: i64,
    pub stop: i64,
    #[serde(flatten)]
    pub counts: Counts,
}

/// A recorded replay plan's range and progress on a partition of the window it overlaps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanCoverage {
    pub plan_id: String,
    pub status: &'static str,
    pub partition: i32,
    pub start: i64,
    pub stop: i64,
    /// The plan's SQL checkpoint: every offset below it is durable in the table.
    pub checkpoint: i64,
    pub remaining: i64,
    /// Whether the plan's range holds all of the window's range on this partition.
    pub covers: bool,
}

impl PlanCoverage {
    /// Every partition of `plans` (of `topic`) whose range overlaps the window's range there.
    pub fn of(plans: &[RecordedPlan], topic: &str, ranges: &[PartitionPlan]) -> Vec<PlanCoverage> {
        let mut rows = Vec::new();
        for plan in plans.iter().filter(|p| p.topic == topic) {
            for r in ranges {
                let Some(p) = plan.partition(r.partition) else {
                    continue;
                };
                if p.start < r.stop && r.start < p.stop {
                    rows.push(PlanCoverage {
                        plan_id: plan.plan_id.clone(),
                        status: plan.status.as_str(),
                        partition: p.partition,
                        start: p.start,
                        stop: p.stop,
                        checkpoint: p.next_offset,
                        remaining: (p.stop - p.next_offset).max(0),
                        covers: p.start <= r.start && r.stop <= p.stop,
                    });
                }
            }
        }
        rows
    }
}

/// The live group's committed offset on a partition, and how far behind the end it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveOffsets {
    pub partition: i32,
    pub committed: Option<i64>,
    /// The end offset captured while planning.
    pub end: i64,
    pub lag: Option<i64>,
    /// Whether the group has committed past the window's range (it consumed all of it).
    pub past_window: Option<bool>,
}

impl LiveOffsets {
    pub fn of(p: &PartitionPlan) -> LiveOffsets {
        LiveOffsets {
            partition: p.partition,
            committed: p.live_committed,
            end: p.found.end,
            lag: p.live_committed.map(|c| (p.found.end - c).max(0)),
            past_window: p.live_committed.map(|c| c >= p.stop),
        }
    }
}

/// The result of comparing a window of the topic with the audit table.
pub struct VerifyReport {
    pub topic: String,
    pub servers: String,
    /// The database, without a password.
    pub target: String,
    /// The window as asked (`[since, until)` or offsets).
    pub window: String,
    pub partitions: Vec<PartitionCounts>,
    pub total: Counts,
    pub plans: Vec<PlanCoverage>,
    pub live_group: Option<String>,
    pub live: Vec<LiveOffsets>,
    pub findings: Findings,
    /// Whether the table was scanned whole or looked up batch by batch.
    pub compared: super::Compared,
    /// Wall time of reading and comparing (planning excluded).
    pub elapsed: Duration,
}

impl VerifyReport {
    /// Nothing missing and nothing mismatched: the table holds every event of the window as the
    /// topic carries it.
    pub fn clean(&self) -> bool {
        self.total.clean()
    }

    /// `(kind, count)` of every kind found at least once.
    pub fn found(&self) -> Vec<(Kind, u64)> {
        Kind::ALL
            .iter()
            .map(|&k| (k, self.findings.count(k)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }
}
