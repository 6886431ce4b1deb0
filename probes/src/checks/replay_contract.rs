//! Probes that pin the contract of `run_bounded_replay` with a scripted in-process consumer.
//! The same primitive runs over a real broker in the Kafka probes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::system::System;
use crate::context::{ensure, ProbeContext, ProbeError};
use ticketflow::event::AuditEvent;
use ticketflow::replay::{
    ConsumerError, PartitionRequest, PlanError, ReplayConsumer, ReplayError, ReplayErrorKind,
    ReplayLimits, ReplayPlan, ReplayRecord, ReplaySummary,
};
use ticketflow::store::{AuditStore, SqliteAuditStore, StoreError};

const TOPIC: &str = "ticketflow.audit.v1";
const LIVE: &str = "ticketflow-audit-v1";
const REPLAY: &str = "ticketflow-replay-20260922";

type Log = Arc<Mutex<Vec<String>>>;

fn push(log: &Log, entry: String) {
    if let Ok(mut log) = log.lock() {
        log.push(entry);
    }
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().map(|l| l.clone()).unwrap_or_default()
}

/// Delivers a fixed script; `None` in the script (or its end) means nothing arrives in time.
struct Scripted {
    end: i64,
    script: VecDeque<Option<ReplayRecord>>,
    delay: Duration,
    log: Log,
    /// Records handed out by `poll`.
    delivered: usize,
}

impl ReplayConsumer for Scripted {
    fn group_id(&self) -> &str {
        REPLAY
    }
    fn end_offset(&mut self, _: &str, _: i32) -> Result<i64, ConsumerError> {
        push(&self.log, "end".into());
        Ok(self.end)
    }
    fn seek(&mut self, _: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
        push(&self.log, format!("seek {partition}@{offset}"));
        Ok(())
    }
    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
        match self.script.pop_front().flatten() {
            Some(record) => {
                std::thread::sleep(self.delay.min(timeout));
                self.delivered += 1;
                Ok(Some(record))
            }
            None => {
                std::thread::sleep(timeout);
                Ok(None)
            }
        }
    }
    fn commit(&mut self, _: &str, _: i32, next_offset: i64) -> Result<(), ConsumerError> {
        push(&self.log, format!("commit {next_offset}"));
        Ok(())
    }
}

/// The real SQLite store, logging each effect into the same log as the consumer.
struct Logged {
    inner: SqliteAuditStore,
    log: Log,
}

impl AuditStore for Logged {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let applied = self.inner.apply_once(event)?;
        push(&self.log, format!("apply {}", event.event_id));
        Ok(applied)
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        self.inner.audit_rows()
    }
}

fn record(partition: i32, offset: i64, event_id: &str) -> ReplayRecord {
    ReplayRecord {
        topic: TOPIC.to_owned(),
        partition,
        offset,
        timestamp: None,
        key: None,
        payload: AuditEvent::sample_with_id(event_id).to_json(),
    }
}

fn records(offsets: impl IntoIterator<Item = i64>) -> VecDeque<Option<ReplayRecord>> {
    offsets
        .into_iter()
        .map(|o| Some(record(2, o, &format!("evt-{o}"))))
        .collect()
}

struct Rig {
    consumer: Scripted,
    store: Logged,
    log: Log,
}

impl Rig {
    /// The audit rows the replay left in the rig's store.
    fn rows(&mut self) -> Result<u64, ProbeError> {
        self.store
            .audit_rows()
            .map_err(|e| ProbeError::broken(e.to_string()))
    }
}

fn rig(end: i64, script: VecDeque<Option<ReplayRecord>>) -> Result<Rig, ProbeError> {
    let log: Log = Arc::default();
    let inner =
        SqliteAuditStore::in_memory().map_err(|e| ProbeError::broken(format!("SQLite: {e}")))?;
    Ok(Rig {
        consumer: Scripted {
            end,
            script,
            delay: Duration::ZERO,
            log: log.clone(),
            delivered: 0,
        },
        store: Logged {
            inner,
            log: log.clone(),
        },
        log,
    })
}

/// The example every plan check starts from, changed one field at a time.
const EXAMPLE: PartitionRequest<'static> = PartitionRequest {
    live_group: LIVE,
    replay_group: REPLAY,
    topic: TOPIC,
    partition: 2,
    start: 120,
    stop: 160,
};

fn example_plan() -> Result<ReplayPlan, ProbeError> {
    ReplayPlan::new(EXAMPLE).map_err(|e| ProbeError::failed(format!("example plan refused: {e}")))
}

fn limits(deadline_ms: u64, idle_ms: u64) -> ReplayLimits {
    ReplayLimits {
        deadline: Duration::from_millis(deadline_ms),
        idle_timeout: Duration::from_millis(idle_ms),
    }
}

/// The example plan replayed by `sys` through the rig: the replay's own result, or why it
/// could not start.
fn replay(
    sys: &dyn System,
    rig: &mut Rig,
    limits: ReplayLimits,
) -> Result<Result<ReplaySummary, ReplayError>, ProbeError> {
    let plan = example_plan()?;
    Ok(sys.replay(&plan, limits, &mut rig.consumer, &mut rig.store))
}

fn commits(log: &Log) -> Vec<String> {
    entries(log)
        .into_iter()
        .filter(|e| e.starts_with("commit"))
        .collect()
}

fn unexpected(what: &str, got: impl std::fmt::Debug) -> ProbeError {
    ProbeError::failed(format!("expected {what}, got {got:?}"))
}

pub(crate) fn plan_validation(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let same = sys.plan(PartitionRequest {
        replay_group: LIVE,
        ..EXAMPLE
    });
    ensure(same == Err(PlanError::SameGroup(LIVE.into())), || {
        format!("same group: {same:?}")
    })?;
    let empty = sys.plan(PartitionRequest {
        start: 160,
        ..EXAMPLE
    });
    ensure(matches!(empty, Err(PlanError::Empty { .. })), || {
        format!("empty range: {empty:?}")
    })?;
    let backwards = sys.plan(PartitionRequest {
        start: 160,
        stop: 120,
        ..EXAMPLE
    });
    ensure(matches!(backwards, Err(PlanError::Empty { .. })), || {
        format!("stop before start: {backwards:?}")
    })?;
    let negative = sys.plan(PartitionRequest {
        start: -1,
        ..EXAMPLE
    });
    ensure(matches!(negative, Err(PlanError::Negative { .. })), || {
        format!("negative start: {negative:?}")
    })?;
    let plan = sys
        .plan(EXAMPLE)
        .map_err(|e| ProbeError::failed(format!("example plan refused: {e}")))?;
    let accepted = (plan.topic(), plan.partition(), plan.start(), plan.stop());
    ensure(accepted == (TOPIC, 2, 120, 160), || {
        format!("the example plan came back as {accepted:?}")
    })?;
    Ok(format!(
        "refused: same group, empty range, stop before start, negative offset; accepted [{}, {}) on {}[{}]",
        plan.start(),
        plan.stop(),
        plan.topic(),
        plan.partition()
    ))
}

pub(crate) fn stop_beyond_end(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(150, records(120..150))?;
    match replay(sys, &mut rig, limits(2_000, 200))? {
        Err(ReplayError {
            kind:
                ReplayErrorKind::StopBeyondEnd {
                    stop: 160,
                    end: 150,
                },
            ..
        }) => {}
        other => return Err(unexpected("StopBeyondEnd", other)),
    }
    let log = entries(&rig.log);
    let delivered = rig.consumer.delivered;
    ensure(log == ["end"] && delivered == 0, || {
        format!("the consumer did more than read the end offset: {log:?}, {delivered} records read")
    })?;
    Ok("stop 160 > captured end 150: refused before seek; commits=none".to_owned())
}

pub(crate) fn gap(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records([120, 121, 123, 124]))?;
    let committed = match replay(sys, &mut rig, limits(2_000, 200))? {
        Err(ReplayError {
            kind:
                ReplayErrorKind::Gap {
                    expected: 122,
                    got: 123,
                },
            committed: Some(committed),
            ..
        }) => committed,
        other => return Err(unexpected("a gap at 122", other)),
    };
    let commits = commits(&rig.log);
    ensure(commits == ["commit 121", "commit 122"], || {
        format!("commits {commits:?}")
    })?;
    Ok(format!("gap: expected 122, got 123; committed={committed}"))
}

pub(crate) fn foreign_partition(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let mut script = records([120]);
    script.push_back(Some(record(3, 121, "evt-other")));
    let mut rig = rig(200, script)?;
    let committed = match replay(sys, &mut rig, limits(2_000, 200))? {
        Err(ReplayError {
            kind: ReplayErrorKind::ForeignRecord { partition: 3, .. },
            committed: Some(committed),
            ..
        }) => committed,
        other => return Err(unexpected("a foreign record", other)),
    };
    let rows = rig.rows()?;
    ensure(rows == 1, || {
        format!("{rows} rows; the foreign record must not be applied")
    })?;
    ensure(committed == 121, || {
        format!("committed {committed}; the record before the foreign one is durable at 121")
    })?;
    Ok(format!(
        "record from partition 3 refused; committed={committed}; rows={rows}"
    ))
}

pub(crate) fn idle_before_stop(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records(120..130))?;
    let committed = match replay(sys, &mut rig, limits(5_000, 100))? {
        Err(ReplayError {
            kind: ReplayErrorKind::Idle { .. },
            committed,
            ..
        }) => committed,
        other => return Err(unexpected("idle before stop", other)),
    };
    ensure(committed == Some(130), || {
        format!("committed {committed:?}, expected 130")
    })?;
    let rows = rig.rows()?;
    ensure(rows == 10, || {
        format!("{rows} rows for the 10 records that arrived")
    })?;
    Ok(format!(
        "idle before stop 160: error, not success; committed=130; rows={rows}"
    ))
}

pub(crate) fn deadline(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records(120..160))?;
    rig.consumer.delay = Duration::from_millis(20);
    let committed = match replay(sys, &mut rig, limits(250, 5_000))? {
        Err(ReplayError {
            kind: ReplayErrorKind::Deadline { .. },
            committed,
            ..
        }) => committed.unwrap_or(-1),
        other => return Err(unexpected("the deadline", other)),
    };
    let rows = rig.rows()?;
    ensure(committed > 120 && committed < 160, || {
        format!("committed {committed}, expected within (120, 160)")
    })?;
    ensure(committed - 120 == rows as i64, || {
        format!("committed {committed} but {rows} rows were applied")
    })?;
    Ok(
        "deadline before stop 160: error, not success; committed offset = start + rows applied"
            .to_owned(),
    )
}

pub(crate) fn commit_after_apply(sys: &dyn System, _: &ProbeContext) -> Result<String, ProbeError> {
    // Two redeliveries of earlier event ids inside the range.
    let in_range: Vec<(i64, String)> = (120..158)
        .map(|o| (o, format!("evt-{o}")))
        .chain([(158, "evt-120".to_owned()), (159, "evt-121".to_owned())])
        .collect();
    let mut script: VecDeque<Option<ReplayRecord>> = in_range
        .iter()
        .map(|(o, id)| Some(record(2, *o, id)))
        .collect();
    script.extend(records(160..170)); // past stop: must not be applied
    let mut rig = rig(200, script)?;
    let summary = replay(sys, &mut rig, limits(5_000, 500))?
        .map_err(|e| unexpected("a complete replay", e))?;
    // Every entry: the end offset, the seek to start, then each record's effect followed by
    // the commit of the offset after it.
    let mut expected = vec!["end".to_owned(), "seek 2@120".to_owned()];
    for (offset, id) in &in_range {
        expected.push(format!("apply {id}"));
        expected.push(format!("commit {}", offset + 1));
    }
    let log = entries(&rig.log);
    if let Some(at) = (0..log.len().max(expected.len())).find(|&i| log.get(i) != expected.get(i)) {
        return Err(ProbeError::failed(format!(
            "entry {at} of the replay's log is {:?} where {:?} belongs (an effect, then the commit after it); the log: {log:?}",
            log.get(at),
            expected.get(at)
        )));
    }
    let rows = rig.rows()?;
    let counts = (
        summary.counters.records,
        summary.counters.inserted,
        summary.counters.duplicates,
        rows,
        summary.final_offset,
    );
    ensure(counts == (40, 38, 2, 38, 160), || {
        format!("(records, inserted, duplicates, rows, final) = {counts:?}; expected (40, 38, 2, 38, 160)")
    })?;
    Ok(format!(
        "records={} inserted={} duplicates={} rows={rows}; every commit after its effect; final={}",
        summary.counters.records,
        summary.counters.inserted,
        summary.counters.duplicates,
        summary.final_offset
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::system::Ticketflow;
    use crate::checks::testing::{
        assert_catches, sqlite, Check, Naive, PastStop, Rules, SeeksFirst,
    };

    type Plan = fn(PartitionRequest<'_>) -> Result<ReplayPlan, PlanError>;

    /// The real system but for plan validation.
    struct BrokenPlan(Plan);

    impl System for BrokenPlan {
        fn plan(&self, request: PartitionRequest<'_>) -> Result<ReplayPlan, PlanError> {
            (self.0)(request)
        }
    }

    fn without(change: fn(&mut Rules)) -> Naive {
        let mut rules = Rules::ALL;
        change(&mut rules);
        Naive(rules)
    }

    const CHECKS: [Check; 7] = [
        plan_validation,
        stop_beyond_end,
        gap,
        foreign_partition,
        idle_before_stop,
        deadline,
        commit_after_apply,
    ];

    #[test]
    fn every_contract_check_passes_on_ticketflow_and_on_a_replay_that_keeps_every_rule() {
        let ctx = sqlite();
        for check in CHECKS {
            check(&Ticketflow, &ctx).unwrap();
            check(&Naive(Rules::ALL), &ctx).unwrap();
        }
    }

    #[test]
    fn l30_03_fails_when_validation_lets_a_bad_plan_through() {
        let same_group = BrokenPlan(|r| {
            let replay_group = if r.live_group == r.replay_group {
                "another"
            } else {
                r.replay_group
            };
            ReplayPlan::new(PartitionRequest { replay_group, ..r })
        });
        let empty = BrokenPlan(|r| {
            ReplayPlan::new(PartitionRequest {
                stop: r.stop.max(r.start + 1),
                ..r
            })
        });
        let negative = BrokenPlan(|r| {
            ReplayPlan::new(PartitionRequest {
                start: r.start.max(0),
                ..r
            })
        });
        let swaps = BrokenPlan(|r| {
            ReplayPlan::new(PartitionRequest {
                start: r.start.min(r.stop),
                stop: r.start.max(r.stop),
                ..r
            })
        });
        let closed = BrokenPlan(|r| {
            ReplayPlan::new(PartitionRequest {
                stop: r.stop + 1,
                ..r
            })
        });
        let first_partition =
            BrokenPlan(|r| ReplayPlan::new(PartitionRequest { partition: 0, ..r }));
        assert_catches(
            plan_validation,
            sqlite,
            &[
                (&same_group, "same group: Ok("),
                (&empty, "empty range: Ok("),
                (&negative, "negative start: Ok("),
                (&swaps, "stop before start: Ok("),
                (&closed, "empty range: Ok("),
                (
                    &first_partition,
                    "the example plan came back as (\"ticketflow.audit.v1\", 0, 120, 160)",
                ),
            ],
        );
    }

    #[test]
    fn l30_04_fails_when_stop_beyond_end_is_not_refused_or_refused_after_seeking() {
        assert_catches(
            stop_beyond_end,
            sqlite,
            &[
                (
                    &without(|r| r.end_before_seek = false),
                    "expected StopBeyondEnd",
                ),
                (&SeeksFirst, "[\"seek 2@120\", \"end\"]"),
            ],
        );
    }

    /// L30-05 to L30-08: each check, on a replay that drops the rule it is about.
    #[test]
    fn l30_05_to_08_fail_when_a_gap_a_foreign_record_idling_or_the_deadline_passes_unnoticed() {
        let cases: [(Check, Naive, &str); 4] = [
            (
                gap,
                without(|r| r.contiguous = false),
                "expected a gap at 122",
            ),
            (
                foreign_partition,
                without(|r| r.own_partition = false),
                "expected a foreign record",
            ),
            (
                idle_before_stop,
                without(|r| r.idle_is_error = false),
                "expected idle before stop, got Ok(",
            ),
            (
                deadline,
                without(|r| r.deadline = false),
                "expected the deadline, got Ok(",
            ),
        ];
        for (check, broken, needle) in cases {
            assert_catches(check, sqlite, &[(&broken, needle)]);
        }
    }

    #[test]
    fn l30_09_fails_when_a_commit_comes_before_its_effect_or_the_replay_runs_past_stop() {
        assert_catches(
            commit_after_apply,
            sqlite,
            &[
                (
                    &without(|r| r.commit_after_effect = false),
                    "entry 2 of the replay's log is Some(\"commit 121\") where Some(\"apply evt-120\") belongs",
                ),
                (
                    &PastStop::Inclusive,
                    "entry 82 of the replay's log is Some(\"apply evt-160\")",
                ),
                // The first entries are checked too: a replay that seeks before reading the end.
                (&SeeksFirst, "entry 0"),
            ],
        );
    }
}
