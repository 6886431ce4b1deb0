//! The per-partition core of a replay: one partition's half-open range `[start, stop)` re-read
//! by its own consumer group, each batch applied to the audit store before its offset is
//! committed. The audit store is the only effect it has.

pub(crate) mod apply;
pub(crate) mod pipeline;
pub(crate) mod read;

pub use crate::kafka::{ConsumerError, GapReading, ReplayConsumer, ReplayGroup, ReplayRecord};
pub use apply::{BatchWriter, SharedTransaction, StoreWriter, TargetWriter};

use std::time::Duration;

use crate::event::DecodeError;
use crate::store::{AuditStore, Counters, StoreError, WriteError};

/// A validated replay of one partition. Construct with [`ReplayPlan::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayPlan {
    live_group: String,
    group: ReplayGroup,
    topic: String,
    partition: i32,
    start: i64,
    stop: i64,
    /// The time window `[since, until)` in ms the offsets were found for, if any: records
    /// inside `[start, stop)` whose timestamps lie outside it are counted.
    window: Option<(i64, i64)>,
}

/// A plan that must not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Group(#[from] crate::kafka::GroupError),
    #[error("{0} must not be empty")]
    Missing(&'static str),
    #[error("the replay group must differ from the live group ({0})")]
    SameGroup(String),
    #[error("partition and offsets must be non-negative (partition {partition}, start {start}, stop {stop})")]
    Negative {
        partition: i32,
        start: i64,
        stop: i64,
    },
    #[error("empty range [{start}, {stop}): stop must be greater than start")]
    Empty { start: i64, stop: i64 },
}

/// What a replay of one partition is asked for: the groups named by their roles, the topic, the
/// partition and its half-open range `[start, stop)`. Validated by [`ReplayPlan::new`].
#[derive(Debug, Clone, Copy)]
pub struct PartitionRequest<'a> {
    pub live_group: &'a str,
    pub replay_group: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    pub start: i64,
    pub stop: i64,
}

impl ReplayPlan {
    pub fn new(request: PartitionRequest<'_>) -> Result<Self, PlanError> {
        let PartitionRequest {
            live_group,
            replay_group,
            topic,
            partition,
            start,
            stop,
        } = request;
        for (value, what) in [
            (live_group, "live group"),
            (replay_group, "replay group"),
            (topic, "topic"),
        ] {
            if value.trim().is_empty() {
                return Err(PlanError::Missing(what));
            }
        }
        if live_group == replay_group {
            return Err(PlanError::SameGroup(live_group.to_owned()));
        }
        if partition < 0 || start < 0 || stop < 0 {
            return Err(PlanError::Negative {
                partition,
                start,
                stop,
            });
        }
        if stop <= start {
            return Err(PlanError::Empty { start, stop });
        }
        Ok(ReplayPlan {
            live_group: live_group.to_owned(),
            group: ReplayGroup::new(replay_group, live_group)?,
            topic: topic.to_owned(),
            partition,
            start,
            stop,
            window: None,
        })
    }

    /// This plan, with the time window its offsets were found for.
    pub fn timed(mut self, since_ms: i64, until_ms: i64) -> Self {
        self.window = Some((since_ms, until_ms));
        self
    }

    /// The time window `[since, until)` in ms, for a plan found by time.
    pub fn window(&self) -> Option<(i64, i64)> {
        self.window
    }

    pub fn live_group(&self) -> &str {
        &self.live_group
    }
    pub fn replay_group(&self) -> &str {
        self.group.as_str()
    }
    /// The replay group, for building the consumer (checked against the live group by `new`).
    pub fn group(&self) -> ReplayGroup {
        self.group.clone()
    }
    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    pub fn start(&self) -> i64 {
        self.start
    }
    pub fn stop(&self) -> i64 {
        self.stop
    }
    /// Records in the range.
    pub fn len(&self) -> i64 {
        self.stop - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A plan of `[start, stop)` on `partition` of topic `t`, replay group `replay`, for tests.
#[cfg(test)]
pub(crate) fn test_plan(partition: i32, start: i64, stop: i64) -> ReplayPlan {
    ReplayPlan::new(PartitionRequest {
        live_group: "live",
        replay_group: "replay",
        topic: "t",
        partition,
        start,
        stop,
    })
    .expect("a valid test plan")
}

/// Bounds on time: the consumer must deliver within `idle_timeout`, and the whole run must end
/// within `deadline`. Both must be positive.
#[derive(Debug, Clone, Copy)]
pub struct ReplayLimits {
    pub deadline: Duration,
    pub idle_timeout: Duration,
}

/// What a completed replay did (or, passed to progress, has done so far): the counters of its
/// durable batches, and what the window's edges held. Serialized flat, as a report's row
/// shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplaySummary {
    /// Records, inserted, duplicates, conflicts (same event id, other content: the first stored
    /// version stayed), quarantined (not audit events), markers (offsets that held transaction
    /// control markers) and aborted (records of aborted transactions, skipped).
    #[serde(flatten)]
    pub counters: Counters,
    /// Records inside `[start, stop)` whose timestamps lie outside the time window.
    pub out_of_window: u64,
    /// Records after `stop` (within the skew) whose timestamps lie inside the time window.
    pub late: u64,
    /// The replay group's committed offset at the end: the plan's `stop`.
    #[serde(rename = "replay_offset")]
    pub final_offset: i64,
}

impl ReplaySummary {
    /// Nothing done yet, standing at `offset`.
    pub fn at(offset: i64) -> Self {
        ReplaySummary {
            final_offset: offset,
            ..ReplaySummary::default()
        }
    }

    /// Counts a batch made durable, and moves the final offset to the position after it.
    pub(crate) fn add(&mut self, applied: &apply::Applied, gathered: &read::Gathered) {
        self.counters += Counters {
            records: applied.records,
            ..applied.outcome
        };
        self.out_of_window += gathered.out_of_window_below(applied.next);
        self.final_offset = applied.next;
    }
}

/// Why the replay of one partition did not complete, and where it stood: the partition once,
/// the replay group's last committed offset (where a rerun continues; `None` when it stopped
/// before seeking), and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{topic}[{partition}]{}: {kind}", committed.map_or_else(String::new, |c| format!(" (committed {c})")))]
pub struct ReplayError {
    pub topic: String,
    pub partition: i32,
    pub committed: Option<i64>,
    pub kind: ReplayErrorKind,
}

/// What stopped a replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayErrorKind {
    #[error("limits must be positive (deadline {deadline:?}, idle timeout {idle_timeout:?}, batch {batch})")]
    BadLimits {
        deadline: Duration,
        idle_timeout: Duration,
        batch: usize,
    },
    #[error("consumer belongs to group {actual:?}, the plan's replay group is {expected:?}")]
    WrongGroup { expected: String, actual: String },
    #[error("stop {stop} is beyond the captured end offset {end}; nothing was read")]
    StopBeyondEnd { stop: i64, end: i64 },
    #[error("consumer error: {0}")]
    Consumer(#[source] ConsumerError),
    #[error("record from {topic}[{partition}] arrived instead of the next record")]
    ForeignRecord { topic: String, partition: i32 },
    /// A jump the consumer could not re-read to explain.
    #[error("discontinuous range: expected offset {expected}, got {got}")]
    Gap { expected: i64, got: i64 },
    /// A jump a re-read showed to be neither control markers nor aborted records.
    #[error("discontinuous range: expected offset {expected}, got {got}: {finding}")]
    UnexplainedGap {
        expected: i64,
        got: i64,
        finding: GapFinding,
    },
    #[error("retention removed offsets [{from}, {log_start}) while the replay ran")]
    RemovedWhileReading { from: i64, log_start: i64 },
    #[error("record at offset {offset}: {source}")]
    Undecodable { offset: i64, source: DecodeError },
    #[error("effect failed at offset {offset}: {source}")]
    Effect { offset: i64, source: StoreError },
    #[error("record at offset {offset} refused by the database: {reason}")]
    Refused { offset: i64, reason: String },
    #[error("{0}")]
    Checkpoint(#[source] WriteError),
    #[error("idle for {idle:?} before stop {stop}")]
    Idle { idle: Duration, stop: i64 },
    #[error("deadline of {deadline:?} reached before stop {stop}")]
    Deadline { deadline: Duration, stop: i64 },
}

/// Why a re-read did not explain a jump.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GapFinding {
    #[error("offsets below {log_start} are gone (retention)")]
    Removed { log_start: i64 },
    #[error("offset {offset} holds a committed record the consumer did not deliver")]
    Undelivered { offset: i64 },
}

/// What to do with a record that is not an audit event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRecords {
    /// Stop the replay with an error at that record (its offset is not committed).
    Fail,
    /// Record it in the quarantine in the same transaction as its batch, then move on.
    Quarantine,
}

/// At most this many records, and about this much payload, are read into one batch (one
/// checkpoint); a larger `batch` makes transactions that hold several batches.
pub const BATCH_RECORDS: usize = 10_000;
pub const BATCH_BYTES: usize = 16 << 20;

/// How a replay applies effects: up to `batch` records (and about `batch_bytes` of payload)
/// per SQL transaction, then one commit of the next offset. `batch: 1` is one transaction and
/// one commit per event.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    pub batch: usize,
    pub batch_bytes: usize,
    pub bad_records: BadRecords,
    /// How far past `until` (in record time) to read after `stop`, counting records that
    /// belong to the window but were written after it; `None`: not at all.
    pub skew: Option<Duration>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            batch: 1,
            batch_bytes: usize::MAX,
            bad_records: BadRecords::Fail,
            skew: None,
        }
    }
}

/// Replays `plan` through `consumer` into `store`, the only effect a replay has, one record
/// per transaction and refusing undecodable records. See [`run_bounded_replay_with`].
pub fn run_bounded_replay(
    plan: &ReplayPlan,
    limits: ReplayLimits,
    consumer: &mut dyn ReplayConsumer,
    store: &mut dyn AuditStore,
) -> Result<ReplaySummary, ReplayError> {
    run_bounded_replay_with(
        plan,
        limits,
        ReplayOptions::default(),
        consumer,
        &mut StoreWriter::new(store),
        &mut |_| {},
    )
}

/// Replays `plan` through `consumer` into `writer`, calling `progress` after each durable batch.
///
/// Order: check the limits and the group, capture the end offset, refuse `stop > end`, seek to
/// `start` ([`read::Reader::open`]); then gather records, each of the plan's partition and at
/// exactly the next expected offset, up to a batch ([`read::Reader::next_batch`]); apply the
/// batch in one transaction, and only once it is durable commit the offset after it
/// ([`apply::apply_batch`]). Idle or deadline before `stop` is an error carrying the last
/// committed offset, never a partial success.
pub fn run_bounded_replay_with(
    plan: &ReplayPlan,
    limits: ReplayLimits,
    options: ReplayOptions,
    consumer: &mut dyn ReplayConsumer,
    writer: &mut dyn BatchWriter,
    progress: &mut dyn FnMut(&ReplaySummary),
) -> Result<ReplaySummary, ReplayError> {
    pipeline::run(
        plan,
        pipeline::Start::Open(limits),
        None,
        options,
        consumer,
        writer,
        progress,
    )
    .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::AuditEvent;

    /// Delivers `records` in order, then nothing; logs commits.
    struct Listed {
        records: std::collections::VecDeque<ReplayRecord>,
        commits: Vec<i64>,
        /// Each commit with its partition.
        committed: Vec<(i32, i64)>,
    }

    impl ReplayConsumer for Listed {
        fn group_id(&self) -> &str {
            "replay"
        }
        fn end_offset(&mut self, _: &str, _: i32) -> Result<i64, ConsumerError> {
            Ok(1_000)
        }
        fn seek(&mut self, _: &str, _: i32, _: i64) -> Result<(), ConsumerError> {
            Ok(())
        }
        fn poll(&mut self, _: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
            Ok(self.records.pop_front())
        }
        fn commit(&mut self, _: &str, p: i32, next_offset: i64) -> Result<(), ConsumerError> {
            self.commits.push(next_offset);
            self.committed.push((p, next_offset));
            Ok(())
        }
    }

    fn rec(offset: i64, payload: &[u8]) -> ReplayRecord {
        ReplayRecord {
            topic: "t".into(),
            partition: 0,
            offset,
            timestamp: Some(1_000 + offset),
            key: None,
            payload: payload.to_vec(),
        }
    }

    fn event(offset: i64) -> ReplayRecord {
        rec(
            offset,
            &AuditEvent::sample_with_id(&format!("e{offset}")).to_json(),
        )
    }

    const LIMITS: ReplayLimits = ReplayLimits {
        deadline: Duration::from_secs(5),
        idle_timeout: Duration::from_millis(50),
    };

    /// Replays `records` over `[0, stop)` into a fresh SQLite target with a recorded plan `p`;
    /// returns the result, the commits and a connection to read the target back.
    fn replay_listed(
        records: std::collections::VecDeque<ReplayRecord>,
        stop: i64,
        batch: usize,
        bad_records: BadRecords,
    ) -> (
        Result<ReplaySummary, ReplayError>,
        Vec<i64>,
        rusqlite::Connection,
    ) {
        use crate::store::PlanScope;
        let mut consumer = Listed {
            records,
            commits: Vec::new(),
            committed: Vec::new(),
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("target.db");
        let mut target = target_with_plan(&path, &[0], stop);
        let plan = test_plan(0, 0, stop);
        let options = ReplayOptions {
            batch,
            batch_bytes: usize::MAX,
            bad_records,
            skew: None,
        };
        let result = run_bounded_replay_with(
            &plan,
            LIMITS,
            options,
            &mut consumer,
            &mut TargetWriter {
                shared: None,
                target: target.as_mut(),
                scope: PlanScope {
                    plan_id: "p",
                    topic: "t",
                    ranges: &[(0, 0, stop)],
                    owner: None,
                    fail_on_refused: bad_records == BadRecords::Fail,
                },
            },
            &mut |_| {},
        );
        drop(target);
        let conn = rusqlite::Connection::open(&path).unwrap();
        // The file stays readable through the open connection after the folder goes.
        std::mem::forget(dir);
        (result, consumer.commits, conn)
    }

    fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn batches_commit_once_each_and_quarantine_bad_records_in_the_same_transaction() {
        let mut records: std::collections::VecDeque<_> = (0..7).map(event).collect();
        records[3] = rec(3, b"not json");
        let (result, commits, conn) = replay_listed(records, 7, 3, BadRecords::Quarantine);
        let summary = result.unwrap();
        assert_eq!(commits, vec![3, 6, 7]);
        assert_eq!(
            (
                summary.counters.records,
                summary.counters.inserted,
                summary.counters.quarantined,
                summary.final_offset
            ),
            (7, 6, 1, 7)
        );
        let q = count(
            &conn,
            "SELECT record_offset FROM lessonprobe_replay_quarantine",
        );
        assert_eq!(q, 3);
        // One batch row per durable batch, and the checkpoint where the last one ended.
        assert_eq!(
            count(&conn, "SELECT COUNT(*) FROM lessonprobe_replay_batches"),
            3
        );
        assert_eq!(
            count(
                &conn,
                "SELECT next_offset FROM lessonprobe_replay_partitions"
            ),
            7
        );
        assert_eq!(
            count(&conn, "SELECT COUNT(*) FROM audit_events WHERE record_offset IS NOT NULL AND record_timestamp = 1000 + record_offset"),
            6
        );
    }

    #[test]
    fn a_gap_inside_a_batch_applies_what_came_before_it_then_fails_there() {
        let (result, commits, conn) = replay_listed(
            [0, 1, 2, 4].into_iter().map(event).collect(),
            7,
            10,
            BadRecords::Fail,
        );
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                ReplayError {
                    committed: Some(3),
                    kind: ReplayErrorKind::Gap {
                        expected: 3,
                        got: 4
                    },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "t[0] (committed 3): discontinuous range: expected offset 3, got 4"
        );
        assert_eq!(commits, vec![3]);
        assert_eq!(count(&conn, "SELECT COUNT(*) FROM audit_events"), 3);
        assert_eq!(
            count(
                &conn,
                "SELECT next_offset FROM lessonprobe_replay_partitions"
            ),
            3
        );
    }

    #[test]
    fn an_undecodable_record_with_fail_stops_at_its_offset_after_applying_the_ones_before() {
        let mut records: std::collections::VecDeque<_> = (0..5).map(event).collect();
        records[2] = rec(2, b"{}");
        let (result, commits, _) = replay_listed(records, 5, 10, BadRecords::Fail);
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                ReplayError {
                    committed: Some(2),
                    kind: ReplayErrorKind::Undecodable { offset: 2, .. },
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(commits, vec![2]);
        let (result, commits, _) =
            replay_listed((0..5).map(event).collect(), 5, 0, BadRecords::Fail);
        assert!(matches!(
            result,
            Err(ReplayError {
                committed: None,
                kind: ReplayErrorKind::BadLimits { batch: 0, .. },
                ..
            })
        ));
        assert!(commits.is_empty());
    }

    use crate::store::sqlite::target_with_plan;

    fn on(partition: i32, offset: i64) -> ReplayRecord {
        ReplayRecord {
            partition,
            ..rec(
                offset,
                &AuditEvent::sample_with_id(&format!("e{partition}-{offset}")).to_json(),
            )
        }
    }

    #[test]
    fn batches_of_several_partitions_share_a_transaction_and_kafka_hears_only_after_its_commit() {
        use crate::store::PlanScope;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("target.db");
        let mut target = target_with_plan(&path, &[0, 1], 4);
        let look = rusqlite::Connection::open(&path).unwrap();
        let durable = |sql: &str| count(&look, sql);
        let mut shared = SharedTransaction::new(6, usize::MAX);
        let mut consumer = Listed {
            records: (0..4)
                .map(|o| on(0, o))
                .chain((0..4).map(|o| on(1, o)))
                .collect(),
            commits: Vec::new(),
            committed: Vec::new(),
        };
        let ranges = [(0, 0, 4), (1, 0, 4)];
        let options = ReplayOptions {
            batch: 2,
            batch_bytes: usize::MAX,
            bad_records: BadRecords::Fail,
            skew: None,
        };
        for partition in [0, 1] {
            shared.starts(partition, 0);
            let plan = test_plan(partition, 0, 4);
            let mut seen = Vec::new();
            let summary = run_bounded_replay_with(
                &plan,
                LIMITS,
                options,
                &mut consumer,
                &mut TargetWriter {
                    target: target.as_mut(),
                    scope: PlanScope {
                        plan_id: "p",
                        topic: "t",
                        ranges: &ranges,
                        owner: None,
                        fail_on_refused: true,
                    },
                    shared: Some(&mut shared),
                },
                &mut |s| seen.push(s.final_offset),
            )
            .unwrap();
            assert_eq!((summary.counters.inserted, seen), (4, vec![2, 4]));
            if partition == 0 {
                // Four rows in the open transaction: nothing durable, nothing told to Kafka.
                assert!(consumer.committed.is_empty());
                assert!(shared.holds(0));
                assert_eq!(durable("SELECT COUNT(*) FROM audit_events"), 0);
                assert_eq!(
                    durable("SELECT SUM(next_offset) FROM lessonprobe_replay_partitions"),
                    0
                );
            }
        }
        // The sixth row filled the transaction: committed, then both checkpoints to Kafka.
        assert_eq!(consumer.committed, vec![(0, 4), (1, 2)]);
        assert_eq!(durable("SELECT COUNT(*) FROM audit_events"), 6);
        assert_eq!(shared.durable(1), Some(2));
        assert_eq!(shared.commit(target.as_mut()).unwrap(), vec![(1, 4)]);
        assert_eq!(durable("SELECT COUNT(*) FROM audit_events"), 8);
        assert_eq!(
            durable("SELECT COUNT(*) FROM lessonprobe_replay_batches"),
            4,
            "one row per batch, each with its own checkpoint move"
        );
        assert_eq!(
            durable("SELECT SUM(next_offset) FROM lessonprobe_replay_partitions"),
            8
        );
    }

    #[test]
    fn a_batch_that_fails_inside_a_shared_transaction_leaves_the_others_to_commit() {
        use crate::store::{Batch, Entry, PlanScope, WriteError};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("target.db");
        let mut target = target_with_plan(&path, &[0, 1], 4);
        let ranges = [(0, 0, 4), (1, 0, 4)];
        let scope = PlanScope {
            plan_id: "p",
            topic: "t",
            ranges: &ranges,
            owner: None,
            fail_on_refused: true,
        };
        let records: Vec<ReplayRecord> = [on(0, 0), on(0, 1), on(1, 2), on(1, 3)].into();
        let batch = |partition: i32, first: i64| Batch {
            partition,
            first,
            next: first + 2,
            entries: records
                .iter()
                .filter(|r| r.partition == partition)
                .map(|r| Entry {
                    topic: "t",
                    partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    raw: &r.payload,
                    decoded: crate::event::EventRecord::decode(&r.payload)
                        .map_err(|e| e.to_string()),
                })
                .collect(),
            markers: 0,
            aborted: 0,
        };
        target.begin().unwrap();
        target.write_batch(&scope, &batch(0, 0)).unwrap();
        // Partition 1's checkpoint is at 0, not 2: this batch is not where the plan stands.
        let err = target.write_batch(&scope, &batch(1, 2)).unwrap_err();
        assert!(
            matches!(
                err,
                WriteError::CheckpointMoved {
                    partition: 1,
                    expected: 2,
                    found: Some(0)
                }
            ),
            "{err:?}"
        );
        target.commit().unwrap();
        drop(target);
        let conn = rusqlite::Connection::open(&path).unwrap();
        assert_eq!(count(&conn, "SELECT COUNT(*) FROM audit_events"), 2);
        assert_eq!(
            count(
                &conn,
                "SELECT COUNT(*) FROM audit_events WHERE event_id LIKE 'e1-%'"
            ),
            0,
            "nothing of the failed batch"
        );
        assert_eq!(
            count(&conn, "SELECT COUNT(*) FROM lessonprobe_replay_batches"),
            1
        );
        assert_eq!(
            count(
                &conn,
                "SELECT next_offset FROM lessonprobe_replay_partitions WHERE partition = 0"
            ),
            2
        );
    }

    #[test]
    fn plan_validation_refuses_bad_plans() {
        const OK: PartitionRequest<'static> = PartitionRequest {
            live_group: "g",
            replay_group: "r",
            topic: "t",
            partition: 0,
            start: 0,
            stop: 1,
        };
        let plan = |request| ReplayPlan::new(request);
        assert_eq!(
            plan(PartitionRequest {
                replay_group: "g",
                ..OK
            }),
            Err(PlanError::SameGroup("g".into()))
        );
        assert_eq!(
            plan(PartitionRequest {
                live_group: "",
                ..OK
            }),
            Err(PlanError::Missing("live group"))
        );
        assert_eq!(
            plan(PartitionRequest { topic: " ", ..OK }),
            Err(PlanError::Missing("topic"))
        );
        assert!(matches!(
            plan(PartitionRequest { start: -1, ..OK }),
            Err(PlanError::Negative { .. })
        ));
        assert_eq!(
            plan(PartitionRequest {
                start: 5,
                stop: 5,
                ..OK
            }),
            Err(PlanError::Empty { start: 5, stop: 5 })
        );
        let plan = ReplayPlan::new(PartitionRequest {
            live_group: "ticketflow-audit-v1",
            replay_group: "ticketflow-replay-20260922",
            topic: "ticketflow.audit.v1",
            partition: 2,
            start: 120,
            stop: 160,
        })
        .unwrap();
        assert_eq!(plan.len(), 40);
    }
}
