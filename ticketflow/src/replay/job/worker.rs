//! One of several workers on a recorded plan: a member of the replay group replays the plan's
//! partitions the group assigns it, each claimed in SQL and read from its SQL checkpoint, hands
//! them back when the group takes them away, and ends once every partition reached its stop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::execute::{ExecuteOptions, PartitionError, Progress, SetupError, WriteTarget};
use super::window::{DayPlan, DayReplayRequest, PartitionPlan};
use crate::kafka::{Broker, GroupEvent, GroupMember, KafkaError, KafkaReplayConsumer, KafkaTarget};
use crate::replay::partition::apply::{apply_batch, TargetWriter};
use crate::replay::partition::read::Reader;
use crate::replay::partition::{
    BadRecords, PartitionRequest, ReplayError, ReplayErrorKind, ReplayGroup, ReplayLimits,
    ReplayPlan, ReplaySummary,
};
use crate::store::{
    Adoption, Claim, PartitionClaim, PlanScope, ReplayTarget, StoreError, Timeouts, WriteError,
};

/// How long a worker with nothing of its own to do waits on the group between looks at the
/// plan's progress in SQL.
const IDLE_POLL: Duration = Duration::from_millis(100);
const PROGRESS_CHECK: Duration = Duration::from_millis(500);
/// How long a worker with nothing of its own to do goes on while the broker does not answer
/// its looks at the group's offsets: past it, the worker ends (the plan's other workers, or a
/// rerun, take its share), so a silent broker ends a worker in seconds rather than at the
/// deadline.
const BROKER_SILENCE: Duration = Duration::from_secs(30);

/// What one worker did: per partition it replayed batches of, their summary; the partitions
/// that failed under it (the others' work is theirs to report); and every partition's SQL
/// checkpoint when it ended.
#[derive(Debug, Default)]
pub(crate) struct WorkerRun {
    pub replayed: BTreeMap<i32, ReplaySummary>,
    pub failed: Vec<(i32, PartitionError)>,
    pub checkpoints: BTreeMap<i32, i64>,
}

/// How a worker's turn on one partition ended without an error.
enum Turn {
    /// The partition reached its stop.
    Done,
    /// The group took it away between two batches.
    Revoked,
    /// Another worker claimed it in SQL: this one's checkpoint was refused.
    Lost,
}

/// This worker's partitions and what it knows of the plan.
struct Share<'a> {
    plan: &'a DayPlan,
    to: &'a WriteTarget<'a>,
    /// Partitions the group gave this worker and SQL let it claim, with the claim's checkpoint.
    owned: BTreeMap<i32, Claim>,
    /// `(partition, start, stop)` of every partition of the plan, for the writer.
    ranges: Vec<(i32, i64, i64)>,
    /// Group errors already reported (each once).
    said: BTreeSet<String>,
}

impl Share<'_> {
    fn in_plan(&self, partition: i32) -> bool {
        self.plan
            .partitions
            .iter()
            .any(|p| p.partition == partition)
    }

    /// Claims what the group assigned (and brings the group's offset up to the SQL
    /// checkpoint), releases what it took away.
    fn serve(
        &mut self,
        events: Vec<GroupEvent>,
        target: &mut dyn ReplayTarget,
        member: &GroupMember,
    ) -> Result<(), StoreError> {
        for event in events {
            match event {
                GroupEvent::Assigned(partitions) => {
                    let ours: Vec<i32> = partitions
                        .into_iter()
                        .filter(|&p| self.in_plan(p))
                        .collect();
                    for p in ours {
                        match target.claim_partition(PartitionClaim {
                            plan_id: self.to.plan_id,
                            partition: p,
                            owner: self.to.owner,
                        })? {
                            Some(claim) => {
                                if let Err(e) = member.commit(p, claim.next_offset) {
                                    tracing::debug!("partition {p}: commit owed: {e}");
                                }
                                self.owned.insert(p, claim);
                            }
                            None => tracing::warn!(
                                "partition {p} was assigned but plan {} does not record it",
                                self.to.plan_id
                            ),
                        }
                    }
                }
                GroupEvent::Revoked(partitions) => {
                    for p in partitions {
                        if self.owned.remove(&p).is_some() {
                            target.release_partition(PartitionClaim {
                                plan_id: self.to.plan_id,
                                partition: p,
                                owner: self.to.owner,
                            })?;
                        }
                    }
                }
                GroupEvent::Failed(message) => {
                    if self.said.insert(message.clone()) {
                        tracing::warn!(
                            "replay group {}: {message}",
                            self.plan.request.replay_group
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The partition with work left that this worker owns, lowest first.
    fn next_work(&self) -> Option<(i32, Claim)> {
        self.owned
            .iter()
            .find(|(_, c)| c.next_offset < c.stop)
            .map(|(p, c)| (*p, *c))
    }
}

/// Joins the replay group and replays what it is given until the whole plan is at its stop in
/// SQL and the group's offsets in Kafka caught up (a partition whose worker died between the
/// two commits waits for the group to hand it to a live worker, which commits on claiming it).
/// Bounded by the run's deadline; each partition's reading by the idle timeout.
pub(crate) fn work(
    kafka: &KafkaTarget,
    group: &ReplayGroup,
    plan: &DayPlan,
    options: ExecuteOptions,
    to: &WriteTarget<'_>,
    progress: &dyn Progress,
) -> Result<WorkerRun, SetupError> {
    let mut worker = Worker::join(kafka, group, plan, options, to)?;
    let mut share = Share {
        plan,
        to,
        owned: BTreeMap::new(),
        ranges: plan
            .partitions
            .iter()
            .map(|p| (p.partition, p.start, p.stop))
            .collect(),
        said: BTreeSet::new(),
    };
    let mut run = WorkerRun::default();
    let outcome = worker.replay_until_done(&mut share, &mut run, options, progress);
    worker.hand_back(&share);
    let complete = outcome?;
    run.checkpoints = worker.checkpoints(to.plan_id);
    if !complete {
        let deadline_passed = left(options).is_zero();
        let unfinished = unfinished(
            &plan.request.topic,
            &plan.partitions,
            &run.checkpoints,
            &run.failed,
            options.deadline,
            deadline_passed,
        );
        run.failed.extend(unfinished);
    }
    Ok(run)
}

/// What is left of the run's deadline.
fn left(options: ExecuteOptions) -> Duration {
    options.deadline.saturating_sub(options.since.elapsed())
}

/// What is left of the run's deadline, at least a millisecond (a bound must be positive).
fn remaining(options: ExecuteOptions) -> Duration {
    left(options).max(Duration::from_millis(1))
}

/// This worker as a member of the replay group, with its reader and its target connection.
/// Fields drop in this order: the reader, then the member (leaving the group hands its
/// partitions to the other workers), then the target and the broker.
struct Worker<'a> {
    reads: KafkaReplayConsumer,
    group: Arc<GroupMember>,
    target: Box<dyn ReplayTarget>,
    to: &'a WriteTarget<'a>,
    _broker: Broker,
}

impl<'a> Worker<'a> {
    /// Reaches the broker and the target (keeping what was prepared) and joins the group.
    fn join(
        kafka: &KafkaTarget,
        group: &ReplayGroup,
        plan: &DayPlan,
        options: ExecuteOptions,
        to: &'a WriteTarget<'a>,
    ) -> Result<Self, SetupError> {
        let broker = Broker::for_target(kafka, remaining(options).max(Duration::from_secs(1)))?;
        let mut target = to
            .db
            .open_target(Timeouts::replay(to.db, remaining(options)))?;
        // Writers keep what was prepared; they create nothing.
        target.prepare(&Adoption {
            create_audit_events: false,
            create_bookkeeping: Vec::new(),
            ..to.adoption.clone()
        })?;
        let member = Arc::new(GroupMember::join(&broker, group, &plan.request.topic)?);
        // Records from a reader of this worker's own; commits through the group member (a
        // broker takes commits only from members of an active group).
        let mut reads = KafkaReplayConsumer::new(&broker, group)?;
        reads.commit_through(Arc::clone(&member));
        Ok(Worker {
            reads,
            group: member,
            target,
            to,
            _broker: broker,
        })
    }

    /// Serves the group and replays the partitions it gives this worker until the plan is
    /// complete (true), the deadline passes or a partition fails (false).
    fn replay_until_done(
        &mut self,
        share: &mut Share<'_>,
        run: &mut WorkerRun,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<bool, SetupError> {
        let mut looks = Looks {
            numbers: share.plan.partitions.iter().map(|p| p.partition).collect(),
            looked: None,
            unanswered: None,
        };
        loop {
            if left(options).is_zero() {
                return Ok(false);
            }
            let wait = if share.next_work().is_some() {
                Duration::ZERO
            } else {
                IDLE_POLL.min(remaining(options))
            };
            let events = self.group.poll(wait);
            share
                .serve(events, self.target.as_mut(), &self.group)
                .map_err(SetupError::Store)?;
            let _ = self.group.settle();
            if let Some((p, claim)) = share.next_work() {
                if !self.take_turn(p, claim, share, run, options, progress) {
                    return Ok(false);
                }
                continue;
            }
            if looks.look(self.target.as_mut(), self.to.plan_id, &self.group)? {
                return Ok(true);
            }
        }
    }

    /// Replays partition `p` from its `claim` for one turn; false when it failed (recorded in
    /// `run`), which ends this worker.
    fn take_turn(
        &mut self,
        p: i32,
        claim: Claim,
        share: &mut Share<'_>,
        run: &mut WorkerRun,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> bool {
        let turn = replay_turn(
            p,
            claim,
            &mut self.reads,
            &self.group,
            self.target.as_mut(),
            share,
            run,
            options,
            progress,
        );
        match turn {
            Ok(Turn::Done) => {
                if let Some(c) = share.owned.get_mut(&p) {
                    c.next_offset = c.stop;
                }
            }
            Ok(Turn::Revoked) => {}
            Ok(Turn::Lost) => {
                share.owned.remove(&p);
                tracing::warn!("partition {p}: claimed by another worker; left to it");
            }
            Err(e) => {
                run.failed.push((p, e));
                return false;
            }
        }
        true
    }

    /// Hands unfinished partitions back at once; leaving the group (the member's drop) gives
    /// them to the other workers.
    fn hand_back(&mut self, share: &Share<'_>) {
        for p in share.owned.keys() {
            let _ = self.target.release_partition(PartitionClaim {
                plan_id: self.to.plan_id,
                partition: *p,
                owner: self.to.owner,
            });
        }
    }

    /// Every partition's SQL checkpoint as the target records it now (none when it cannot be
    /// read).
    fn checkpoints(&mut self, plan_id: &str) -> BTreeMap<i32, i64> {
        let Ok(plans) = self.target.plans() else {
            return BTreeMap::new();
        };
        plans
            .into_iter()
            .find(|r| r.plan_id == plan_id)
            .map(|recorded| {
                recorded
                    .partitions
                    .iter()
                    .map(|p| (p.partition, p.next_offset))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The partitions an incomplete run leaves short of their stop (at their SQL `checkpoints`,
/// else where the run began them) that have not `failed` already, each with why: past the
/// deadline, the deadline; otherwise this worker stopped on the first failed partition and
/// left them to the plan's other workers.
fn unfinished(
    topic: &str,
    partitions: &[PartitionPlan],
    checkpoints: &BTreeMap<i32, i64>,
    failed: &[(i32, PartitionError)],
    deadline: Duration,
    deadline_passed: bool,
) -> Vec<(i32, PartitionError)> {
    let stopped_on = failed.first().map(|(p, _)| *p);
    partitions
        .iter()
        .filter(|p| !failed.iter().any(|(n, _)| *n == p.partition))
        .filter_map(|p| {
            let at = checkpoints
                .get(&p.partition)
                .copied()
                .unwrap_or(p.resume_from);
            if at >= p.stop {
                return None;
            }
            let error = match stopped_on {
                Some(after) if !deadline_passed => PartitionError::Left {
                    after,
                    committed: at,
                },
                _ => PartitionError::Replay(ReplayError {
                    topic: topic.to_owned(),
                    partition: p.partition,
                    committed: Some(at),
                    kind: ReplayErrorKind::Deadline {
                        deadline,
                        stop: p.stop,
                    },
                }),
            };
            Some((p.partition, error))
        })
        .collect()
}

/// A worker's looks at the plan's progress while it has nothing of its own to do, at most one
/// every [`PROGRESS_CHECK`].
struct Looks {
    /// Every partition of the plan.
    numbers: Vec<i32>,
    looked: Option<Instant>,
    /// Since when the broker has not answered a look at the group's offsets.
    unanswered: Option<Instant>,
}

impl Looks {
    /// Whether the plan is complete (false also when it is not time to look again); the
    /// broker's error once it has not answered for [`BROKER_SILENCE`].
    fn look(
        &mut self,
        target: &mut dyn ReplayTarget,
        plan_id: &str,
        member: &GroupMember,
    ) -> Result<bool, SetupError> {
        if self.looked.is_some_and(|t| t.elapsed() < PROGRESS_CHECK) {
            return Ok(false);
        }
        let asked = Instant::now();
        self.looked = Some(asked);
        match plan_complete(target, plan_id, member, &self.numbers) {
            Ok(complete) => {
                self.unanswered = None;
                return Ok(complete);
            }
            Err(Unseen::Kafka(e)) => {
                if self.unanswered.get_or_insert(asked).elapsed() > BROKER_SILENCE {
                    return Err(SetupError::Kafka(e));
                }
                tracing::debug!("looking at the group's offsets: {e}");
            }
            Err(Unseen::Store(e)) => tracing::debug!("looking at the plan's progress: {e}"),
        }
        Ok(false)
    }
}

/// Why the plan's progress could not be looked at.
#[derive(Debug, thiserror::Error)]
enum Unseen {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

/// Whether every partition of the plan is at its stop in SQL and the group's committed offsets
/// in Kafka reached it too. The broker is asked first, every time: a worker with nothing of its
/// own to do learns so that the broker is gone (its member, dropped from the group by the
/// session timeout, holds no partition that would fail).
fn plan_complete(
    target: &mut dyn ReplayTarget,
    plan_id: &str,
    member: &GroupMember,
    numbers: &[i32],
) -> Result<bool, Unseen> {
    let kafka = member.committed(numbers)?;
    let Some(recorded) = target.plans()?.into_iter().find(|r| r.plan_id == plan_id) else {
        return Ok(false);
    };
    if !recorded.partitions.iter().all(|p| p.complete()) {
        return Ok(false);
    }
    Ok(numbers.iter().zip(kafka).all(|(n, k)| {
        recorded
            .partition(*n)
            .is_some_and(|p| k.is_some_and(|k| k >= p.stop))
    }))
}

/// Replays partition `p` from its claimed checkpoint, batch after batch, each with the
/// checkpoint moved only where this worker still owns it; between batches the group is served,
/// and a partition it took away is left after the batch that was being applied.
#[allow(clippy::too_many_arguments)]
fn replay_turn(
    p: i32,
    claim: Claim,
    reads: &mut KafkaReplayConsumer,
    member: &GroupMember,
    target: &mut dyn ReplayTarget,
    share: &mut Share<'_>,
    run: &mut WorkerRun,
    options: ExecuteOptions,
    progress: &dyn Progress,
) -> Result<Turn, PartitionError> {
    let bounded = claimed_plan(&share.plan.request, p, &claim)?;
    let as_run_deadline = |mut e: ReplayError| {
        if let ReplayErrorKind::Deadline { deadline, .. } = &mut e.kind {
            *deadline = options.deadline;
        }
        PartitionError::Replay(e)
    };
    let limits = ReplayLimits {
        deadline: options
            .deadline
            .saturating_sub(options.since.elapsed())
            .max(Duration::from_millis(1)),
        idle_timeout: options.idle_timeout,
    };
    let mut reader = Reader::open(&bounded, limits, reads).map_err(as_run_deadline)?;
    let mut summary = run.replayed.remove(&p).unwrap_or_default();
    summary.final_offset = claim.next_offset;
    let result = (|| {
        while summary.final_offset < claim.stop {
            let mut turn = TurnBatch {
                plan: &bounded,
                reader: &mut reader,
                target: &mut *target,
                share: &*share,
                summary: &mut summary,
            };
            if let Some(ended) = turn.apply_next(options, progress)? {
                return Ok(ended);
            }
            if let Some(ended) =
                serve_between_batches(p, summary.final_offset, share, target, member)?
            {
                return Ok(ended);
            }
        }
        if let (Some(skew), Some(window)) = (options.replay.skew, bounded.window()) {
            summary.late += reader.late_records(window, skew);
        }
        Ok(Turn::Done)
    })();
    run.replayed.insert(p, summary);
    result.map_err(as_run_deadline)
}

/// The range `claim` holds of partition `p`, bounded as the request's window says.
fn claimed_plan(r: &DayReplayRequest, p: i32, claim: &Claim) -> Result<ReplayPlan, PartitionError> {
    let bounded = ReplayPlan::new(PartitionRequest {
        live_group: &r.live_group,
        replay_group: &r.replay_group,
        topic: &r.topic,
        partition: p,
        start: claim.next_offset,
        stop: claim.stop,
    })
    .map_err(|_| PartitionError::Setup {
        cause: SetupError::InvalidRange {
            start: claim.next_offset,
            stop: claim.stop,
        },
        committed: claim.next_offset,
    })?;
    Ok(match r.window {
        super::window::Window::Time { since_ms, until_ms } => bounded.timed(since_ms, until_ms),
        _ => bounded,
    })
}

/// One batch of a worker's turn on a partition: what it reads from, writes to and adds up.
struct TurnBatch<'t, 'r> {
    plan: &'t ReplayPlan,
    reader: &'t mut Reader<'r>,
    target: &'t mut dyn ReplayTarget,
    share: &'t Share<'t>,
    summary: &'t mut ReplaySummary,
}

impl TurnBatch<'_, '_> {
    /// Gathers the next batch and applies it, as its own transaction, with its checkpoint:
    /// `Lost` when another worker claimed the partition in SQL meanwhile; an error for what
    /// stopped the batch early.
    fn apply_next(
        &mut self,
        options: ExecuteOptions,
        progress: &dyn Progress,
    ) -> Result<Option<Turn>, ReplayError> {
        let (plan, share) = (self.plan, self.share);
        let (topic, p) = (plan.topic(), plan.partition());
        let committed = self.summary.final_offset;
        let gathered = self.reader.next_batch(
            options
                .replay
                .batch
                .min(crate::replay::partition::BATCH_RECORDS),
            options
                .replay
                .batch_bytes
                .min(crate::replay::partition::BATCH_BYTES),
            committed,
        )?;
        let mut writer = TargetWriter {
            target: &mut *self.target,
            scope: PlanScope {
                plan_id: share.to.plan_id,
                topic,
                ranges: &share.ranges,
                owner: Some(share.to.owner),
                fail_on_refused: options.replay.bad_records == BadRecords::Fail,
            },
            // A worker's partition can be revoked between batches, so each batch is its
            // own transaction: what was handed over is durable at once.
            shared: None,
        };
        let applied = match apply_batch(
            plan,
            options.replay,
            &gathered,
            committed,
            &mut writer,
            self.reader.consumer(),
        ) {
            Err(ReplayError {
                kind: ReplayErrorKind::Checkpoint(WriteError::CheckpointMoved { .. }),
                ..
            }) => return Ok(Some(Turn::Lost)),
            other => other?,
        };
        if let Some(applied) = applied.as_ref().filter(|a| a.next > committed) {
            self.summary.add(applied, &gathered);
            progress.batch_done(p, self.summary);
        }
        match applied.and_then(|a| a.stopped_on).or(gathered.stopped_on) {
            Some(kind) => Err(ReplayError {
                topic: topic.to_owned(),
                partition: p,
                committed: Some(self.summary.final_offset),
                kind,
            }),
            None => Ok(None),
        }
    }
}

/// Between two batches of partition `p` (durable up to `committed`): serves what the group
/// said meanwhile; `Revoked` when it took `p` away, else `p`'s claim moves to `committed`.
fn serve_between_batches(
    p: i32,
    committed: i64,
    share: &mut Share<'_>,
    target: &mut dyn ReplayTarget,
    member: &GroupMember,
) -> Result<Option<Turn>, ReplayError> {
    let events = member.poll(Duration::ZERO);
    share
        .serve(events, target, member)
        .map_err(|e| ReplayError {
            topic: share.plan.request.topic.clone(),
            partition: p,
            committed: Some(committed),
            kind: ReplayErrorKind::Effect {
                offset: committed,
                source: e,
            },
        })?;
    match share.owned.get_mut(&p) {
        Some(c) => {
            c.next_offset = committed;
            Ok(None)
        }
        None => Ok(Some(Turn::Revoked)),
    }
}

#[cfg(test)]
mod tests {
    mod unfinished {
        use super::super::*;
        use crate::kafka::TimeWindow;

        fn partition(partition: i32, stop: i64) -> PartitionPlan {
            PartitionPlan {
                partition,
                found: TimeWindow {
                    since: Some(0),
                    until: None,
                    log_start: 0,
                    end: stop,
                },
                start: 0,
                stop,
                live_committed: None,
                replay_committed: None,
                resume_from: 2,
            }
        }

        /// Partitions 0 to 3: 0 at its stop, 1 and 3 begun, 2 not begun; 3 failed when `failed`.
        fn ends(deadline_passed: bool, failed: bool) -> Vec<(i32, String)> {
            let partitions: Vec<PartitionPlan> = (0..4).map(|p| partition(p, 10)).collect();
            let checkpoints = BTreeMap::from([(0, 10), (1, 5), (3, 7)]);
            let failed: Vec<(i32, PartitionError)> = match failed {
                true => vec![(
                    3,
                    PartitionError::Setup {
                        cause: SetupError::InvalidRange { start: 9, stop: 1 },
                        committed: 7,
                    },
                )],
                false => Vec::new(),
            };
            unfinished(
                "t",
                &partitions,
                &checkpoints,
                &failed,
                Duration::from_secs(6),
                deadline_passed,
            )
            .into_iter()
            .map(|(p, e)| (p, e.to_string()))
            .collect()
        }

        #[test]
        fn after_another_partition_failed_the_rest_are_left_at_their_checkpoints() {
            assert_eq!(
                ends(false, true),
                [
                    (1, "left at 5 when this worker stopped on partition 3's failure; the plan's other workers or --resume take it up".to_owned()),
                    (2, "left at 2 when this worker stopped on partition 3's failure; the plan's other workers or --resume take it up".to_owned()),
                ]
            );
        }

        #[test]
        fn past_the_deadline_every_partition_short_of_its_stop_is_the_deadline() {
            // Partition 3 failed on its own: it keeps its error and is not reported twice.
            let ends_after_failure = ends(true, true);
            assert_eq!(
                ends_after_failure,
                [
                    (
                        1,
                        "t[1] (committed 5): deadline of 6s reached before stop 10".to_owned()
                    ),
                    (
                        2,
                        "t[2] (committed 2): deadline of 6s reached before stop 10".to_owned()
                    ),
                ]
            );
            // Incomplete with nothing failed: the run ended on its deadline, wherever the clock
            // was read.
            for passed in [true, false] {
                let ends = ends(passed, false);
                assert_eq!(ends.len(), 3, "{ends:?}");
                assert_eq!(
                    ends[2],
                    (
                        3,
                        "t[3] (committed 7): deadline of 6s reached before stop 10".to_owned()
                    )
                );
            }
        }
    }

    use crate::event::{AuditEvent, EventRecord};
    use crate::store::{
        AuditDb, Batch, Counters, Entry, PartitionClaim, PartitionProgress, PlanScope, PlanStatus,
        PlanWindow, RecordedPlan, Recording, Timeouts, WriteError,
    };
    use std::time::Duration;

    fn plan(plan_id: &str) -> RecordedPlan {
        RecordedPlan {
            plan_id: plan_id.into(),
            topic: "t".into(),
            replay_group: "replay".into(),
            live_group: "live".into(),
            window: PlanWindow::Offsets { start: 0, stop: 10 },
            created_at: "now".into(),
            created_by: "me@here".into(),
            status: PlanStatus::Running,
            finished_at: None,
            partitions: vec![PartitionProgress {
                partition: 0,
                start: 0,
                stop: 10,
                captured_end: 10,
                next_offset: 0,
                owner: None,
                counters: Counters::default(),
                updated_at: "now".into(),
            }],
        }
    }

    /// Worker `a` claims partition 0, worker `b` claims it over: `a`'s next batch is refused by
    /// the checkpoint's compare-and-set and leaves nothing behind; `b`'s is applied, recorded
    /// with `b` as its owner; `a` can no longer release it.
    fn a_stale_owner_is_refused(db: AuditDb) {
        let mut target = db
            .open_target(Timeouts::all(Duration::from_secs(10)))
            .unwrap();
        let adoption = target.inspect().unwrap().adopt().unwrap();
        target.prepare(&adoption).unwrap();
        assert_eq!(
            target.record_plan_once(&plan("p")).unwrap(),
            Recording::Recorded
        );
        assert_eq!(
            target.record_plan_once(&plan("p")).unwrap(),
            Recording::Present
        );
        assert_eq!(
            target.record_plan_once(&plan("q")).unwrap(),
            Recording::OtherPlan {
                plan_id: "p".into()
            }
        );
        let claim = |partition, owner| PartitionClaim {
            plan_id: "p",
            partition,
            owner,
        };
        let a = target.claim_partition(claim(0, "a")).unwrap().unwrap();
        assert_eq!((a.next_offset, a.stop), (0, 10));
        assert!(target.claim_partition(claim(7, "a")).unwrap().is_none());
        target.claim_partition(claim(0, "b")).unwrap().unwrap();
        let payloads: Vec<Vec<u8>> = (0..3)
            .map(|i| AuditEvent::sample_with_id(&format!("stale-{i}")).to_json())
            .collect();
        let batch = Batch {
            partition: 0,
            first: 0,
            next: 3,
            entries: payloads
                .iter()
                .enumerate()
                .map(|(i, raw)| Entry {
                    topic: "t",
                    partition: 0,
                    offset: i as i64,
                    timestamp: None,
                    raw,
                    decoded: EventRecord::decode(raw).map_err(|e| e.to_string()),
                })
                .collect(),
            markers: 0,
            aborted: 0,
        };
        let ranges = [(0, 0, 10)];
        let scope = |owner| PlanScope {
            plan_id: "p",
            topic: "t",
            ranges: &ranges,
            owner: Some(owner),
            fail_on_refused: false,
        };
        match target.write_batch(&scope("a"), &batch) {
            Err(WriteError::CheckpointMoved {
                partition: 0,
                expected: 0,
                found: Some(0),
            }) => {}
            other => panic!("the stale owner's batch: {other:?}"),
        }
        let counters = target.write_batch(&scope("b"), &batch).unwrap();
        assert_eq!(
            counters.inserted, 3,
            "nothing of the refused batch stayed behind"
        );
        target.release_partition(claim(0, "a")).unwrap();
        let recorded = target.plans().unwrap().remove(0);
        assert_eq!(recorded.partitions[0].next_offset, 3);
        assert_eq!(recorded.partitions[0].owner.as_deref(), Some("b"));
        // A finished partition keeps the owner that finished it.
        let rest = Batch {
            first: 3,
            next: 10,
            entries: Vec::new(),
            markers: 7,
            ..batch.clone()
        };
        target.write_batch(&scope("b"), &rest).unwrap();
        let c = target.claim_partition(claim(0, "c")).unwrap().unwrap();
        assert_eq!((c.next_offset, c.stop), (10, 10));
        let recorded = target.plans().unwrap().remove(0);
        assert_eq!(recorded.partitions[0].owner.as_deref(), Some("b"));
    }

    #[test]
    fn a_stale_owner_is_refused_by_the_checkpoint_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        a_stale_owner_is_refused(AuditDb::Sqlite(dir.path().join("t.db")));
    }

    #[test]
    fn a_stale_owner_is_refused_by_the_checkpoint_on_postgres() {
        let Some(admin) = lessonprobe_testkit::services::postgres() else {
            return;
        };
        let db = lessonprobe_testkit::postgres::OwnDatabase::create(&admin, "stale_owner");
        a_stale_owner_is_refused(AuditDb::Postgres(db.url()));
    }
}
