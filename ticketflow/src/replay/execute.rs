//! Executing a day plan: each partition's remaining range through the bounded-replay primitive
//! with its own consumer and store connection, at most `jobs` at once, the audit store as the
//! only effect. Every partition reports its summary or its error with the last durable offset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::window::DayPlan;
use super::{run_bounded_replay_with, ReplayError, ReplayLimits, ReplayOptions, ReplaySummary};
use crate::kafka::KafkaTarget;
use crate::kafka::{Broker, KafkaReplayConsumer};
use crate::store::{AuditStore, StoreError};

#[derive(Debug, Clone, Copy)]
pub struct ExecuteOptions {
    pub replay: ReplayOptions,
    /// Wall-clock bound of the whole run.
    pub deadline: Duration,
    pub idle_timeout: Duration,
    pub jobs: usize,
}

/// One partition's result.
#[derive(Debug)]
pub struct PartitionResult {
    pub partition: i32,
    pub result: Result<ReplaySummary, PartitionError>,
}

#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error("{reason} (committed {committed})")]
    Setup { reason: String, committed: i64 },
}

impl PartitionError {
    /// The replay group's last durable offset on this partition.
    pub fn committed(&self) -> Option<i64> {
        match self {
            PartitionError::Replay(e) => e.committed(),
            PartitionError::Setup { committed, .. } => Some(*committed),
        }
    }
}

/// Opens a store connection for one worker.
pub type StoreOpener<'a> = dyn Fn() -> Result<Box<dyn AuditStore>, StoreError> + Sync + 'a;

/// Runs every partition with work left. `progress(partition, summary)` follows each batch.
pub fn execute_day(
    kafka: &KafkaTarget,
    plan: &DayPlan,
    options: ExecuteOptions,
    open_store: &StoreOpener<'_>,
    progress: &(dyn Fn(i32, &ReplaySummary) + Sync),
) -> Vec<PartitionResult> {
    let started = Instant::now();
    let work: Vec<_> = plan
        .partitions
        .iter()
        .filter(|p| p.remaining() > 0)
        .collect();
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(work.len()));
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.clamp(1, work.len().max(1)) {
            scope.spawn(|| {
                // One broker connection, consumer and store per worker, reused across partitions.
                let mut worker: Option<(Broker, KafkaReplayConsumer, Box<dyn AuditStore>)> = None;
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(p) = work.get(i) else { break };
                    let setup = |reason: String| PartitionError::Setup {
                        reason,
                        committed: p.resume_from,
                    };
                    let result = (|| {
                        let bounded = plan
                            .bounded(p)
                            .ok_or_else(|| setup("invalid range".into()))?;
                        if worker.is_none() {
                            let remaining = options
                                .deadline
                                .saturating_sub(started.elapsed())
                                .max(Duration::from_millis(1));
                            let broker = Broker::for_target(kafka, remaining)
                                .map_err(|e| setup(e.to_string()))?;
                            let consumer =
                                KafkaReplayConsumer::new(&broker, &plan.request.replay_group)
                                    .map_err(|e| setup(e.to_string()))?;
                            let store = open_store().map_err(|e| setup(e.to_string()))?;
                            worker = Some((broker, consumer, store));
                        }
                        let Some((_, consumer, store)) = worker.as_mut() else {
                            return Err(setup("no worker".into()));
                        };
                        let limits = ReplayLimits {
                            deadline: options
                                .deadline
                                .saturating_sub(started.elapsed())
                                .max(Duration::from_millis(1)),
                            idle_timeout: options.idle_timeout,
                        };
                        let summary = run_bounded_replay_with(
                            &bounded,
                            limits,
                            options.replay,
                            consumer,
                            store.as_mut(),
                            &mut |s| progress(p.partition, s),
                        )?;
                        Ok(summary)
                    })();
                    // After an error the connections may be broken: the next partition makes new ones.
                    if result.is_err() {
                        worker = None;
                    }
                    if let Ok(mut results) = results.lock() {
                        results.push(PartitionResult {
                            partition: p.partition,
                            result,
                        });
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|r| r.partition);
    results
}
