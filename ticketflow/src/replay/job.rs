//! The replay job: plan a window of a real topic, execute the plan into the audit database, and
//! report per partition what happened — including how the live group moved meanwhile: it may
//! keep consuming (forward is information), but must not move back or lose its offsets.

use std::fmt;
use std::time::{Duration, Instant};

use super::execute::{execute_day, ExecuteOptions, PartitionError, Progress, CONNECT_TIMEOUT};
use super::window::{plan_day, DayPlan, DayPlanError, DayReplayRequest};
use super::ReplaySummary;
use crate::kafka::{committed_offsets, Broker, KafkaError, KafkaTarget};
use crate::store::{AuditDb, StoreError};

/// A replay of one request on one broker: [`plan`](Self::plan), then
/// [`execute`](Self::execute) that plan into a database.
pub struct ReplayJob {
    kafka: KafkaTarget,
    broker: Broker,
    request: DayReplayRequest,
}

/// Why the job could not reach the broker it was given.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A client property the replay sets itself was given (`-X`); nothing was contacted.
    #[error(
        "-X {property}: the replay sets {property} itself ({}); remove it",
        owned_reason(property)
    )]
    OwnedProperty { property: String },
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

fn owned_reason(property: &str) -> &'static str {
    match property {
        "isolation.level" => "read_committed: records of aborted transactions are never replayed",
        "group.id" => "the replay group, which must differ from the live group",
        "auto.offset.reset" => "error: a gone offset stops the replay instead of moving it",
        _ => "offsets are committed only after their rows are durable",
    }
}

/// Why the job could not execute its plan (the partitions' own failures are in the report).
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// The target database could not be opened; nothing was read.
    #[error("{db}: {source}")]
    Store { db: String, source: StoreError },
    /// The live group's offsets could not be read back after the run.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

/// What one partition did in this run.
#[derive(Debug)]
pub enum PartitionOutcome {
    /// Its remaining range was replayed to `stop`.
    Replayed,
    /// Nothing was left to do: the replay group had already committed `stop`.
    CompleteBefore,
    Failed(PartitionError),
}

#[derive(Debug)]
pub struct PartitionReport {
    pub partition: i32,
    /// What this run did; `final_offset` is the replay group's last durable offset.
    pub summary: ReplaySummary,
    pub stop: i64,
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
    pub live_group: String,
    pub partitions: Vec<PartitionReport>,
    /// Wall time of the execution.
    pub elapsed: Duration,
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
}

impl ReplayReport {
    /// Records replayed in this run, over every partition.
    pub fn records(&self) -> u64 {
        self.partitions.iter().map(|p| p.summary.records).sum()
    }

    /// Every reason the run did not succeed: failed partitions and a live group that moved.
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
            let movement = p.live_movement();
            if movement.is_failure() {
                failures.push(Failure::LiveGroupMoved {
                    partition: p.partition,
                    group: &self.live_group,
                    movement,
                });
            }
        }
        failures
    }

    /// What the run noticed that is no failure: the live group consuming on meanwhile.
    pub fn notices(&self) -> Vec<String> {
        let group = &self.live_group;
        self.partitions
            .iter()
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

    pub fn succeeded(&self) -> bool {
        self.failures().is_empty()
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
        }
    }
}

impl ReplayJob {
    /// Reaches the broker; every later broker call is bounded by `timeout`.
    /// Refuses client properties the replay sets itself before contacting anything.
    pub fn connect(
        kafka: &KafkaTarget,
        request: DayReplayRequest,
        timeout: Duration,
    ) -> Result<ReplayJob, ConnectError> {
        if let Some(property) = kafka.replay_owned_property() {
            return Err(ConnectError::OwnedProperty {
                property: property.to_owned(),
            });
        }
        Ok(ReplayJob {
            kafka: kafka.clone(),
            broker: Broker::for_target(kafka, timeout)?,
            request,
        })
    }

    /// The bootstrap servers the job works on.
    pub fn servers(&self) -> &str {
        self.broker.servers()
    }

    /// Looks everything up on the broker and decides, per partition, what the replay would do;
    /// refuses what must not run. Touches nothing.
    pub fn plan(&self) -> Result<DayPlan, DayPlanError> {
        plan_day(&self.broker, &self.request)
    }

    /// Opens `db` (so a bad target fails before any record is read), replays every partition
    /// of `plan` with work left, then reads the live group's offsets again and reports.
    pub fn execute(
        &self,
        plan: &DayPlan,
        db: &AuditDb,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        let opened = db
            .open(CONNECT_TIMEOUT)
            .map_err(|source| ExecuteError::Store {
                // A PostgreSQL error names its server itself.
                db: match db {
                    AuditDb::Sqlite(_) => db.to_string(),
                    AuditDb::Postgres(_) => "PostgreSQL".to_owned(),
                },
                source,
            })?;
        drop(opened);
        let started = Instant::now();
        let mut results = execute_day(&self.kafka, plan, options, db, progress);
        let elapsed = started.elapsed();
        let numbers: Vec<i32> = plan.partitions.iter().map(|p| p.partition).collect();
        let live_after = committed_offsets(
            &self.broker,
            &plan.request.live_group,
            &plan.request.topic,
            &numbers,
        )?;
        let partitions = plan
            .partitions
            .iter()
            .zip(live_after)
            .map(|(p, live_after)| {
                let result = results
                    .iter()
                    .position(|r| r.partition == p.partition)
                    .map(|i| results.swap_remove(i).result);
                let (summary, outcome) = match result {
                    None => (
                        ReplaySummary {
                            final_offset: p.resume_from,
                            ..ReplaySummary::default()
                        },
                        PartitionOutcome::CompleteBefore,
                    ),
                    Some(Ok(summary)) => (summary, PartitionOutcome::Replayed),
                    Some(Err(e)) => (
                        ReplaySummary {
                            final_offset: e.committed().unwrap_or(p.resume_from),
                            ..ReplaySummary::default()
                        },
                        PartitionOutcome::Failed(e),
                    ),
                };
                PartitionReport {
                    partition: p.partition,
                    summary,
                    stop: p.stop,
                    outcome,
                    live_before: p.live_committed,
                    live_after,
                }
            })
            .collect();
        Ok(ReplayReport {
            live_group: plan.request.live_group.clone(),
            partitions,
            elapsed,
        })
    }
}
