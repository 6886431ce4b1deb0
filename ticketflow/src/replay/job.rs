//! The replay job: plan a window of a real topic, execute the plan into the audit database, and
//! report per partition what happened — including how the live group moved meanwhile: it may
//! keep consuming (forward is information), but must not move back or lose its offsets.

use std::time::{Duration, Instant};

use super::execute::{DayRun, ExecuteOptions, Progress, SetupError, WriteTarget};
use super::identity::{self, Behind, Decision, IdentityRefusal, TargetView};
use super::prepare::Prepared;
use super::report::{PartitionOutcome, PartitionReport, ReplayReport};
use super::window::{plan_day, DayPlan, DayPlanError, DayReplayRequest, PartitionPlan};
use super::worker;
use super::{PlanError, ReplayConsumer, ReplayGroup, ReplaySummary};
use crate::kafka::{committed_offsets, Broker, KafkaError, KafkaReplayConsumer, KafkaTarget};
use crate::store::{AuditDb, PlanStatus, Recording, StoreError, Timeouts};

/// A replay of one request on one broker: [`plan`](Self::plan), then execute that plan into a
/// database ([`Prepared::run`]).
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
    /// The broker could not be reached before planning; nothing was written.
    #[error("planning: {0}")]
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
    /// The target database could not be opened, prepared or recorded in; nothing was read.
    #[error(transparent)]
    Store(#[from] DatabaseError),
    /// The replay group's or live group's offsets could not be committed or read back.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Why the target could not be looked at, or must not be used; nothing was read or written.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Store(#[from] DatabaseError),
}

/// Why a worker could not start on its plan; nothing was read from the topic.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error(transparent)]
    Store(#[from] DatabaseError),
    #[error(transparent)]
    Refused(#[from] IdentityRefusal),
}

/// The target database failed, named as its errors name it.
#[derive(Debug, thiserror::Error)]
#[error("{db}: {source}")]
pub struct DatabaseError {
    pub db: String,
    pub source: StoreError,
}

impl DatabaseError {
    fn new(db: &AuditDb, source: StoreError) -> DatabaseError {
        DatabaseError {
            db: name_of(db),
            source,
        }
    }
}

/// How an error of the store names the database: PostgreSQL errors name their server.
fn name_of(db: &AuditDb) -> String {
    match db {
        AuditDb::Sqlite(_) => db.to_string(),
        AuditDb::Postgres(_) => "PostgreSQL".to_owned(),
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

    /// Looks at the target without writing (a SQLite file that does not exist is not created):
    /// what it holds, whether the replay may adopt it, and the plans recorded there. Call it
    /// before [`plan`](Self::plan): a target that must not be used stops the run before
    /// anything is read from the topic.
    pub fn inspect(db: &AuditDb, timeouts: Timeouts) -> Result<TargetView, TargetError> {
        let store = |source| DatabaseError::new(db, source);
        let Some(mut target) = db.open_to_look(timeouts).map_err(store)? else {
            let inspection = db.nothing_yet();
            let adoption = inspection.adopt().map_err(|e| store(e.into()))?;
            return Ok(TargetView {
                inspection,
                adoption,
                plans: Vec::new(),
            });
        };
        let inspection = target.inspect().map_err(store)?;
        let adoption = inspection.adopt().map_err(|e| store(e.into()))?;
        let plans = target.plans().map_err(store)?;
        Ok(TargetView {
            inspection,
            adoption,
            plans,
        })
    }

    /// The plans recorded in `db`, whatever its `audit_events` is like (for `replay status`); a
    /// SQLite file that does not exist is an error, not an empty record (a mistyped path).
    pub fn recorded(
        db: &AuditDb,
        timeouts: Timeouts,
    ) -> Result<Vec<crate::store::RecordedPlan>, TargetError> {
        let store = |source| DatabaseError::new(db, source);
        match db.open_to_look(timeouts).map_err(store)? {
            Some(mut target) => Ok(target.plans().map_err(store)?),
            None => Err(store(StoreError::Unavailable("no such database file".into())).into()),
        }
    }

    /// What this run does with `plan` given the target's record of it; sets each partition's
    /// range and resume point to the recorded ones.
    pub fn decide(plan: &mut DayPlan, view: &TargetView) -> Result<Decision, IdentityRefusal> {
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        identity::decide(plan, view, &now, &identity::who())
    }

    /// Commits the replay group's offsets up to the SQL checkpoints where Kafka is behind them.
    fn bring_up(&self, plan: &DayPlan, behind: &[Behind]) -> Result<(), ExecuteError> {
        if behind.is_empty() {
            return Ok(());
        }
        let r = &plan.request;
        let group = ReplayGroup::new(&r.replay_group, &r.live_group).map_err(PlanError::from)?;
        let mut consumer = KafkaReplayConsumer::new(&self.broker, &group)?;
        for b in behind {
            consumer
                .commit(&r.topic, b.partition, b.sql)
                .map_err(|e| KafkaError {
                    servers: self.broker.servers().to_owned(),
                    what: format!(
                        "bringing the replay group up to the SQL checkpoint {} on partition {}",
                        b.sql, b.partition
                    ),
                    reason: e.to_string(),
                })?;
        }
        Ok(())
    }

    /// The run's report: each partition of the plan as `outcome` says, with the live group's
    /// offsets read after the run (when the broker still answers).
    fn report(
        &self,
        plan: &DayPlan,
        plan_id: &str,
        started: Instant,
        lanes: usize,
        mut outcome: impl FnMut(&PartitionPlan) -> (ReplaySummary, PartitionOutcome),
    ) -> ReplayReport {
        let elapsed = started.elapsed();
        let r = &plan.request;
        let numbers: Vec<i32> = plan.partitions.iter().map(|p| p.partition).collect();
        let (live_after, live_unread) =
            live_offsets_after(&self.broker, &r.live_group, &r.topic, &numbers);
        let partitions = plan
            .partitions
            .iter()
            .zip(live_after)
            .map(|(p, live_after)| {
                let (summary, outcome) = outcome(p);
                PartitionReport {
                    partition: p.partition,
                    summary,
                    stop: p.stop,
                    conflicts: 0,
                    outcome,
                    live_before: p.live_committed,
                    live_after,
                }
            })
            .collect();
        ReplayReport {
            plan_id: plan_id.to_owned(),
            live_group: r.live_group.clone(),
            partitions,
            elapsed,
            lanes,
            live_unread,
        }
    }

    /// For one of several workers of a plan: prepares the target and records the plan unless
    /// another worker recorded it first — then the recorded plan is adopted as it is (its
    /// ranges), or refused when it is another window of the same replay group.
    pub fn join(
        db: &AuditDb,
        timeouts: Timeouts,
        plan: &mut DayPlan,
        decision: Decision,
        view: &TargetView,
    ) -> Result<Decision, JoinError> {
        let store = |source| DatabaseError::new(db, source);
        let mut target = db.open_target(timeouts).map_err(store)?;
        target.prepare(&view.adoption).map_err(store)?;
        let Decision::New(ours) = &decision else {
            return Ok(decision);
        };
        match target.record_plan_once(ours).map_err(store)? {
            Recording::Recorded => Ok(decision),
            Recording::Present | Recording::OtherPlan { .. } => {
                let now = TargetView {
                    plans: target.plans().map_err(store)?,
                    ..view.clone()
                };
                Ok(Self::decide(plan, &now)?)
            }
        }
    }
}

impl Prepared<'_> {
    /// Prepares the target (creating `audit_events` only when absent, and the bookkeeping),
    /// records a new plan, brings the replay group's Kafka offsets up to the SQL checkpoints
    /// where they are behind, replays every partition with work left, then reads the live
    /// group's offsets again and reports.
    pub(super) fn execute(
        &self,
        started: Instant,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        let Prepared {
            job,
            plan,
            view,
            decision,
            ..
        } = self;
        let db = self.db;
        let store = |source| DatabaseError::new(db, source);
        let recorded = decision.plan();
        let owner = format!("{} pid {}", identity::who(), std::process::id());
        let mut target = db
            .open_target(Timeouts::replay(
                db,
                options.deadline.saturating_sub(options.since.elapsed()),
            ))
            .map_err(store)?;
        target.prepare(&view.adoption).map_err(store)?;
        if let Decision::New(plan) = decision {
            target.record_plan(plan).map_err(store)?;
        }
        target.claim(&recorded.plan_id, &owner).map_err(store)?;
        if let Decision::Resume { behind, .. } = decision {
            job.bring_up(plan, behind)?;
        }
        let to = self.write_target(&owner);
        let run = DayRun::new(job.broker.address(), plan, options, &to, progress);
        let lanes = run.lanes();
        let mut results = run.run();
        Ok(job.report(plan, &recorded.plan_id, started, lanes, |p| {
            let result = results
                .iter()
                .position(|r| r.partition == p.partition)
                .map(|i| results.swap_remove(i).result);
            match result {
                None => (
                    ReplaySummary::at(p.resume_from),
                    PartitionOutcome::CompleteBefore,
                ),
                Some(Ok(summary)) => (summary, PartitionOutcome::Replayed),
                Some(Err(e)) => (
                    ReplaySummary::at(e.committed().unwrap_or(p.resume_from)),
                    PartitionOutcome::Failed(e),
                ),
            }
        }))
    }

    /// Runs this process as one worker of the recorded plan (see [`ReplayJob::join`]): a
    /// member of the replay group replaying the partitions the group assigns it, until every
    /// partition of the plan reached its stop. The report shows what this worker replayed; the
    /// partitions the others replayed are marked so.
    pub(super) fn work(
        &self,
        started: Instant,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        let (job, plan, db) = (&self.job, &self.plan, self.db);
        let recorded = self.decision.plan();
        let owner = format!(
            "{}:{}:{:08x}",
            identity::who(),
            std::process::id(),
            rand::random::<u32>()
        );
        let r = &plan.request;
        let group = ReplayGroup::new(&r.replay_group, &r.live_group).map_err(PlanError::from)?;
        let to = self.write_target(&owner);
        let mut run = worker::work(&job.kafka, &group, plan, options, &to, progress).map_err(
            |e| match e {
                SetupError::Kafka(e) => ExecuteError::Kafka(e),
                SetupError::Store(source) => DatabaseError::new(db, source).into(),
                other => DatabaseError::new(db, StoreError::Unavailable(other.to_string())).into(),
            },
        )?;
        // A worker reads one partition at a time.
        Ok(job.report(plan, &recorded.plan_id, started, 1, |p| {
            let at = run.checkpoints.get(&p.partition).copied();
            let failed = run
                .failed
                .iter()
                .position(|(n, _)| *n == p.partition)
                .map(|i| run.failed.swap_remove(i).1);
            let mine = run.replayed.remove(&p.partition);
            let outcome = match (failed, &mine) {
                (Some(e), _) => PartitionOutcome::Failed(e),
                (None, Some(_)) => PartitionOutcome::Replayed,
                (None, None) if p.resume_from >= p.stop => PartitionOutcome::CompleteBefore,
                (None, None) => PartitionOutcome::ByOtherWorkers,
            };
            let mut summary = mine.unwrap_or_default();
            summary.final_offset = at.unwrap_or(summary.final_offset.max(p.resume_from));
            (summary, outcome)
        }))
    }

    /// Where this run writes, as `owner`.
    fn write_target<'a>(&'a self, owner: &'a str) -> WriteTarget<'a> {
        WriteTarget {
            db: self.db,
            adoption: &self.view.adoption,
            plan_id: &self.decision.plan().plan_id,
            owner,
        }
    }
}

/// The live group's committed offsets on `partitions` after the run, or, when they cannot be
/// read (the broker went away during the run), none and why: the run's report stands without
/// them rather than giving way to that one error.
fn live_offsets_after(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> (Vec<Option<i64>>, Option<String>) {
    match committed_offsets(broker, group, topic, partitions) {
        Ok(offsets) => (offsets, None),
        Err(e) => (vec![None; partitions.len()], Some(e.to_string())),
    }
}

/// Records the plan's `status` (when given) and reads the conflicts per partition into the
/// report, over a fresh connection: the run's own may have outlived the server (a restart
/// during the run). A failure of that fails a run that `succeeded`; otherwise it is a warning.
pub(super) fn close(
    db: &AuditDb,
    report: &mut ReplayReport,
    status: Option<PlanStatus>,
    succeeded: bool,
) -> Result<(), ExecuteError> {
    let closing = (|| -> Result<Vec<(i32, u64)>, StoreError> {
        let mut target = db.open_target(Timeouts::replay(db, Duration::from_secs(30)))?;
        if let Some(status) = status {
            target.finish(&report.plan_id, status)?;
        }
        target.conflicts_by_partition(&report.plan_id)
    })();
    match closing {
        Ok(conflicts) => {
            for (partition, n) in conflicts {
                if let Some(p) = report
                    .partitions
                    .iter_mut()
                    .find(|p| p.partition == partition)
                {
                    p.conflicts = n;
                }
            }
        }
        Err(source) if succeeded => return Err(DatabaseError::new(db, source).into()),
        Err(e) => tracing::warn!("{}: closing the run: {e}", name_of(db)),
    }
    Ok(())
}
