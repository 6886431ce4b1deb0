//! Probes of lesson 30 over a real Kafka protocol (the embedded mock cluster or `--kafka`):
//! the live group, an independent replay group, and offsets read back from the broker.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::system::System;
use crate::context::{ensure, ProbeContext, ProbeError};
use crate::live::{run_live_consumer, LiveStore};
use ticketflow::day::{self, DaySpec, YESTERDAY};
use ticketflow::event::AuditEvent;
use ticketflow::kafka::{close_consumer, committed_offsets, time_windows, AutoLookup, Broker};
use ticketflow::replay::{
    ConsumerError, PartitionRequest, ReplayConsumer, ReplayError, ReplayErrorKind, ReplayLimits,
    ReplayPlan, ReplayRecord, ReplaySummary,
};
use ticketflow::store::{AuditStore, StoreError};

fn broken<E: std::fmt::Display>(e: E) -> ProbeError {
    ProbeError::broken(e.to_string())
}

/// Per-run names, so runs never meet on a shared broker.
struct Names {
    topic: String,
    live: String,
    replay: String,
}

impl Names {
    /// The plan of `[start, stop)` on `partition` of this run's topic, by this run's groups.
    fn plan(&self, partition: i32, start: i64, stop: i64) -> Result<ReplayPlan, ProbeError> {
        ReplayPlan::new(PartitionRequest {
            live_group: &self.live,
            replay_group: &self.replay,
            topic: &self.topic,
            partition,
            start,
            stop,
        })
        .map_err(broken)
    }
}

fn names(ctx: &ProbeContext, what: &str) -> Names {
    let suffix = &ctx.run_id;
    Names {
        topic: format!("ticketflow.audit.v1.{what}.{suffix}"),
        live: format!("ticketflow-audit-v1.{what}.{suffix}"),
        replay: format!("ticketflow-replay-20260922.{what}.{suffix}"),
    }
}

fn connect(ctx: &ProbeContext) -> Result<Broker, ProbeError> {
    Broker::for_target(&ctx.kafka, ctx.deadline).map_err(broken)
}

fn limits(started: Instant, ctx: &ProbeContext) -> ReplayLimits {
    ReplayLimits {
        deadline: ctx
            .deadline
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(1)),
        idle_timeout: Duration::from_secs(5).min(ctx.deadline),
    }
}

/// A probe's replays: by the system under test, over its broker, within the probe's deadline.
struct Replays<'a> {
    sys: &'a dyn System,
    broker: &'a Broker,
    ctx: &'a ProbeContext,
    started: Instant,
}

impl Replays<'_> {
    /// Runs `plan` through a fresh consumer of its replay group, dropped once the replay
    /// returns; a replay that stops with an error fails the probe, the error introduced by `what`.
    fn run(
        &self,
        plan: &ReplayPlan,
        store: &mut dyn AuditStore,
        what: &str,
    ) -> Result<ReplaySummary, ProbeError> {
        let mut consumer = self
            .sys
            .replay_consumer(self.broker, &plan.group())
            .map_err(broken)?;
        let limits = limits(self.started, self.ctx);
        self.sys
            .replay(plan, limits, consumer.as_mut(), store)
            .map_err(|e| ProbeError::failed(format!("{what}: {e}")))
    }
}

/// A broker with a topic of one partition, its names those of `what` in this run, holding `n`
/// sample events at offsets 0..n.
fn one_partition(ctx: &ProbeContext, what: &str, n: usize) -> Result<(Broker, Names), ProbeError> {
    let mut broker = connect(ctx)?;
    let names = names(ctx, what);
    broker.create_topic(&names.topic, 1).map_err(broken)?;
    load_simple(&broker, &names.topic, n)?;
    Ok((broker, names))
}

/// `n` sample events on one partition, offsets 0..n.
fn load_simple(broker: &Broker, topic: &str, n: usize) -> Result<(), ProbeError> {
    let events: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| {
            let e = AuditEvent::sample_with_id(&format!("evt-{i}"));
            (e.key(), e.to_json())
        })
        .collect();
    broker
        .produce(
            topic,
            events
                .iter()
                .enumerate()
                .map(|(i, (k, v))| (0, k.as_str(), v.as_slice(), day::FIRST_DAY_MS + i as i64)),
        )
        .map_err(broken)?;
    Ok(())
}

fn committed(
    broker: &Broker,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<Option<i64>>, ProbeError> {
    committed_offsets(broker, group, topic, partitions).map_err(broken)
}

/// The local form of the remote acceptance test.
pub(crate) fn bounded_replay_preserves_live_offsets(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let started = Instant::now();
    let mut broker = connect(ctx)?;
    let n = names(ctx, "accept");
    let partitions = broker.create_topic(&n.topic, 3).map_err(broken)?;
    let parts: Vec<i32> = (0..partitions).collect();
    let records = day::generate(&DaySpec::default());
    broker
        .produce_day(&n.topic, partitions, &records)
        .map_err(broken)?;

    // The live service consumes everything, with its business effects, and commits.
    let mut store = sys.open_store(ctx)?;
    run_live_consumer(
        &broker,
        &n.live,
        &n.topic,
        &parts,
        store.as_mut(),
        ctx.deadline,
    )?;
    let live_before = committed(&broker, &n.live, &n.topic, &parts)?;
    let business_before = store.business_counts().map_err(broken)?;

    // The audit projection of yesterday is lost; the replay must repair it.
    let from = "2026-09-22T00:00:00";
    let to = "2026-09-23T00:00:00";
    let lost = store.forget_audit_rows(from, to).map_err(broken)?;

    let mut lookup = AutoLookup::new(&broker);
    let mut replayed = 0u64;
    let mut inserted = 0u64;
    let mut stops = Vec::new();
    // Every partition's window in one look-up (one reading pass on a broker that does not
    // answer timestamp lookups).
    let windows = time_windows(
        &broker,
        &mut lookup,
        &n.topic,
        &parts,
        YESTERDAY.0,
        YESTERDAY.1,
    )
    .map_err(broken)?;
    let replays = Replays {
        sys,
        broker: &broker,
        ctx,
        started,
    };
    for (&p, window) in parts.iter().zip(windows) {
        let (start, stop) = window.range();
        if start == stop {
            continue;
        }
        let (low, high) = (window.log_start, window.end);
        ensure(low < start && stop < high, || {
            format!("partition {p}: yesterday [{start}, {stop}) is not inside [{low}, {high})")
        })?;
        let plan = n.plan(p, start, stop)?;
        let summary = replays.run(&plan, store.as_mut(), &format!("replay of partition {p}"))?;
        replayed += summary.counters.records;
        inserted += summary.counters.inserted;
        stops.push((p, stop));
    }
    ensure(stops.len() == parts.len(), || {
        format!(
            "yesterday found on {} of {} partitions",
            stops.len(),
            parts.len()
        )
    })?;

    let live_after = committed(&broker, &n.live, &n.topic, &parts)?;
    ensure(live_after == live_before, || {
        format!("live group offsets moved: {live_before:?} -> {live_after:?}")
    })?;
    let replay_offsets = committed(&broker, &n.replay, &n.topic, &parts)?;
    for ((p, stop), got) in stops.iter().zip(&replay_offsets) {
        ensure(*got == Some(*stop), || {
            format!("replay group on partition {p}: committed {got:?}, stop {stop}")
        })?;
    }
    let distinct: HashSet<&str> = records.iter().map(|r| r.event.event_id.as_str()).collect();
    let rows = store.audit_rows().map_err(broken)?;
    ensure(rows == distinct.len() as u64, || {
        format!(
            "{rows} audit rows for {} distinct event ids",
            distinct.len()
        )
    })?;
    ensure(inserted == lost, || {
        format!("replay inserted {inserted} rows; {lost} were lost")
    })?;
    ensure(replayed > inserted, || {
        format!("replayed {replayed} records, inserted {inserted}: the day's redeliveries should be duplicates")
    })?;
    let business_after = store.business_counts().map_err(broken)?;
    ensure(business_after == business_before, || {
        format!("notification/SLA counts changed: {business_before:?} -> {business_after:?}")
    })?;
    Ok("replay group committed stop on every partition; live group offsets unchanged; audit rows = distinct event_ids; notification and SLA counts unchanged".to_owned())
}

/// EX-30-02, executed.
pub(crate) fn earliest_does_not_rewind(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let started = Instant::now();
    let (broker, n) = one_partition(ctx, "earliest", 600)?;

    // The original group has processed up to 500.
    {
        let consumer = sys
            .group_consumer(&broker, &n.live, "earliest")
            .map_err(broken)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&n.topic, 0, Offset::Offset(500))
            .map_err(broken)?;
        consumer
            .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .map_err(|e| broker.error("committing 500", e))
            .map_err(broken)?;
        close_consumer(&consumer, broker.op_timeout);
    }
    // It restarts with auto.offset.reset=earliest.
    let first = {
        let consumer = sys
            .group_consumer(&broker, &n.live, "earliest")
            .map_err(broken)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&n.topic, 0, Offset::Stored)
            .map_err(broken)?;
        consumer.assign(&tpl).map_err(broken)?;
        let mut first = None;
        while first.is_none() && started.elapsed() < ctx.deadline {
            if let Some(m) = consumer.poll(Duration::from_millis(200)) {
                first = Some(m.map_err(broken)?.offset());
            }
        }
        close_consumer(&consumer, broker.op_timeout);
        first.ok_or_else(|| ProbeError::broken("the restarted group received nothing"))?
    };
    ensure(first == 500, || {
        format!("the restarted group began at {first}, not at its committed 500")
    })?;

    let replays = Replays {
        sys,
        broker: &broker,
        ctx,
        started,
    };
    let plan = n.plan(0, 100, 200)?;
    let mut store = sys.open_store(ctx)?;
    let summary = replays.run(&plan, store.as_mut(), "replay [100, 200)")?;
    let rows = store.audit_rows().map_err(broken)?;
    ensure(summary.counters.records == 100 && rows == 100, || {
        format!(
            "the replay of [100, 200) read {} records and left {rows} audit rows",
            summary.counters.records
        )
    })?;
    let original = committed(&broker, &n.live, &n.topic, &[0])?;
    let replay = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(original == [Some(500)], || {
        format!("original group now at {original:?}")
    })?;
    ensure(replay == [Some(200)], || {
        format!("replay group at {replay:?}")
    })?;
    Ok(format!(
        "restart with auto.offset.reset=earliest resumed at {first}; replay group read [100, 200): {} records, committed 200; original group still at 500",
        summary.counters.records
    ))
}

/// stop > captured end, over the broker: refused before seeking, nothing committed. "Before
/// seeking" is observed twice: the replay asked its consumer for the end offset and nothing
/// else, and the consumer itself, polled after the refusal, delivers nothing: it was never
/// assigned a position on the partition (see [`watch_quiet`] for how long it is watched).
pub(crate) fn stop_beyond_end(sys: &dyn System, ctx: &ProbeContext) -> Result<String, ProbeError> {
    let (broker, n) = one_partition(ctx, "beyond", 50)?;
    let plan = n.plan(0, 40, 60)?;
    let mut consumer = sys
        .replay_consumer(&broker, &plan.group())
        .map_err(broken)?;
    let mut store = sys.open_store(ctx)?;
    let started = Instant::now();
    let mut watched = Watched {
        inner: consumer.as_mut(),
        calls: Vec::new(),
    };
    match sys.replay(&plan, limits(started, ctx), &mut watched, store.as_mut()) {
        Err(ReplayError {
            kind: ReplayErrorKind::StopBeyondEnd { end: 50, .. },
            ..
        }) => {}
        other => {
            return Err(ProbeError::failed(format!(
                "expected stop beyond end 50, got {other:?}"
            )))
        }
    }
    let calls = watched.calls;
    ensure(calls == ["end_offset"], || {
        format!("before refusing, the replay asked its consumer for {calls:?}; only the end offset may be read")
    })?;
    watch_quiet(&broker, ctx, &n, consumer.as_mut())?;
    drop(consumer);
    let replay = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(replay == [None], || {
        format!("the replay group committed {replay:?}")
    })?;
    let rows = store.audit_rows().map_err(broken)?;
    ensure(rows == 0, || {
        format!("the refused replay left {rows} audit rows")
    })?;
    Ok(format!(
        "stop 60 > captured end 50: refused before seek; replay group committed=none; rows={rows}"
    ))
}

/// Polls the replay's consumer, refused before seeking, and fails if it delivers anything.
/// How long is measured, not guessed: at the same moment a control consumer is positioned on
/// the partition, and the replay's consumer is watched until the control delivered its first
/// record and as long again. Had the replay's consumer been positioned, it would have been so
/// since before the refusal, with a connection already up: it would deliver no later than the
/// control, which starts from nothing.
fn watch_quiet(
    broker: &Broker,
    ctx: &ProbeContext,
    n: &Names,
    consumer: &mut dyn ReplayConsumer,
) -> Result<(), ProbeError> {
    let watching = Instant::now();
    let control = broker
        .consumer(&format!("{}.control", n.replay), "error")
        .map_err(broken)?;
    let result = (|| {
        // Leaders known before the assignment, or a fresh client may wait for librdkafka's
        // one-second topic scan.
        control
            .fetch_metadata(Some(&n.topic), broker.op_timeout)
            .map_err(broken)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&n.topic, 0, Offset::Beginning)
            .map_err(broken)?;
        control.assign(&tpl).map_err(broken)?;
        let mut control_delivered = None;
        loop {
            if let Some(record) = consumer.poll(Duration::from_millis(2)).map_err(broken)? {
                return Err(ProbeError::failed(format!(
                    "the replay's consumer had been positioned before the refusal: polled afterwards, it delivered {}[{}]@{}",
                    record.topic, record.partition, record.offset
                )));
            }
            let watched = watching.elapsed();
            match control_delivered {
                Some(after) if watched >= 2 * after => return Ok(()),
                Some(_) => {}
                None => match control.poll(Duration::ZERO) {
                    Some(m) => {
                        m.map_err(broken)?;
                        control_delivered = Some(watched);
                    }
                    None if watched > ctx.deadline => {
                        return Err(ProbeError::broken(format!(
                            "a control consumer positioned on {}[0] delivered nothing within {:?}",
                            n.topic, ctx.deadline
                        )))
                    }
                    None => {}
                },
            }
        }
    })();
    close_consumer(&control, broker.op_timeout);
    result
}

/// Passes every call through to the replay's consumer and notes which were made.
struct Watched<'a> {
    inner: &'a mut dyn ReplayConsumer,
    calls: Vec<&'static str>,
}

impl ReplayConsumer for Watched<'_> {
    fn group_id(&self) -> &str {
        self.inner.group_id()
    }
    fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError> {
        self.calls.push("end_offset");
        self.inner.end_offset(topic, partition)
    }
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
        self.calls.push("seek");
        self.inner.seek(topic, partition, offset)
    }
    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
        self.calls.push("poll");
        self.inner.poll(timeout)
    }
    fn commit(&mut self, topic: &str, partition: i32, next: i64) -> Result<(), ConsumerError> {
        self.calls.push("commit");
        self.inner.commit(topic, partition, next)
    }
}

/// Fails with "database unavailable" on the `fail_at`-th apply (0-based).
struct FailsAt {
    inner: Box<dyn LiveStore>,
    applied: usize,
    fail_at: usize,
}

impl AuditStore for FailsAt {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        if self.applied == self.fail_at {
            return Err(StoreError::Unavailable("database unavailable".into()));
        }
        self.applied += 1;
        self.inner.apply_once(event)
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        self.inner.audit_rows()
    }
}

/// The SQL effect fails mid-range: the broker holds the offset after the last success, and a
/// rerun from there completes with no duplicates.
pub(crate) fn failure_mid_range(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let started = Instant::now();
    let (broker, n) = one_partition(ctx, "midfail", 50)?;
    let plan = n.plan(0, 0, 50)?;
    let mut failing = FailsAt {
        inner: sys.open_store(ctx)?,
        applied: 0,
        fail_at: 25,
    };
    let mut consumer = sys
        .replay_consumer(&broker, &plan.group())
        .map_err(broken)?;
    let committed_at =
        match sys.replay(&plan, limits(started, ctx), consumer.as_mut(), &mut failing) {
            Err(
                e @ ReplayError {
                    kind: ReplayErrorKind::Effect { offset: 25, .. },
                    ..
                },
            ) => {
                ensure(e.to_string().ends_with("database unavailable"), || {
                    format!("error changed: {e}")
                })?;
                e.committed
            }
            other => {
                return Err(ProbeError::failed(format!(
                    "expected the effect to fail at offset 25, got {other:?}"
                )))
            }
        };
    drop(consumer);
    let on_broker = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(on_broker == [Some(25)] && committed_at == Some(25), || {
        format!("after the failure the broker holds {on_broker:?}, the replay reported {committed_at:?}")
    })?;
    let mut store = failing.inner;
    let rows_after_failure = store.audit_rows().map_err(broken)?;
    ensure(rows_after_failure == 25, || {
        format!("{rows_after_failure} audit rows after the effect failed at offset 25")
    })?;

    let resume = on_broker[0].unwrap_or(0);
    let replays = Replays {
        sys,
        broker: &broker,
        ctx,
        started,
    };
    let plan = n.plan(0, resume, 50)?;
    let summary = replays.run(&plan, store.as_mut(), &format!("rerun from {resume}"))?;
    let rows = store.audit_rows().map_err(broken)?;
    let on_broker = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(
        rows == 50 && summary.counters.duplicates == 0 && on_broker == [Some(50)],
        || {
            format!(
                "after the rerun: rows {rows}, duplicates {}, committed {on_broker:?}",
                summary.counters.duplicates
            )
        },
    )?;
    Ok(format!(
        "effect failed at offset 25: broker committed=25, rows={rows_after_failure}; rerun from 25 completed: rows={rows}, duplicates={}, committed=50",
        summary.counters.duplicates
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use rdkafka::consumer::{BaseConsumer, CommitMode};
    use ticketflow::kafka::{KafkaError, KafkaReplayConsumer};
    use ticketflow::replay::ReplayGroup;

    use super::*;
    use crate::checks::testing::{
        assert_catches, sqlite, BrokenStore, Naive, PastStop, Rules, SeeksFirst,
    };

    type MakeConsumer = fn(&Broker, &ReplayGroup) -> Result<Box<dyn ReplayConsumer>, KafkaError>;

    /// The real system but for the replay's consumer.
    struct BrokenConsumer(MakeConsumer);

    impl System for BrokenConsumer {
        fn replay_consumer(
            &self,
            broker: &Broker,
            group: &ReplayGroup,
        ) -> Result<Box<dyn ReplayConsumer>, KafkaError> {
            (self.0)(broker, group)
        }
    }

    /// The real replay consumer with one thing done wrong.
    struct Altered {
        inner: KafkaReplayConsumer,
        fault: Fault,
    }

    enum Fault {
        /// Reads its partition's end by positioning itself on the partition first.
        PositionsForEnd,
        /// Says it belongs to this group while its client commits for another.
        ClaimsGroup(String),
    }

    impl ReplayConsumer for Altered {
        fn group_id(&self) -> &str {
            match &self.fault {
                Fault::ClaimsGroup(group) => group,
                Fault::PositionsForEnd => self.inner.group_id(),
            }
        }
        fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError> {
            if let Fault::PositionsForEnd = self.fault {
                self.inner.seek(topic, partition, 0)?;
            }
            self.inner.end_offset(topic, partition)
        }
        fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
            self.inner.seek(topic, partition, offset)
        }
        fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
            self.inner.poll(timeout)
        }
        fn commit(&mut self, topic: &str, partition: i32, next: i64) -> Result<(), ConsumerError> {
            self.inner.commit(topic, partition, next)
        }
    }

    /// The replay's consumer, reading its partition's end by positioning itself on the
    /// partition first.
    const POSITIONS_FOR_END: BrokenConsumer = BrokenConsumer(|broker, group| {
        Ok(Box::new(Altered {
            inner: KafkaReplayConsumer::new(broker, group)?,
            fault: Fault::PositionsForEnd,
        }))
    });

    /// A replay consumer whose client also commits on its own: `enable.auto.commit`, each
    /// record's offset stored as it is delivered.
    struct AutoCommitting {
        group: String,
        client: BaseConsumer,
        ends: KafkaReplayConsumer,
    }

    impl ReplayConsumer for AutoCommitting {
        fn group_id(&self) -> &str {
            &self.group
        }
        fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError> {
            self.ends.end_offset(topic, partition)
        }
        fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
                .and_then(|()| self.client.assign(&tpl))
                .map_err(|e| client_error("seek", e))
        }
        fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
            match self.client.poll(timeout) {
                None => Ok(None),
                Some(Err(e)) => Err(client_error("poll", e)),
                Some(Ok(m)) => Ok(Some(ReplayRecord {
                    topic: m.topic().to_owned(),
                    partition: m.partition(),
                    offset: m.offset(),
                    timestamp: m.timestamp().to_millis(),
                    key: m.key().map(<[u8]>::to_vec),
                    payload: m.payload().unwrap_or_default().to_vec(),
                })),
            }
        }
        fn commit(&mut self, topic: &str, partition: i32, next: i64) -> Result<(), ConsumerError> {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(topic, partition, Offset::Offset(next))
                .and_then(|()| self.client.commit(&tpl, CommitMode::Sync))
                .map_err(|e| client_error("commit", e))
        }
    }

    /// [`AutoCommitting`], its client committing every 100 ms.
    const AUTO_COMMITS: BrokenConsumer = BrokenConsumer(|broker, group| {
        let mut config = broker.config();
        config
            .set("group.id", group.as_str())
            .set("enable.auto.commit", "true")
            .set("auto.commit.interval.ms", "100")
            .set("enable.auto.offset.store", "true")
            .set("fetch.wait.max.ms", "50");
        let client = config
            .create()
            .map_err(|e| broker.error("creating an auto-committing consumer", e))?;
        Ok(Box::new(AutoCommitting {
            group: group.as_str().to_owned(),
            client,
            ends: KafkaReplayConsumer::new(broker, group)?,
        }))
    });

    /// A replay consumer that says it belongs to the replay group but commits for the live one.
    const COMMITS_FOR_LIVE_GROUP: BrokenConsumer = BrokenConsumer(|broker, group| {
        let live = group
            .as_str()
            .replace("ticketflow-replay-20260922", "ticketflow-audit-v1");
        // The live group's id passes as a replay group only by naming another live group.
        let disguised = ReplayGroup::new(&live, "someone-else")
            .map_err(|e| broker.error("disguising the live group", e))?;
        Ok(Box::new(Altered {
            inner: KafkaReplayConsumer::new(broker, &disguised)?,
            fault: Fault::ClaimsGroup(group.as_str().to_owned()),
        }))
    });

    fn client_error(what: &str, e: impl std::fmt::Display) -> ConsumerError {
        ConsumerError::Kafka(KafkaError {
            servers: "embedded".into(),
            what: what.into(),
            reason: e.to_string(),
        })
    }

    /// The real system but for restarting a group's consumer, which comes back under a new
    /// group id each time (as with a host name or random suffix in the id).
    struct RestartsInNewGroup;

    impl System for RestartsInNewGroup {
        fn group_consumer(
            &self,
            broker: &Broker,
            group: &str,
            reset: &str,
        ) -> Result<BaseConsumer, KafkaError> {
            static RESTARTS: AtomicU32 = AtomicU32::new(0);
            let n = RESTARTS.fetch_add(1, Ordering::Relaxed);
            broker.consumer(&format!("{group}.{n}"), reset)
        }
    }

    /// A store whose audit effect also notifies and counts SLA changes, as the live path does.
    const NOTIFYING: BrokenStore = BrokenStore {
        apply_once: Some(|store, event| store.apply_live(event)),
        unversioned: false,
    };

    #[test]
    fn l30_12_fails_when_the_replay_notifies_moves_the_live_group_or_runs_past_stop() {
        assert_catches(
            bounded_replay_preserves_live_offsets,
            sqlite,
            &[
                (&NOTIFYING, "notification/SLA counts changed"),
                (&COMMITS_FOR_LIVE_GROUP, "live group offsets moved"),
                (&PastStop::ToEnd, "replay group on partition 0: committed"),
            ],
        );
    }

    #[test]
    fn ex_30_02_fails_when_a_restart_rewinds_or_the_replay_leaves_its_range_or_group() {
        assert_catches(
            earliest_does_not_rewind,
            sqlite,
            &[
                (
                    &RestartsInNewGroup,
                    "the restarted group began at 0, not at its committed 500",
                ),
                (
                    &PastStop::ToEnd,
                    "the replay of [100, 200) read 500 records",
                ),
                (&COMMITS_FOR_LIVE_GROUP, "original group now at [Some(200)]"),
            ],
        );
    }

    #[test]
    fn l30_13_fails_when_the_consumer_is_positioned_before_the_refusal() {
        assert_catches(
            stop_beyond_end,
            sqlite,
            &[
                (
                    &SeeksFirst,
                    "before refusing, the replay asked its consumer for [\"seek\", \"end_offset\"]",
                ),
                // Seen only over Kafka: the replay called nothing but end_offset, yet the client
                // was assigned while answering it.
                (
                    &POSITIONS_FOR_END,
                    "polled afterwards, it delivered ticketflow.audit.v1.beyond.",
                ),
            ],
        );
    }

    #[test]
    fn l30_14_fails_when_an_offset_is_committed_before_its_effect_or_by_auto_commit() {
        let commits_first = Naive(Rules {
            commit_after_effect: false,
            ..Rules::ALL
        });
        assert_catches(
            failure_mid_range,
            sqlite,
            &[
                (
                    &commits_first,
                    "after the failure the broker holds [Some(26)]",
                ),
                // The auto-committer stores what it was delivered, however far the replay read
                // ahead.
                (&AUTO_COMMITS, "after the failure the broker holds [Some("),
            ],
        );
    }
}
