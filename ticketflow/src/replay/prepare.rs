//! The replay as one call sequence a front end cannot get wrong: [`ReplayJob::prepare`] looks
//! at the target, reaches the broker, plans, decides from the target's record of the plan (a
//! worker looks again after planning and joins the plan), and [`Prepared::run`] executes it —
//! alone or as one worker of several. The report's verdict is
//! [`ReplayReport::verdict`](super::ReplayReport::verdict).

use std::time::{Duration, Instant};

use super::execute::{ExecuteOptions, Progress};
use super::identity::{Decision, IdentityRefusal, TargetView};
use super::job::{close, ConnectError, ExecuteError, JoinError, ReplayJob, TargetError};
use super::report::ReplayReport;
use super::window::{DayPlan, DayPlanError, DayReplayRequest};
use crate::kafka::KafkaTarget;
use crate::store::{AuditDb, PlanStatus, Timeouts};

/// How long every broker call of planning may take.
const BROKER_TIMEOUT: Duration = Duration::from_secs(10);

/// What a replay is asked to do, and where.
pub struct ReplayRequest<'a> {
    pub kafka: &'a KafkaTarget,
    pub db: &'a AuditDb,
    pub day: DayReplayRequest,
    /// One of several workers sharing the plan (`day.resume` is then implied).
    pub worker: bool,
    /// The wall-clock bound of the whole run, which also bounds the database's waits.
    pub deadline: Duration,
}

/// A plan, decided against the target: what [`run`](Self::run) executes.
pub struct Prepared<'a> {
    pub job: ReplayJob,
    pub plan: DayPlan,
    /// The target as found (its `audit_events`, how it is adopted, its recorded plans).
    pub view: TargetView,
    pub decision: Decision,
    pub(super) db: &'a AuditDb,
    worker: bool,
}

/// Why a replay could not be prepared; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The target could not be looked at, or must not be used; nothing was read.
    #[error("replay refused: {0}")]
    Target(#[from] TargetError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The window could not be planned, or must not be replayed.
    #[error(transparent)]
    Plan(#[from] DayPlanError),
    /// The target's record of the plan forbids this run.
    #[error("replay refused: {0}")]
    Identity(#[from] IdentityRefusal),
    /// A worker could not join the plan.
    #[error("{}", match .0 { JoinError::Refused(e) => format!("replay refused: {e}"), e => e.to_string() })]
    Join(#[from] JoinError),
}

impl ReplayJob {
    /// Looks at the target first (one that must not be written to stops the run before
    /// anything is read), reaches the broker, plans, and decides what this run does with the
    /// plan; a worker looks at the target again after planning (the plan and checkpoints other
    /// workers recorded meanwhile explain the replay group's offsets) and joins the plan.
    pub fn prepare(request: ReplayRequest<'_>) -> Result<Prepared<'_>, PrepareError> {
        let ReplayRequest {
            kafka,
            db,
            mut day,
            worker,
            deadline,
        } = request;
        // A worker joins the plan however far the others got.
        day.resume |= worker;
        let timeouts = Timeouts::replay(db, deadline);
        let view = ReplayJob::inspect(db, timeouts)?;
        let job = ReplayJob::connect(kafka, day, BROKER_TIMEOUT)?;
        let mut plan = job.plan()?;
        let view = if worker {
            ReplayJob::inspect(db, timeouts)?
        } else {
            view
        };
        let mut decision = ReplayJob::decide(&mut plan, &view)?;
        if worker && !matches!(decision, Decision::Complete(_)) {
            decision = ReplayJob::join(db, timeouts, &mut plan, decision, &view)?;
        }
        Ok(Prepared {
            job,
            plan,
            view,
            decision,
            db,
            worker,
        })
    }
}

impl Prepared<'_> {
    /// Whether the target records this plan as complete: nothing is left to run.
    pub fn is_complete(&self) -> bool {
        matches!(self.decision, Decision::Complete(_))
    }

    /// Executes the plan: alone, or as one worker of the plan's replay group; then records the
    /// plan's status and reads the conflicts recorded for it into the report.
    pub fn run(
        &self,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<ReplayReport, ExecuteError> {
        let started = Instant::now();
        let mut report = if self.worker {
            self.work(started, options, progress)
        } else {
            self.execute(started, options, progress)
        }?;
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
}
