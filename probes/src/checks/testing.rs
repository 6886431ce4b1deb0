//! What the checks' tests share: contexts on the real backends (SQLite in memory, the test
//! suite's PostgreSQL, the embedded mock cluster), the verdict a check returned, and broken
//! parts to run the checks on: a rewired store, a replay that keeps only some of its rules,
//! a replay that reads past stop.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ticketflow::event::AuditEvent;
use ticketflow::replay::{
    run_bounded_replay, PartitionRequest, ReplayConsumer, ReplayError, ReplayErrorKind,
    ReplayLimits, ReplayPlan, ReplayRecord, ReplaySummary,
};
use ticketflow::store::{AuditStore, StoreError};
use ticketflow::KafkaTarget;

use super::system::{System, Ticketflow};
use crate::context::{Cancel, DbTarget, ProbeContext, ProbeError};
use crate::live::{LiveStore, TicketKey};

/// A context on in-memory SQLite and the embedded mock cluster, its run id unique in the process.
pub(crate) fn sqlite() -> ProbeContext {
    context(DbTarget::SqliteMemory)
}

/// One context per SQL backend the test suite provides: SQLite always, PostgreSQL from
/// `LESSONPROBE_TEST_POSTGRES` (required in CI, else skipped saying why).
#[track_caller]
pub(crate) fn sql_backends() -> Vec<ProbeContext> {
    let mut contexts = vec![sqlite()];
    if let Some(url) = lessonprobe_testkit::services::postgres() {
        contexts.push(context(DbTarget::Postgres(url)));
    }
    contexts
}

fn context(db: DbTarget) -> ProbeContext {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    ProbeContext {
        db,
        kafka: KafkaTarget::Embedded,
        deadline: Duration::from_secs(60),
        run_id: format!(
            "unit-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ),
        cancel: Cancel::new(),
    }
}

/// Panics unless `result` is a FAIL (a claim that did not hold) whose message holds `needle`.
#[track_caller]
pub(crate) fn assert_fails(result: Result<String, ProbeError>, needle: &str) {
    match result {
        Err(e) if e.is_failure() => {
            assert!(
                e.to_string().contains(needle),
                "FAIL, but not for {needle:?}: {e}"
            )
        }
        Err(e) => panic!("expected FAIL ({needle}), got ERROR: {e}"),
        Ok(output) => panic!("expected FAIL ({needle}), got PASS: {output}"),
    }
}

/// A check as the registry runs it: on a system, in a case's context.
pub(crate) type Check = fn(&dyn System, &ProbeContext) -> Result<String, ProbeError>;

/// Panics unless `check` passes on the real ticketflow and is a FAIL on each broken system for
/// the reason given (a substring of its message); each run gets a context from `context`. The
/// real ticketflow's output, for a test that checks it too.
#[track_caller]
pub(crate) fn assert_catches(
    check: Check,
    context: impl Fn() -> ProbeContext,
    broken: &[(&dyn System, &str)],
) -> String {
    let passed = check(&Ticketflow, &context()).unwrap();
    for (system, needle) in broken {
        assert_fails(check(*system, &context()), needle);
    }
    passed
}

/// The real store of a case, with parts of it replaced: the broken stores of the tests.
pub(crate) struct Rewired {
    inner: Box<dyn LiveStore>,
    /// Replaces `apply_once`.
    apply_once: Option<ApplyOnce>,
    /// `Some`: the ticket projection is kept here instead, each version overwriting the last
    /// (no business version check).
    unversioned: Option<HashMap<(String, String), i64>>,
}

pub(crate) type ApplyOnce = fn(&mut dyn LiveStore, &AuditEvent) -> Result<bool, StoreError>;

/// The real system but for the store, whose `apply_once` is `apply_once` and whose projection
/// has no version check when `unversioned`.
pub(crate) struct BrokenStore {
    pub apply_once: Option<ApplyOnce>,
    pub unversioned: bool,
}

impl System for BrokenStore {
    fn open_store(&self, ctx: &ProbeContext) -> Result<Box<dyn LiveStore>, ProbeError> {
        Ok(Box::new(Rewired {
            inner: ctx.open_live_store()?,
            apply_once: self.apply_once,
            unversioned: self.unversioned.then(HashMap::new),
        }))
    }
}

impl AuditStore for Rewired {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        match self.apply_once {
            Some(apply) => apply(self.inner.as_mut(), event),
            None => self.inner.apply_once(event),
        }
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        self.inner.audit_rows()
    }
}

impl LiveStore for Rewired {
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        self.inner.apply_live(event)
    }
    fn business_counts(&mut self) -> Result<(u64, u64), StoreError> {
        self.inner.business_counts()
    }
    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError> {
        self.inner.forget_audit_rows(from, to)
    }
    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        match &mut self.unversioned {
            Some(tickets) => {
                let key = (event.tenant_id.clone(), event.ticket_id.clone());
                tickets.insert(key, event.version().unwrap_or(0));
                Ok(true)
            }
            None => self.inner.project_ticket(event),
        }
    }
    fn ticket_version(&mut self, ticket: TicketKey<'_>) -> Result<Option<i64>, StoreError> {
        match &self.unversioned {
            Some(tickets) => Ok(tickets
                .get(&(ticket.tenant_id.to_owned(), ticket.ticket_id.to_owned()))
                .copied()),
            None => self.inner.ticket_version(ticket),
        }
    }
}

/// Which of the replay's rules a [`Naive`] replay keeps.
#[derive(Clone, Copy)]
pub(crate) struct Rules {
    /// Capture the end offset and refuse `stop > end`, before seeking.
    pub end_before_seek: bool,
    /// Fail on a record at any offset but the next expected one.
    pub contiguous: bool,
    /// Fail on a record of another topic or partition.
    pub own_partition: bool,
    /// Going idle before stop is an error (else the replay ends there, "done").
    pub idle_is_error: bool,
    /// The wall-clock deadline ends the replay as an error.
    pub deadline: bool,
    /// Commit a record's next offset only after its effect returned.
    pub commit_after_effect: bool,
}

impl Rules {
    pub const ALL: Rules = Rules {
        end_before_seek: true,
        contiguous: true,
        own_partition: true,
        idle_is_error: true,
        deadline: true,
        commit_after_effect: true,
    };
}

/// The real system but for the replay: a plain one-record-at-a-time replay that keeps only
/// the rules it is given. With [`Rules::ALL`] it passes every replay check.
pub(crate) struct Naive(pub Rules);

impl System for Naive {
    fn replay(
        &self,
        plan: &ReplayPlan,
        limits: ReplayLimits,
        consumer: &mut dyn ReplayConsumer,
        store: &mut dyn AuditStore,
    ) -> Result<ReplaySummary, ReplayError> {
        let started = Instant::now();
        self.position(plan, consumer)?;
        let mut summary = ReplaySummary {
            final_offset: plan.start(),
            ..ReplaySummary::default()
        };
        while summary.final_offset < plan.stop() {
            let Some(record) = self.next_record(plan, limits, started, consumer, &summary)? else {
                return Ok(summary);
            };
            let next = record.offset + 1;
            let applied = self.apply(plan, &record, &summary, consumer, store)?;
            summary.counters.records += 1;
            if applied {
                summary.counters.inserted += 1;
            } else {
                summary.counters.duplicates += 1;
            }
            summary.final_offset = next;
        }
        Ok(summary)
    }
}

/// The replay's error on `plan`'s partition, `committed` being its last durable offset.
fn fail(plan: &ReplayPlan, committed: Option<i64>, kind: ReplayErrorKind) -> ReplayError {
    ReplayError {
        topic: plan.topic().to_owned(),
        partition: plan.partition(),
        committed,
        kind,
    }
}

#[allow(clippy::result_large_err)] // ticketflow's own error, as its replay returns it
impl Naive {
    /// Seeks to the plan's start; first, if the rules say so, captures the end offset and
    /// refuses `stop > end`.
    fn position(
        &self,
        plan: &ReplayPlan,
        consumer: &mut dyn ReplayConsumer,
    ) -> Result<(), ReplayError> {
        let (topic, partition) = (plan.topic(), plan.partition());
        if self.0.end_before_seek {
            let end = consumer
                .end_offset(topic, partition)
                .map_err(|e| fail(plan, None, ReplayErrorKind::Consumer(e)))?;
            if plan.stop() > end {
                return Err(fail(
                    plan,
                    None,
                    ReplayErrorKind::StopBeyondEnd {
                        stop: plan.stop(),
                        end,
                    },
                ));
            }
        }
        consumer
            .seek(topic, partition, plan.start())
            .map_err(|e| fail(plan, None, ReplayErrorKind::Consumer(e)))
    }

    /// The next record, checked as the rules say (deadline, idle, partition, contiguity);
    /// `None` when the partition went idle and the rules end the replay there, done.
    fn next_record(
        &self,
        plan: &ReplayPlan,
        limits: ReplayLimits,
        started: Instant,
        consumer: &mut dyn ReplayConsumer,
        summary: &ReplaySummary,
    ) -> Result<Option<ReplayRecord>, ReplayError> {
        let rules = self.0;
        let committed = Some(summary.final_offset);
        let fail = |kind| fail(plan, committed, kind);
        if rules.deadline && started.elapsed() >= limits.deadline {
            return Err(fail(ReplayErrorKind::Deadline {
                deadline: limits.deadline,
                stop: plan.stop(),
            }));
        }
        let record = consumer
            .poll(limits.idle_timeout)
            .map_err(|e| fail(ReplayErrorKind::Consumer(e)))?;
        let Some(record) = record else {
            if rules.idle_is_error {
                return Err(fail(ReplayErrorKind::Idle {
                    idle: limits.idle_timeout,
                    stop: plan.stop(),
                }));
            }
            return Ok(None);
        };
        if rules.own_partition
            && (record.topic != plan.topic() || record.partition != plan.partition())
        {
            return Err(fail(ReplayErrorKind::ForeignRecord {
                topic: record.topic,
                partition: record.partition,
            }));
        }
        if rules.contiguous && record.offset != summary.final_offset {
            return Err(fail(ReplayErrorKind::Gap {
                expected: summary.final_offset,
                got: record.offset,
            }));
        }
        Ok(Some(record))
    }

    /// Applies `record`'s event once, committing its next offset after the effect returned
    /// or, if the rules drop that one, before; whether the event was new.
    fn apply(
        &self,
        plan: &ReplayPlan,
        record: &ReplayRecord,
        summary: &ReplaySummary,
        consumer: &mut dyn ReplayConsumer,
        store: &mut dyn AuditStore,
    ) -> Result<bool, ReplayError> {
        let after = self.0.commit_after_effect;
        let committed = Some(summary.final_offset);
        let fail = |kind| fail(plan, committed, kind);
        let event = AuditEvent::decode(&record.payload).map_err(|source| {
            fail(ReplayErrorKind::Undecodable {
                offset: record.offset,
                source,
            })
        })?;
        let commit = |consumer: &mut dyn ReplayConsumer| {
            consumer
                .commit(plan.topic(), plan.partition(), record.offset + 1)
                .map_err(|e| fail(ReplayErrorKind::Consumer(e)))
        };
        if !after {
            commit(consumer)?;
        }
        let applied = store.apply_once(&event).map_err(|source| {
            fail(ReplayErrorKind::Effect {
                offset: record.offset,
                source,
            })
        })?;
        if after {
            commit(consumer)?;
        }
        Ok(applied)
    }
}

/// The real system but for the replay, which does not stop at the plan's stop: it treats the
/// range as closed, `[start, stop]`, or reads on to the end offset it finds.
pub(crate) enum PastStop {
    Inclusive,
    ToEnd,
}

impl System for PastStop {
    fn replay(
        &self,
        plan: &ReplayPlan,
        limits: ReplayLimits,
        consumer: &mut dyn ReplayConsumer,
        store: &mut dyn AuditStore,
    ) -> Result<ReplaySummary, ReplayError> {
        let stop = match self {
            PastStop::Inclusive => plan.stop() + 1,
            PastStop::ToEnd => consumer
                .end_offset(plan.topic(), plan.partition())
                .map_or(plan.stop(), |end| end.max(plan.stop())),
        };
        let wider = ReplayPlan::new(PartitionRequest {
            live_group: plan.live_group(),
            replay_group: plan.replay_group(),
            topic: plan.topic(),
            partition: plan.partition(),
            start: plan.start(),
            stop,
        })
        .unwrap_or_else(|_| plan.clone());
        run_bounded_replay(&wider, limits, consumer, store)
    }
}

/// The real system but for the replay, which positions its consumer at start before the real
/// replay begins.
pub(crate) struct SeeksFirst;

impl System for SeeksFirst {
    fn replay(
        &self,
        plan: &ReplayPlan,
        limits: ReplayLimits,
        consumer: &mut dyn ReplayConsumer,
        store: &mut dyn AuditStore,
    ) -> Result<ReplaySummary, ReplayError> {
        let _ = consumer.seek(plan.topic(), plan.partition(), plan.start());
        run_bounded_replay(plan, limits, consumer, store)
    }
}
