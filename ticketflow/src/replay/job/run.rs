//! Executing a prepared plan: [`Prepared::run`] executes it alone or as one worker of several,
//! then records the plan's status and reads the conflicts recorded for it into the report —
//! including how the live group moved meanwhile: it may keep consuming (forward is
//! information), but must not move back or lose its offsets.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::execute::{DayRun, ExecuteOptions, PartitionError, Progress, SetupError, WriteTarget};
use super::identity::{self, Behind, Decision, IdentityRefusal};
use super::outage::{Down, OutageNews, Outages, Outlasted, RetryBudget};
use super::prepare::{name_of, DatabaseError, Prepared, ReplayJob, TargetError};
use super::report::{PartitionOutcome, PartitionReport, ReplayReport};
use super::window::{DayPlan, PartitionPlan};
use super::worker;
use crate::kafka::{committed_offsets, Broker, KafkaError, KafkaReplayConsumer};
use crate::replay::partition::{PlanError, ReplayConsumer, ReplayGroup, ReplaySummary};
use crate::store::{AuditDb, PlanStatus, StoreError, Timeouts};

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
    /// Resuming after an outage, the target's record of the plan forbade going on.
    #[error("replay refused: {0}")]
    Refused(#[from] IdentityRefusal),
    /// A peer stayed away past the retry budget.
    #[error("{0}")]
    Outlasted(Outlasted),
}

impl ExecuteError {
    /// The peer that is away for a while, when that is why the run could not go on: the
    /// broker `kafka` or the database `db`.
    fn down(&self, kafka: &str, db: &AuditDb) -> Option<Down> {
        let (peer, reason) = match self {
            ExecuteError::Store(e) if e.source.is_outage() => {
                (db.to_string(), e.source.to_string())
            }
            ExecuteError::Kafka(e) if e.is_outage() => (format!("kafka {kafka}"), e.to_string()),
            _ => return None,
        };
        Some(Down {
            peer,
            phase: "execution",
            reason,
        })
    }
}

impl ReplayReport {
    /// The peer the run lost for a while, when the run ended short for that: a partition that
    /// lost it (others may have failed meanwhile for their own reasons, which a retry meets
    /// again), or, every partition done, a broker that did not answer the look at the live
    /// group. `None` once the deadline ended a partition.
    fn down(&self, kafka: &str, db: &AuditDb) -> Option<Down> {
        let failed = || {
            self.partitions.iter().filter_map(|p| match &p.outcome {
                PartitionOutcome::Failed(e) => Some(e),
                _ => None,
            })
        };
        if failed().any(PartitionError::is_deadline) {
            return None;
        }
        if let Some(down) = failed().find_map(|e| e.down(kafka, db)) {
            return Some(down);
        }
        let reason = self.live_unread.as_ref()?;
        self.every_partition_done().then(|| Down {
            peer: format!("kafka {kafka}"),
            phase: "execution",
            reason: reason.clone(),
        })
    }
}

/// The progress of a run that may be in an outage: a batch made durable ends it.
struct Watched<'a> {
    progress: &'a dyn Progress,
    budget: &'a RetryBudget,
}

impl Progress for Watched<'_> {
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary) {
        self.budget.back(&|news| self.progress.outage(news));
        self.progress.batch_done(partition, so_far);
    }

    fn outage(&self, news: &OutageNews<'_>) {
        self.progress.outage(news);
    }
}

/// What the earlier attempts of a run replayed, per partition, added to the last one's report.
#[derive(Default)]
struct Earlier(BTreeMap<i32, ReplaySummary>);

impl Earlier {
    fn absorb(&mut self, report: &ReplayReport) {
        for p in &report.partitions {
            if matches!(
                p.outcome,
                PartitionOutcome::Replayed | PartitionOutcome::Failed(_)
            ) {
                let e = self.0.entry(p.partition).or_default();
                e.counters += p.summary.counters;
                e.out_of_window += p.summary.out_of_window;
                e.late += p.summary.late;
            }
        }
    }

    /// Adds what the earlier attempts replayed into `report`: a partition they finished is
    /// replayed by this run, not complete before it.
    fn into_report(self, report: &mut ReplayReport) {
        for p in &mut report.partitions {
            let Some(e) = self.0.get(&p.partition) else {
                continue;
            };
            p.summary.counters += e.counters;
            p.summary.out_of_window += e.out_of_window;
            p.summary.late += e.late;
            if matches!(p.outcome, PartitionOutcome::CompleteBefore) {
                p.outcome = PartitionOutcome::Replayed;
            }
        }
    }
}

impl Prepared<'_> {
    /// Executes the plan: alone, or as one worker of the plan's replay group; then records the
    /// plan's status and reads the conflicts recorded for it into the report. A run that lost
    /// the broker or the database is begun again from the durable checkpoints, as `--resume`
    /// would, with backoff, until the peer is back or `options.retry_for` has passed since it
    /// went away.
    pub fn run(
        &mut self,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        let started = Instant::now();
        let budget = RetryBudget::new(options.retry_for);
        let watched = Watched {
            progress,
            budget: &budget,
        };
        let told = |news: &OutageNews<'_>| progress.outage(news);
        let retrying = if self.worker {
            "this worker's share of the plan"
        } else {
            "the partitions short of their stops"
        };
        let kafka = self.job.servers().to_owned();
        let mut earlier = Earlier::default();
        let mut resuming = false;
        let mut report = loop {
            let attempt = if resuming {
                self.rewind(options)
            } else {
                Ok(())
            }
            .and_then(|()| self.attempt(started, options, &watched));
            let down = match &attempt {
                Ok(report) => report.down(&kafka, self.db),
                Err(e) => e.down(&kafka, self.db),
            };
            let wait = down.and_then(|down| budget.failed(down, retrying, &told));
            let left = options.deadline.saturating_sub(options.since.elapsed());
            match (attempt, wait) {
                (Ok(report), Some(wait)) if !left.is_zero() => {
                    earlier.absorb(&report);
                    std::thread::sleep(wait.min(left));
                }
                (Err(_), Some(wait)) if !left.is_zero() => std::thread::sleep(wait.min(left)),
                (Ok(report), _) => break report,
                (Err(e), _) => {
                    return Err(match budget.outages().outlasted {
                        Some(outlasted) => ExecuteError::Outlasted(outlasted),
                        None => e,
                    })
                }
            }
            resuming = true;
        };
        earlier.into_report(&mut report);
        if report.every_partition_done() && report.live_unread.is_none() {
            budget.back(&told);
        }
        report.outages = budget.outages();
        let done = report.every_partition_done();
        // Alone, the run marks the plan complete or failed. Any worker that sees the plan done
        // marks it so; a failing one leaves it running for the others.
        let status = match (done, self.worker) {
            (true, _) => Some(PlanStatus::Complete),
            (false, false) => Some(PlanStatus::Failed),
            (false, true) => None,
        };
        close(self.db, &mut report, status, done)?;
        Ok(report)
    }

    /// One attempt at the plan: alone, or as one worker of the plan's replay group.
    fn attempt(
        &self,
        started: Instant,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        if self.worker {
            self.work(started, options, progress)
        } else {
            self.execute(started, options, progress)
        }
    }

    /// Before an attempt after an outage: the target looked at again and the plan decided
    /// from its record, as `--resume` does — each partition continues from its SQL
    /// checkpoint, and Kafka is brought up to it where it is behind. A worker claims its
    /// partitions from their checkpoints anyway.
    fn rewind(&mut self, options: ExecuteOptions) -> Result<(), ExecuteError> {
        if self.worker {
            return Ok(());
        }
        let left = options.deadline.saturating_sub(options.since.elapsed());
        let view =
            ReplayJob::inspect(self.db, Timeouts::replay(self.db, left)).map_err(|e| match e {
                TargetError::Store(e) => ExecuteError::Store(e),
            })?;
        self.plan.request.resume = true;
        self.decision = ReplayJob::decide(&mut self.plan, &view)?;
        self.view = view;
        Ok(())
    }
}

impl ReplayJob {
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
            outages: Outages::default(),
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
