//! The report of an executed plan, per partition: what each did, how the live group moved
//! meanwhile (it may keep consuming, but must not move back or lose its offsets), and the
//! verdict under the operator's policy for findings.

use std::fmt;
use std::time::Duration;

use super::execute::PartitionError;
use super::outage::Outages;
use crate::replay::partition::ReplaySummary;

/// What one partition did in this run.
#[derive(Debug)]
pub enum PartitionOutcome {
    /// Its remaining range was replayed to `stop`.
    Replayed,
    /// Nothing was left to do: the SQL checkpoint was already at `stop`.
    CompleteBefore,
    /// Replayed by the other workers of the plan (with `--worker`), none of it by this one.
    ByOtherWorkers,
    Failed(PartitionError),
}

#[derive(Debug)]
pub struct PartitionReport {
    pub partition: i32,
    /// What this run did; `final_offset` is the replay group's last durable offset.
    pub summary: ReplaySummary,
    pub stop: i64,
    /// Conflicts recorded for the plan whose version not kept is in this partition.
    pub conflicts: u64,
    pub outcome: PartitionOutcome,
    /// The live group's committed offset when planning, and after the run.
    pub live_before: Option<i64>,
    pub live_after: Option<i64>,
}

/// How the live group's committed offset on one partition changed while the replay ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMovement {
    Unchanged,
    /// It kept consuming: information, not a failure.
    Advanced {
        by: i64,
    },
    /// It committed for the first time.
    Started {
        at: i64,
    },
    /// Someone moved it back (a reset to an earlier offset).
    MovedBack {
        from: i64,
        to: i64,
    },
    /// Its committed offset is gone (deleted or reset to nothing).
    Reset {
        from: i64,
    },
}

impl LiveMovement {
    pub fn between(before: Option<i64>, after: Option<i64>) -> LiveMovement {
        match (before, after) {
            (None, None) => LiveMovement::Unchanged,
            (None, Some(at)) => LiveMovement::Started { at },
            (Some(from), None) => LiveMovement::Reset { from },
            (Some(from), Some(to)) if to < from => LiveMovement::MovedBack { from, to },
            (Some(from), Some(to)) if to > from => LiveMovement::Advanced { by: to - from },
            _ => LiveMovement::Unchanged,
        }
    }

    /// Whether the run must fail for it.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            LiveMovement::MovedBack { .. } | LiveMovement::Reset { .. }
        )
    }
}

impl PartitionReport {
    pub fn live_movement(&self) -> LiveMovement {
        LiveMovement::between(self.live_before, self.live_after)
    }
}

/// The per-partition result of an executed plan.
#[derive(Debug)]
pub struct ReplayReport {
    pub plan_id: String,
    pub live_group: String,
    pub partitions: Vec<PartitionReport>,
    /// Wall time of the execution.
    pub elapsed: Duration,
    /// Partitions replayed at once.
    pub lanes: usize,
    /// Why the live group's committed offsets could not be read after the run (a broker gone
    /// meanwhile): then no partition's `live_after` is known, and nothing is compared.
    pub live_unread: Option<String>,
    /// The outages the run rode through, and the one it ended on.
    pub outages: Outages,
}

/// A reason the run did not succeed, for one partition.
#[derive(Debug)]
pub enum Failure<'a> {
    Partition {
        partition: i32,
        error: &'a PartitionError,
        durable: i64,
    },
    LiveGroupMoved {
        partition: i32,
        group: &'a str,
        movement: LiveMovement,
    },
    /// The live group's offsets after the run could not be read: whether it moved is unknown.
    LiveGroupUnread { group: &'a str, reason: &'a str },
}

impl Failure<'_> {
    /// The partition it is about, when it is about one.
    pub fn partition(&self) -> Option<i32> {
        match self {
            Failure::Partition { partition, .. } | Failure::LiveGroupMoved { partition, .. } => {
                Some(*partition)
            }
            Failure::LiveGroupUnread { .. } => None,
        }
    }
}

impl ReplayReport {
    /// Whether no partition failed.
    pub fn every_partition_done(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| !matches!(p.outcome, PartitionOutcome::Failed(_)))
    }

    /// Records replayed in this run, over every partition.
    pub fn records(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.summary.counters.records)
            .sum()
    }

    /// Conflicts recorded for the plan (this run and earlier runs of it).
    pub fn conflicts(&self) -> u64 {
        self.partitions.iter().map(|p| p.conflicts).sum()
    }

    /// Records quarantined in this run.
    pub fn quarantined(&self) -> u64 {
        self.partitions
            .iter()
            .map(|p| p.summary.counters.quarantined)
            .sum()
    }

    /// Every reason the run did not succeed: failed partitions, a live group that moved, and
    /// a live group whose offsets could not be read after the run.
    pub fn failures(&self) -> Vec<Failure<'_>> {
        let mut failures = Vec::new();
        for p in &self.partitions {
            if let PartitionOutcome::Failed(error) = &p.outcome {
                failures.push(Failure::Partition {
                    partition: p.partition,
                    error,
                    durable: p.summary.final_offset,
                });
            }
            if self.live_unread.is_some() {
                continue;
            }
            let movement = p.live_movement();
            if movement.is_failure() {
                failures.push(Failure::LiveGroupMoved {
                    partition: p.partition,
                    group: &self.live_group,
                    movement,
                });
            }
        }
        if let Some(reason) = &self.live_unread {
            failures.push(Failure::LiveGroupUnread {
                group: &self.live_group,
                reason,
            });
        }
        failures
    }

    /// What the run noticed that is no failure: the live group consuming on meanwhile.
    pub fn notices(&self) -> Vec<String> {
        let group = &self.live_group;
        self.partitions
            .iter()
            .filter(|_| self.live_unread.is_none())
            .filter_map(|p| {
                let partition = p.partition;
                match p.live_movement() {
                    LiveMovement::Advanced { by } => Some(format!(
                        "live group {group} advanced by {by} on partition {partition} while the replay ran"
                    )),
                    LiveMovement::Started { at } => Some(format!(
                        "live group {group} committed offset {at} on partition {partition} for the first time while the replay ran"
                    )),
                    _ => None,
                }
            })
            .collect()
    }
}

impl fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Partition {
                partition,
                error,
                durable,
            } => write!(
                f,
                "partition {partition}: {error}; last durable offset {durable}"
            ),
            Failure::LiveGroupMoved {
                partition,
                group,
                movement,
            } => match movement {
                LiveMovement::Reset { from } => write!(
                    f,
                    "partition {partition}: THE LIVE GROUP {group} WAS RESET during the replay: its committed offset {from} is gone"
                ),
                LiveMovement::MovedBack { from, to } => write!(
                    f,
                    "partition {partition}: THE LIVE GROUP {group} MOVED BACKWARD from {from} to {to} during the replay"
                ),
                other => write!(f, "partition {partition}: live group {group}: {other:?}"),
            },
            Failure::LiveGroupUnread { group, reason } => write!(
                f,
                "the live group {group}'s committed offsets could not be read after the run, so whether it moved is unknown: {reason}"
            ),
        }
    }
}

/// What the operator counts as a finding: conflicts (`fail_on_conflict`) and quarantined
/// records (unless `allow_quarantine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FindingsPolicy {
    pub fail_on_conflict: bool,
    pub allow_quarantine: bool,
}

/// How a run ended, under a [`FindingsPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every partition at its stop; nothing the policy counts as a finding.
    Clean,
    /// Every partition at its stop, with findings the policy counts.
    Findings,
    /// Partitions short of their stop, or whose live group moved back or was reset.
    Incomplete { partitions: usize },
    /// Every partition at its stop, but the live group's offsets after the run are unknown.
    LiveUnknown,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Clean => write!(f, "replay complete"),
            Verdict::Findings => write!(f, "replay complete, with findings"),
            Verdict::Incomplete { partitions } => write!(
                f,
                "replay incomplete on {partitions} partition(s); fix the cause and rerun with --resume to continue from the last durable offsets"
            ),
            Verdict::LiveUnknown => write!(
                f,
                "the replay reached every stop, but the live group's offsets after it are unknown: look at the live group before trusting the run"
            ),
        }
    }
}

/// The verdict, and what the operator is told on the way: the notices, the findings and every
/// failure, one line each, in that order.
#[derive(Debug)]
pub struct Judgement {
    pub verdict: Verdict,
    pub lines: Vec<String>,
}

impl ReplayReport {
    /// Decides the run under `policy`: failures first (a failed partition or a live group
    /// moved back), then findings.
    pub fn verdict(&self, policy: FindingsPolicy) -> Judgement {
        let mut lines = self.notices();
        let mut findings = false;
        let (conflicts, quarantined) = (self.conflicts(), self.quarantined());
        if conflicts > 0 {
            findings |= policy.fail_on_conflict;
            lines.push(format!(
                "{conflicts} CONFLICT(S): the same event_id arrived with different content; the first stored version was kept and both are named in lessonprobe_replay_conflicts (plan {}){}",
                self.plan_id,
                if policy.fail_on_conflict { "; --on-conflict warn only reports them" } else { "" }
            ));
        }
        if quarantined > 0 {
            findings |= !policy.allow_quarantine;
            lines.push(format!(
                "{quarantined} RECORD(S) QUARANTINED: not audit events, kept with the reason in lessonprobe_replay_quarantine (plan {}){}",
                self.plan_id,
                if policy.allow_quarantine { "" } else { "; --allow-quarantine accepts them" }
            ));
        }
        if let Some(outlasted) = &self.outages.outlasted {
            lines.push(outlasted.to_string());
        }
        let failures = self.failures();
        let partitions: std::collections::BTreeSet<i32> =
            failures.iter().filter_map(Failure::partition).collect();
        lines.extend(failures.iter().map(ToString::to_string));
        let verdict = match (failures.is_empty(), partitions.len()) {
            (true, _) if findings => Verdict::Findings,
            (true, _) => Verdict::Clean,
            (false, 0) => Verdict::LiveUnknown,
            (false, partitions) => Verdict::Incomplete { partitions },
        };
        Judgement { verdict, lines }
    }
}
