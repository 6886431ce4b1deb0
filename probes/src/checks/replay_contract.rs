//! Probes that pin the contract of `run_bounded_replay` with a scripted in-process consumer.
//! The same primitive runs over a real broker in the Kafka probes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::context::{ensure, ProbeContext, ProbeError};
use ticketflow::event::AuditEvent;
use ticketflow::replay::{
    run_bounded_replay, ConsumerError, PlanError, ReplayConsumer, ReplayError, ReplayErrorKind,
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
        },
        store: Logged {
            inner,
            log: log.clone(),
        },
        log,
    })
}

fn example_plan() -> Result<ReplayPlan, ProbeError> {
    ReplayPlan::new(LIVE, REPLAY, TOPIC, 2, 120, 160)
        .map_err(|e| ProbeError::failed(format!("example plan refused: {e}")))
}

fn limits(deadline_ms: u64, idle_ms: u64) -> ReplayLimits {
    ReplayLimits {
        deadline: Duration::from_millis(deadline_ms),
        idle_timeout: Duration::from_millis(idle_ms),
    }
}

/// The example plan replayed through the rig: the replay's own result, or why it could not start.
fn replay(
    rig: &mut Rig,
    limits: ReplayLimits,
) -> Result<Result<ReplaySummary, ReplayError>, ProbeError> {
    let plan = example_plan()?;
    Ok(run_bounded_replay(
        &plan,
        limits,
        &mut rig.consumer,
        &mut rig.store,
    ))
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

pub fn plan_validation(_: &ProbeContext) -> Result<String, ProbeError> {
    let same = ReplayPlan::new(LIVE, LIVE, TOPIC, 2, 120, 160);
    ensure(same == Err(PlanError::SameGroup(LIVE.into())), || {
        format!("same group: {same:?}")
    })?;
    let empty = ReplayPlan::new(LIVE, REPLAY, TOPIC, 2, 160, 160);
    ensure(matches!(empty, Err(PlanError::Empty { .. })), || {
        format!("empty range: {empty:?}")
    })?;
    let backwards = ReplayPlan::new(LIVE, REPLAY, TOPIC, 2, 160, 120);
    ensure(matches!(backwards, Err(PlanError::Empty { .. })), || {
        format!("stop before start: {backwards:?}")
    })?;
    let negative = ReplayPlan::new(LIVE, REPLAY, TOPIC, 2, -1, 160);
    ensure(matches!(negative, Err(PlanError::Negative { .. })), || {
        format!("negative start: {negative:?}")
    })?;
    let plan = example_plan()?;
    Ok(format!(
        "refused: same group, empty range, stop before start, negative offset; accepted [{}, {}) on {}[{}]",
        plan.start(),
        plan.stop(),
        plan.topic(),
        plan.partition()
    ))
}

pub fn stop_beyond_end(_: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(150, records(120..150))?;
    match replay(&mut rig, limits(2_000, 200))? {
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
    ensure(log == ["end"], || {
        format!("the consumer did more than read the end offset: {log:?}")
    })?;
    Ok("stop 160 > captured end 150: refused before seek; commits=none".to_owned())
}

pub fn gap(_: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records([120, 121, 123, 124]))?;
    let committed = match replay(&mut rig, limits(2_000, 200))? {
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

pub fn foreign_partition(_: &ProbeContext) -> Result<String, ProbeError> {
    let mut script = records([120]);
    script.push_back(Some(record(3, 121, "evt-other")));
    let mut rig = rig(200, script)?;
    let committed = match replay(&mut rig, limits(2_000, 200))? {
        Err(ReplayError {
            kind: ReplayErrorKind::ForeignRecord { partition: 3, .. },
            committed: Some(committed),
            ..
        }) => committed,
        other => return Err(unexpected("a foreign record", other)),
    };
    let rows = rig
        .store
        .audit_rows()
        .map_err(|e| ProbeError::broken(e.to_string()))?;
    ensure(rows == 1, || {
        format!("{rows} rows; the foreign record must not be applied")
    })?;
    Ok(format!(
        "record from partition 3 refused; committed={committed}; rows={rows}"
    ))
}

pub fn idle_before_stop(_: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records(120..130))?;
    let committed = match replay(&mut rig, limits(5_000, 100))? {
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
    let rows = rig
        .store
        .audit_rows()
        .map_err(|e| ProbeError::broken(e.to_string()))?;
    Ok(format!(
        "idle before stop 160: error, not success; committed=130; rows={rows}"
    ))
}

pub fn deadline(_: &ProbeContext) -> Result<String, ProbeError> {
    let mut rig = rig(200, records(120..160))?;
    rig.consumer.delay = Duration::from_millis(20);
    let committed = match replay(&mut rig, limits(250, 5_000))? {
        Err(ReplayError {
            kind: ReplayErrorKind::Deadline { .. },
            committed,
            ..
        }) => committed.unwrap_or(-1),
        other => return Err(unexpected("the deadline", other)),
    };
    let rows = rig
        .store
        .audit_rows()
        .map_err(|e| ProbeError::broken(e.to_string()))?;
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

pub fn commit_after_apply(_: &ProbeContext) -> Result<String, ProbeError> {
    // Two redeliveries of earlier event ids inside the range.
    let mut script = records(120..158);
    script.push_back(Some(record(2, 158, "evt-120")));
    script.push_back(Some(record(2, 159, "evt-121")));
    script.extend(records(160..170)); // past stop: must not be read
    let mut rig = rig(200, script)?;
    let summary =
        replay(&mut rig, limits(5_000, 500))?.map_err(|e| unexpected("a complete replay", e))?;
    let log = entries(&rig.log);
    let mut pending_apply = false;
    for entry in &log[2..] {
        if entry.starts_with("apply") {
            ensure(!pending_apply, || {
                format!("two effects without a commit between: {log:?}")
            })?;
            pending_apply = true;
        } else {
            ensure(pending_apply, || {
                format!("{entry} before its effect: {log:?}")
            })?;
            pending_apply = false;
        }
    }
    ensure(log.last().map(String::as_str) == Some("commit 160"), || {
        format!("last entry {:?}", log.last())
    })?;
    let rows = rig
        .store
        .audit_rows()
        .map_err(|e| ProbeError::broken(e.to_string()))?;
    Ok(format!(
        "records={} inserted={} duplicates={} rows={rows}; every commit after its effect; final={}",
        summary.records, summary.inserted, summary.duplicates, summary.final_offset
    ))
}
