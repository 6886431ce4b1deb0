//! Planning a replay: [`ReplayJob::prepare`] looks at the target, reaches the broker, plans,
//! and decides from the target's record of the plan (a worker looks again after planning and
//! joins the plan); the [`Prepared`] plan it hands back is what [`Prepared::run`] executes.

use std::time::Duration;

use super::identity::{self, Decision, IdentityRefusal, TargetView};
use super::window::{plan_day, DayPlan, DayPlanError, DayReplayRequest};
use crate::kafka::{Broker, KafkaError, KafkaTarget};
use crate::store::{AuditDb, Recording, StoreError, Timeouts};

/// A replay of one request on one broker: [`plan`](Self::plan), then execute that plan into a
/// database ([`Prepared::run`]).
pub struct ReplayJob {
    pub(super) kafka: KafkaTarget,
    pub(super) broker: Broker,
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
    pub(super) fn new(db: &AuditDb, source: StoreError) -> DatabaseError {
        DatabaseError {
            db: name_of(db),
            source,
        }
    }
}

/// How an error of the store names the database: PostgreSQL errors name their server.
pub(super) fn name_of(db: &AuditDb) -> String {
    match db {
        AuditDb::Sqlite(_) => db.to_string(),
        AuditDb::Postgres(_) => "PostgreSQL".to_owned(),
    }
}

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
    pub(super) worker: bool,
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
    /// Whether the target records this plan as complete: nothing is left to run.
    pub fn is_complete(&self) -> bool {
        matches!(self.decision, Decision::Complete(_))
    }
}
