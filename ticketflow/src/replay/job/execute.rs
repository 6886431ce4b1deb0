//! Executing a day plan: each partition's remaining range through the bounded-replay primitive
//! (the next partition's reading begun while one's last batch is written), at most `jobs` at
//! once, each worker with its consumer, its store connection and the SQL transactions its
//! partitions' batches share; the audit store as the only effect. Every partition reports its
//! summary or its error with the last durable offset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::outage::{Down, OutageNews};
use super::window::{DayPlan, PartitionPlan};
use crate::kafka::{Broker, BrokerAddress, ConsumerError, KafkaError, KafkaReplayConsumer};
use crate::replay::partition::apply::{SharedTransaction, TargetWriter};
use crate::replay::partition::pipeline::{self, ReadAhead, Start};
use crate::replay::partition::ReplayConsumer as _;
use crate::replay::partition::{
    BadRecords, ReplayError, ReplayErrorKind, ReplayGroup, ReplayLimits, ReplayOptions,
    ReplaySummary,
};
use crate::store::{Adoption, AuditDb, PlanScope, ReplayTarget, StoreError, Timeouts, WriteError};

/// Where and as whom the partitions are written.
pub(crate) struct WriteTarget<'a> {
    pub db: &'a AuditDb,
    /// How the target's `audit_events` is written (found and prepared before the run).
    pub adoption: &'a Adoption,
    pub plan_id: &'a str,
    pub owner: &'a str,
}

#[derive(Debug, Clone, Copy)]
pub struct ExecuteOptions {
    pub replay: ReplayOptions,
    /// Wall-clock bound of the whole run, counted from `since`; messages name it as given.
    pub deadline: Duration,
    /// When the run began (planning included).
    pub since: Instant,
    pub idle_timeout: Duration,
    /// How long a run waits for a peer gone away (the broker or the database) to come back,
    /// from the outage's first failure, retrying from the durable checkpoints; zero retries
    /// nothing.
    pub retry_for: Duration,
    /// Lanes (partitions replayed at once); `None`: as [`default_lanes`] decides for the
    /// target.
    pub jobs: Option<usize>,
}

/// Lanes a replay uses when none are asked for. PostgreSQL: as many as the machine has cores,
/// at least 2 and at most 4 — one lane's backend waits for the client while it reads and
/// decodes (one lane reached 0.70–0.73 of binary COPY on 2 cores, two lanes 0.87–0.91), and
/// past four the client's own cores are the limit. SQLite: 1 — its writers take one file
/// lock in turn, and a second lane measured no faster. Never more than the partitions with
/// work left ([`DayRun`] caps it).
pub fn default_lanes(db: &AuditDb) -> usize {
    match db {
        AuditDb::Sqlite(_) => 1,
        AuditDb::Postgres(_) => std::thread::available_parallelism()
            .map_or(2, usize::from)
            .clamp(2, 4),
    }
}

/// Records per SQL transaction when `--batch` is not given, at the least, and payload bytes
/// per transaction when `--batch-bytes` is not given, per `DEFAULT_BATCH` records.
pub const DEFAULT_BATCH: usize = 100_000;
pub const DEFAULT_BATCH_BYTES: usize = 64 << 20;

/// The most records per SQL transaction a default makes (`--batch`'s own bound).
const MAX_DEFAULT_BATCH: usize = 1_000_000;

/// Records and payload bytes per SQL transaction, each as asked (`--batch`, `--batch-bytes`)
/// or, when not, as the target and the plan's `records` decide. PostgreSQL: 100,000 records
/// and 64 MiB. SQLite: a fifth of the plan's records, at least 100,000 and at most 1,000,000,
/// and 64 MiB of payload per 100,000 of them. Rows in partition order land all over the
/// event_id index, so each commit writes nearly the whole index to the WAL: a transaction that
/// grows with the index keeps the WAL written per record flat as the day grows (3M records in
/// 100,000-record transactions: 0.43 page writes a record against 0.21 at 1M; with this default
/// 0.17 against 0.15). A plan's records, not what is left of them: a resumed plan commits as
/// its first run did. Rows the table held before are not counted (their part of the index is
/// written too: a target holding many days writes more of it per record).
pub fn transaction_size(
    db: &AuditDb,
    records: i64,
    asked: (Option<usize>, Option<usize>),
) -> (usize, usize) {
    let default = match db {
        AuditDb::Sqlite(_) => usize::try_from(records / 5)
            .unwrap_or(0)
            .clamp(DEFAULT_BATCH, MAX_DEFAULT_BATCH),
        AuditDb::Postgres(_) => DEFAULT_BATCH,
    };
    let batch = asked.0.unwrap_or(default);
    let bytes = asked.1.unwrap_or_else(|| match asked.0 {
        Some(_) => DEFAULT_BATCH_BYTES,
        // 64 MiB per 100,000 records: at most 640 MiB.
        None => (DEFAULT_BATCH_BYTES as u64 * default as u64 / DEFAULT_BATCH as u64) as usize,
    });
    (batch, bytes)
}

/// Told about each partition's progress as its batches become durable.
pub trait Progress: Sync {
    /// `partition` has written `so_far` with its checkpoint: durable, or in the transaction
    /// that makes it durable within `--batch` more records (Kafka hears it only then).
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary);

    /// An outage began or ended (one line each for the operator); by default nothing is said.
    fn outage(&self, _news: &OutageNews<'_>) {}
}

impl<F: Fn(i32, &ReplaySummary) + Sync> Progress for F {
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary) {
        self(partition, so_far)
    }
}

/// One partition's result.
#[derive(Debug)]
pub(crate) struct PartitionResult {
    pub partition: i32,
    pub result: Result<ReplaySummary, PartitionError>,
}

/// Why a partition's replay did not complete.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// Its worker could not be set up; nothing of it was read.
    #[error("{cause} (committed {committed})")]
    Setup { cause: SetupError, committed: i64 },
    /// Not at its stop when its worker stopped on partition `after`'s failure (with
    /// `--worker`): the plan's other workers, or a rerun, take it up.
    #[error("left at {committed} when this worker stopped on partition {after}'s failure; the plan's other workers or --resume take it up")]
    Left { after: i32, committed: i64 },
    /// Not started because partition `after` lost the broker or the database: every other
    /// partition would have waited for the same peer in turn.
    #[error("left at {committed}, not started: partition {after} lost its link to the broker or the database; --resume takes it up")]
    NotStarted { after: i32, committed: i64 },
}

/// What kept a worker from starting on a partition.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the plan's range [{start}, {stop}) is not a valid replay")]
    InvalidRange { start: i64, stop: i64 },
}

impl PartitionError {
    /// The replay group's last durable offset on this partition, when it is known.
    pub fn committed(&self) -> Option<i64> {
        match self {
            PartitionError::Replay(e) => e.committed,
            PartitionError::Setup { committed, .. }
            | PartitionError::Left { committed, .. }
            | PartitionError::NotStarted { committed, .. } => Some(*committed),
        }
    }

    /// Whether the partition failed because a peer was lost — the broker or the database did
    /// not answer, or its connection broke — rather than on what a record held or a refusal
    /// said. The run then starts no other partition.
    pub(crate) fn lost_a_peer(&self) -> bool {
        match self {
            PartitionError::Replay(e) => match &e.kind {
                ReplayErrorKind::Consumer(ConsumerError::Kafka(_)) => true,
                ReplayErrorKind::Effect { source, .. } => source.lost_the_link(),
                ReplayErrorKind::Checkpoint(WriteError::Store(source)) => source.lost_the_link(),
                _ => false,
            },
            PartitionError::Setup { cause, .. } => match cause {
                SetupError::Kafka(_) => true,
                SetupError::Store(source) => source.lost_the_link(),
                SetupError::InvalidRange { .. } => false,
            },
            PartitionError::Left { .. } | PartitionError::NotStarted { .. } => false,
        }
    }

    /// The peer this partition lost for a while, when that is why it failed: the broker
    /// (`kafka`, as it is named) away or silent past the idle timeout, or the database `db`
    /// away. `None` for what a record held, a refusal, the deadline, and a partition that
    /// stopped for another's failure.
    pub(crate) fn down(&self, kafka: &str, db: &AuditDb) -> Option<Down> {
        let broker = |reason: String| Down {
            peer: format!("kafka {kafka}"),
            phase: "execution",
            reason,
        };
        let database = |e: &StoreError| {
            e.is_outage().then(|| Down {
                peer: db.to_string(),
                phase: "execution",
                reason: e.to_string(),
            })
        };
        match self {
            PartitionError::Replay(e) => match &e.kind {
                ReplayErrorKind::Consumer(c) if c.is_outage() => Some(broker(c.to_string())),
                ReplayErrorKind::Idle { .. } => Some(broker(e.kind.to_string())),
                ReplayErrorKind::Effect { source, .. } => database(source),
                ReplayErrorKind::Checkpoint(WriteError::Store(source)) => database(source),
                _ => None,
            },
            PartitionError::Setup { cause, .. } => match cause {
                SetupError::Kafka(k) if k.is_outage() => Some(broker(k.to_string())),
                SetupError::Store(source) => database(source),
                _ => None,
            },
            PartitionError::Left { .. } | PartitionError::NotStarted { .. } => None,
        }
    }

    /// Whether the run's deadline ended it: then nothing is retried.
    pub(crate) fn is_deadline(&self) -> bool {
        matches!(
            self,
            PartitionError::Replay(ReplayError {
                kind: ReplayErrorKind::Deadline { .. },
                ..
            })
        )
    }
}

/// Commits what `shared` holds through the worker's connections, then each partition's
/// checkpoint to Kafka; a partition in `results` whose batches did not become durable (the
/// worker is gone, or the commit failed) or whose offset Kafka refused fails, with its last
/// durable offset.
fn settle(
    shared: &mut SharedTransaction,
    worker: Option<Worker>,
    topic: &str,
    results: &mut [PartitionResult],
) {
    let mut refused: Vec<(i32, crate::replay::partition::ConsumerError)> = Vec::new();
    let lost: Option<String> = match worker {
        Some(mut w) => match shared.commit(w.target.as_mut()) {
            Ok(durable) => {
                for (partition, offset) in durable {
                    if let Err(e) = w.consumer.commit(topic, partition, offset) {
                        refused.push((partition, e));
                    }
                }
                None
            }
            Err(e) => Some(e.to_string()),
        },
        // The connections went with the transaction open: its batches were rolled back.
        None => shared
            .abandon()
            .then(|| "the connection was lost with the transaction open".to_owned()),
    };
    for r in results.iter_mut() {
        let Some(durable) = shared.durable(r.partition) else {
            continue;
        };
        let refusal = refused
            .iter()
            .position(|(p, _)| *p == r.partition)
            .map(|i| refused.swap_remove(i).1);
        let kind =
            match (&mut r.result, refusal) {
                (Err(PartitionError::Replay(e)), _) => {
                    if e.committed.is_some_and(|c| c > durable) {
                        e.committed = Some(durable);
                    }
                    continue;
                }
                (Err(_), _) => continue,
                // Durable in SQL; Kafka stays behind it, never ahead.
                (Ok(_), Some(e)) => ReplayErrorKind::Consumer(e),
                (Ok(summary), None) if summary.final_offset > durable => ReplayErrorKind::Effect {
                    offset: durable,
                    source: StoreError::Unavailable(format!(
                    "the transaction holding its batches after offset {durable} did not commit: {}",
                    lost.as_deref().or(shared.failure()).unwrap_or("rolled back")
                )),
                },
                (Ok(_), None) => continue,
            };
        r.result = Err(PartitionError::Replay(ReplayError {
            topic: topic.to_owned(),
            partition: r.partition,
            committed: Some(durable),
            kind,
        }));
    }
}

/// A lane's connections, made for its first partition and reused for the next ones.
struct Worker {
    _broker: Broker,
    consumer: KafkaReplayConsumer,
    target: Box<dyn ReplayTarget>,
}

/// The partition a lane takes next, with its reading begun when the one before ended.
type Upcoming = Option<(usize, Option<ReadAhead>)>;

/// Every partition of a plan with work left, replayed into the target by at most `jobs`
/// lanes (threads), each taking the next partition not yet taken; `progress` follows each
/// batch.
pub(crate) struct DayRun<'a> {
    /// The broker, its lookup and group clients shared by every lane.
    kafka: BrokerAddress,
    plan: &'a DayPlan,
    options: ExecuteOptions,
    to: &'a WriteTarget<'a>,
    progress: &'a dyn Progress,
    /// The partitions with work left, taken in this order.
    work: Vec<&'a PartitionPlan>,
    /// Every partition's range, for the bookkeeping's checks.
    ranges: Vec<(i32, i64, i64)>,
    /// How writers write: what was prepared; they create nothing.
    adoption: Adoption,
    /// The index in `work` taken next.
    next: AtomicUsize,
    /// The first partition that lost the broker or the database: no partition starts after it,
    /// so a silent peer costs the run one wait per lane, not one per partition.
    lost: OnceLock<i32>,
    lanes: usize,
}

impl<'a> DayRun<'a> {
    pub(crate) fn new(
        kafka: BrokerAddress,
        plan: &'a DayPlan,
        options: ExecuteOptions,
        to: &'a WriteTarget<'a>,
        progress: &'a dyn Progress,
    ) -> Self {
        let work: Vec<_> = plan
            .partitions
            .iter()
            .filter(|p| p.remaining() > 0)
            .collect();
        DayRun {
            kafka,
            plan,
            options,
            to,
            progress,
            ranges: plan
                .partitions
                .iter()
                .map(|p| (p.partition, p.start, p.stop))
                .collect(),
            adoption: Adoption {
                create_audit_events: false,
                create_bookkeeping: Vec::new(),
                ..to.adoption.clone()
            },
            next: AtomicUsize::new(0),
            lost: OnceLock::new(),
            lanes: options
                .jobs
                .unwrap_or_else(|| default_lanes(to.db))
                .clamp(1, work.len().max(1)),
            work,
        }
    }

    /// The lanes this run uses.
    pub(crate) fn lanes(&self) -> usize {
        self.lanes
    }

    /// Runs every lane to the end; each partition's result, by partition.
    pub(crate) fn run(self) -> Vec<PartitionResult> {
        let results = Mutex::new(Vec::with_capacity(self.work.len()));
        std::thread::scope(|scope| {
            for _ in 0..self.lanes {
                scope.spawn(|| self.lane(&results));
            }
        });
        let mut results = results.into_inner().unwrap_or_default();
        results.sort_by_key(|r| r.partition);
        results
    }

    /// What is left of the run's deadline.
    fn left(&self) -> Duration {
        self.options
            .deadline
            .saturating_sub(self.options.since.elapsed())
    }

    /// What is left of the run's deadline, as a limit (never zero).
    fn remaining(&self) -> Duration {
        self.left().max(Duration::from_millis(1))
    }

    /// One lane: partitions taken one after the other over the same connections, their
    /// batches sharing transactions of `--batch` records; a partition's result waits until its
    /// last batch is committed.
    fn lane(&self, results: &Mutex<Vec<PartitionResult>>) {
        let mut worker: Option<Worker> = None;
        let replay = self.options.replay;
        let mut shared = SharedTransaction::new(replay.batch, replay.batch_bytes);
        let mut held: Vec<PartitionResult> = Vec::new();
        let mut upcoming: Upcoming = None;
        let topic = &self.plan.request.topic;
        loop {
            let (i, ahead) = upcoming
                .take()
                .unwrap_or_else(|| (self.next.fetch_add(1, Ordering::SeqCst), None));
            let Some(p) = self.work.get(i) else { break };
            let result = match self.lost.get() {
                Some(&after) => Err(PartitionError::NotStarted {
                    after,
                    committed: p.resume_from,
                }),
                None => self.partition(p, ahead, &mut worker, &mut shared, &mut upcoming),
            };
            if result.as_ref().is_err_and(PartitionError::lost_a_peer) {
                let _ = self.lost.set(p.partition);
            }
            held.push(PartitionResult {
                partition: p.partition,
                result,
            });
            // After an error the connections may be broken: what the transaction holds is
            // committed (the batches before the failure stand), and the next partition makes
            // new connections.
            if held.last().is_some_and(|r| r.result.is_err()) {
                settle(&mut shared, worker.take(), topic, &mut held);
            }
            let (done, waiting) = held.drain(..).partition(|r| !shared.holds(r.partition));
            held = waiting;
            if let Ok(mut results) = results.lock() {
                results.extend(done);
            }
        }
        settle(&mut shared, worker.take(), topic, &mut held);
        if let Ok(mut results) = results.lock() {
            results.extend(held);
        }
    }

    /// Past the deadline a partition is not started, and a failure to start it is the
    /// deadline's doing: either way it is reported as the deadline.
    fn deadline(&self, p: &PartitionPlan) -> PartitionError {
        PartitionError::Replay(ReplayError {
            topic: self.plan.request.topic.clone(),
            partition: p.partition,
            committed: Some(p.resume_from),
            kind: ReplayErrorKind::Deadline {
                deadline: self.options.deadline,
                stop: p.stop,
            },
        })
    }

    fn setup_failed(&self, p: &PartitionPlan, cause: SetupError) -> PartitionError {
        if self.left().is_zero() {
            self.deadline(p)
        } else {
            PartitionError::Setup {
                cause,
                committed: p.resume_from,
            }
        }
    }

    /// A lane's connections, made for its first partition and reused for the next ones: its
    /// own fetching consumer and database connection; the lookup client and the replay
    /// group's client are the run's.
    fn connect(&self, group: &ReplayGroup) -> Result<Worker, SetupError> {
        let broker = self
            .kafka
            .broker(self.remaining().max(Duration::from_secs(1)));
        let consumer = KafkaReplayConsumer::new(&broker, group)?;
        let mut target = self
            .to
            .db
            .open_target(Timeouts::replay(self.to.db, self.remaining()))?;
        target.prepare(&self.adoption)?;
        target.share_with(self.lanes)?;
        Ok(Worker {
            _broker: broker,
            consumer,
            target,
        })
    }

    /// Replays partition `p` (its reading begun already when `ahead`), and claims the one after
    /// it into `upcoming`, whose reading begins while this one's last batch is written.
    fn partition(
        &self,
        p: &PartitionPlan,
        ahead: Option<ReadAhead>,
        worker: &mut Option<Worker>,
        shared: &mut SharedTransaction,
        upcoming: &mut Upcoming,
    ) -> Result<ReplaySummary, PartitionError> {
        if self.left().is_zero() {
            return Err(self.deadline(p));
        }
        let bounded = self.plan.bounded(p).ok_or_else(|| {
            self.setup_failed(
                p,
                SetupError::InvalidRange {
                    start: p.resume_from,
                    stop: p.stop,
                },
            )
        })?;
        let w = match worker.take() {
            Some(w) => worker.insert(w),
            None => worker.insert(
                self.connect(&bounded.group())
                    .map_err(|e| self.setup_failed(p, e))?,
            ),
        };
        // A partition's limits, taken when its reading begins.
        let limits = || ReplayLimits {
            deadline: self.remaining(),
            idle_timeout: self.options.idle_timeout,
        };
        shared.starts(p.partition, p.resume_from);
        let mut writer = TargetWriter {
            shared: Some(shared),
            target: w.target.as_mut(),
            scope: PlanScope {
                plan_id: self.to.plan_id,
                topic: &self.plan.request.topic,
                ranges: &self.ranges,
                owner: Some(self.to.owner),
                fail_on_refused: self.options.replay.bad_records == BadRecords::Fail,
            },
        };
        let j = self.next.fetch_add(1, Ordering::SeqCst);
        *upcoming = Some((j, None));
        let then = self.work.get(j).and_then(|q| self.plan.bounded(q));
        let start = match ahead {
            Some(ahead) => Start::Ahead(Box::new(ahead)),
            None => Start::Open(limits()),
        };
        let (result, carried) = pipeline::run(
            &bounded,
            start,
            then.as_ref()
                .map(|b| (b, &limits as &dyn Fn() -> ReplayLimits)),
            self.options.replay,
            &mut w.consumer,
            &mut writer,
            &mut |s| self.progress.batch_done(p.partition, s),
        );
        if carried.is_some() {
            *upcoming = Some((j, carried));
        }
        // The partition's own limit is what was left of the run's deadline: running out of it
        // is the run's deadline, and is named as such.
        result.map_err(|mut e| {
            if let ReplayErrorKind::Deadline { deadline, .. } = &mut e.kind {
                *deadline = self.options.deadline;
            }
            PartitionError::Replay(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn an_sqlite_transaction_grows_with_the_plan_within_its_bounds() {
        let sqlite = AuditDb::Sqlite("audit.db".into());
        let size = |records| transaction_size(&sqlite, records, (None, None));
        // Up to 500,000 records: the floor, 100,000 records and 64 MiB, as before.
        assert_eq!(size(0), (100_000, 64 * MIB));
        assert_eq!(size(500_000), (100_000, 64 * MIB));
        // A day of 1M records: 200,000; of 3M: 600,000 and 64 MiB per 100,000 of them.
        assert_eq!(size(1_000_000), (200_000, 128 * MIB));
        assert_eq!(size(3_000_000), (600_000, 384 * MIB));
        // At most 1,000,000 records (and 640 MiB), however large the day.
        assert_eq!(size(50_000_000), (1_000_000, 640 * MIB));
        assert_eq!(size(i64::MAX), (1_000_000, 640 * MIB));
        assert_eq!(size(-1), (100_000, 64 * MIB));
    }

    #[test]
    fn postgres_keeps_its_default_and_what_is_asked_wins() {
        let pg = AuditDb::Postgres("postgres://localhost/audit".into());
        let sqlite = AuditDb::Sqlite("audit.db".into());
        assert_eq!(
            transaction_size(&pg, 3_000_000, (None, None)),
            (100_000, 64 * MIB)
        );
        // --batch alone: the bytes stay at their 64 MiB.
        assert_eq!(
            transaction_size(&sqlite, 3_000_000, (Some(20), None)),
            (20, 64 * MIB)
        );
        // --batch-bytes alone: the records as the plan decides.
        assert_eq!(
            transaction_size(&sqlite, 3_000_000, (None, Some(MIB))),
            (600_000, MIB)
        );
        assert_eq!(transaction_size(&pg, 1, (Some(7), Some(9))), (7, 9));
    }
}
