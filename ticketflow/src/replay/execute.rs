//! Executing a day plan: each partition's remaining range through the bounded-replay primitive
//! (the next partition's reading begun while one's last batch is written), at most `jobs` at
//! once, each worker with its consumer, its store connection and the SQL transactions its
//! partitions' batches share; the audit store as the only effect. Every partition reports its
//! summary or its error with the last durable offset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::apply::{SharedTransaction, TargetWriter};
use super::pipeline::{self, ReadAhead, Start};
use super::window::DayPlan;
use super::ReplayConsumer as _;
use super::{ReplayError, ReplayErrorKind, ReplayLimits, ReplayOptions, ReplaySummary};
use crate::kafka::{Broker, KafkaError, KafkaReplayConsumer, KafkaTarget};
use crate::store::{Adoption, AuditDb, PlanScope, ReplayTarget, StoreError, Timeouts};

/// How long opening a connection to the audit database may take, unless the URL's
/// `connect_timeout` or the run's deadline says less.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The database's bounds when `remaining` of the run's deadline is left.
pub fn timeouts_within(remaining: Duration) -> Timeouts {
    Timeouts {
        connect: CONNECT_TIMEOUT.min(remaining),
        statement: remaining,
    }
}

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
    pub jobs: usize,
}

/// Told about each partition's progress as its batches become durable.
pub trait Progress: Sync {
    /// `partition` has written `so_far` with its checkpoint: durable, or in the transaction
    /// that makes it durable within `--batch` more records (Kafka hears it only then).
    fn batch_done(&self, partition: i32, so_far: &ReplaySummary);
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
            PartitionError::Setup { committed, .. } | PartitionError::Left { committed, .. } => {
                Some(*committed)
            }
        }
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
    let mut refused: Vec<(i32, super::ConsumerError)> = Vec::new();
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

/// A worker's connections, made for its first partition and reused for the next ones.
struct Worker {
    _broker: Broker,
    consumer: KafkaReplayConsumer,
    target: Box<dyn ReplayTarget>,
}

/// Runs every partition of `plan` with work left into the target; `progress` follows each batch.
pub(crate) fn execute_day(
    kafka: &KafkaTarget,
    plan: &DayPlan,
    options: ExecuteOptions,
    to: &WriteTarget<'_>,
    progress: &dyn Progress,
) -> Vec<PartitionResult> {
    let left = || options.deadline.saturating_sub(options.since.elapsed());
    let remaining = || left().max(Duration::from_millis(1));
    let work: Vec<_> = plan
        .partitions
        .iter()
        .filter(|p| p.remaining() > 0)
        .collect();
    let ranges: Vec<(i32, i64, i64)> = plan
        .partitions
        .iter()
        .map(|p| (p.partition, p.start, p.stop))
        .collect();
    // Writers keep what was prepared; they create nothing.
    let adoption = Adoption {
        create_audit_events: false,
        create_bookkeeping: Vec::new(),
        ..to.adoption.clone()
    };
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(work.len()));
    let workers = options.jobs.clamp(1, work.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                let mut worker: Option<Worker> = None;
                // Batches of this worker's partitions share transactions of `--batch` records;
                // a partition's result waits here until its last batch is committed.
                let mut shared =
                    SharedTransaction::new(options.replay.batch, options.replay.batch_bytes);
                let mut held: Vec<PartitionResult> = Vec::new();
                // The partition claimed next, with its reading begun when the one before ended.
                let mut upcoming: Option<(usize, Option<ReadAhead>)> = None;
                loop {
                    let (i, ahead) = upcoming
                        .take()
                        .unwrap_or_else(|| (next.fetch_add(1, Ordering::SeqCst), None));
                    let Some(p) = work.get(i) else { break };
                    // Past the deadline a partition is not started, and a failure to start it
                    // is the deadline's doing: either way it is reported as the deadline.
                    let deadline = || {
                        PartitionError::Replay(ReplayError {
                            topic: plan.request.topic.clone(),
                            partition: p.partition,
                            committed: Some(p.resume_from),
                            kind: ReplayErrorKind::Deadline {
                                deadline: options.deadline,
                                stop: p.stop,
                            },
                        })
                    };
                    let setup = |cause: SetupError| {
                        if left().is_zero() {
                            deadline()
                        } else {
                            PartitionError::Setup {
                                cause,
                                committed: p.resume_from,
                            }
                        }
                    };
                    let result = (|| {
                        if left().is_zero() {
                            return Err(deadline());
                        }
                        let bounded = plan.bounded(p).ok_or_else(|| {
                            setup(SetupError::InvalidRange {
                                start: p.resume_from,
                                stop: p.stop,
                            })
                        })?;
                        let w = match worker.take() {
                            Some(w) => worker.insert(w),
                            None => {
                                let made = (|| -> Result<Worker, SetupError> {
                                    let broker = Broker::for_target(
                                        kafka,
                                        remaining().max(Duration::from_secs(1)),
                                    )?;
                                    let consumer =
                                        KafkaReplayConsumer::new(&broker, &bounded.group())?;
                                    let mut target =
                                        to.db.open_target(timeouts_within(remaining()))?;
                                    target.prepare(&adoption)?;
                                    target.share_with(workers)?;
                                    Ok(Worker {
                                        _broker: broker,
                                        consumer,
                                        target,
                                    })
                                })()
                                .map_err(setup)?;
                                worker.insert(made)
                            }
                        };
                        // A partition's limits, taken when its reading begins.
                        let limits = || ReplayLimits {
                            deadline: remaining(),
                            idle_timeout: options.idle_timeout,
                        };
                        // The partition's own limit is what was left of the run's deadline:
                        // running out of it is the run's deadline, and is named as such.
                        let as_run_deadline = |mut e: ReplayError| {
                            if let ReplayErrorKind::Deadline { deadline, .. } = &mut e.kind {
                                *deadline = options.deadline;
                            }
                            e
                        };
                        shared.starts(p.partition, p.resume_from);
                        let mut writer = TargetWriter {
                            shared: Some(&mut shared),
                            target: w.target.as_mut(),
                            scope: PlanScope {
                                plan_id: to.plan_id,
                                topic: &plan.request.topic,
                                ranges: &ranges,
                                owner: Some(to.owner),
                                fail_on_refused: options.replay.bad_records
                                    == super::BadRecords::Fail,
                            },
                        };
                        // The partition after this one is claimed now: its reading begins while
                        // this one's last batch is written.
                        let j = next.fetch_add(1, Ordering::SeqCst);
                        upcoming = Some((j, None));
                        let then = work.get(j).and_then(|q| plan.bounded(q));
                        let start = match ahead {
                            Some(ahead) => Start::Ahead(Box::new(ahead)),
                            None => Start::Open(limits()),
                        };
                        let (result, carried) = pipeline::run(
                            &bounded,
                            start,
                            then.as_ref()
                                .map(|b| (b, &limits as &dyn Fn() -> ReplayLimits)),
                            options.replay,
                            &mut w.consumer,
                            &mut writer,
                            &mut |s| progress.batch_done(p.partition, s),
                        );
                        if carried.is_some() {
                            upcoming = Some((j, carried));
                        }
                        Ok(result.map_err(as_run_deadline)?)
                    })();
                    held.push(PartitionResult {
                        partition: p.partition,
                        result,
                    });
                    // After an error the connections may be broken: what the transaction holds
                    // is committed (the batches before the failure stand), and the next
                    // partition makes new connections.
                    if held.last().is_some_and(|r| r.result.is_err()) {
                        settle(&mut shared, worker.take(), &plan.request.topic, &mut held);
                    }
                    let (done, waiting) = held.drain(..).partition(|r| !shared.holds(r.partition));
                    held = waiting;
                    if let Ok(mut results) = results.lock() {
                        results.extend(done);
                    }
                }
                settle(&mut shared, worker.take(), &plan.request.topic, &mut held);
                if let Ok(mut results) = results.lock() {
                    results.extend(held);
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.partition);
    results
}
