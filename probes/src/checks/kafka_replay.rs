//! Probes of lesson 30 over a real Kafka protocol (the embedded mock cluster or `--kafka`):
//! the live group, an independent replay group, and offsets read back from the broker.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::context::{ensure, ProbeContext, ProbeError};
use crate::live::run_live_consumer;
use ticketflow::day::{self, DaySpec, YESTERDAY};
use ticketflow::event::AuditEvent;
use ticketflow::kafka::{
    committed_offsets, partition_window, AutoLookup, Broker, KafkaReplayConsumer,
};
use ticketflow::replay::{
    run_bounded_replay, ReplayError, ReplayErrorKind, ReplayLimits, ReplayPlan,
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
pub fn bounded_replay_preserves_live_offsets(ctx: &ProbeContext) -> Result<String, ProbeError> {
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
    let mut store = ctx.open_live_store()?;
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
    for &p in &parts {
        let window = partition_window(&broker, &mut lookup, &n.topic, p, YESTERDAY.0, YESTERDAY.1)
            .map_err(broken)?;
        let (start, stop) = window.range();
        if start == stop {
            continue;
        }
        let (low, high) = (window.log_start, window.end);
        ensure(low < start && stop < high, || {
            format!("partition {p}: yesterday [{start}, {stop}) is not inside [{low}, {high})")
        })?;
        let plan = ReplayPlan::new(&n.live, &n.replay, &n.topic, p, start, stop).map_err(broken)?;
        let mut consumer = KafkaReplayConsumer::new(&broker, &n.replay).map_err(broken)?;
        let summary =
            run_bounded_replay(&plan, limits(started, ctx), &mut consumer, store.as_mut())
                .map_err(|e| ProbeError::failed(format!("replay of partition {p}: {e}")))?;
        replayed += summary.records;
        inserted += summary.inserted;
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
pub fn earliest_does_not_rewind(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let started = Instant::now();
    let mut broker = connect(ctx)?;
    let n = names(ctx, "earliest");
    broker.create_topic(&n.topic, 1).map_err(broken)?;
    load_simple(&broker, &n.topic, 600)?;

    // The original group has processed up to 500.
    {
        let consumer = broker.consumer(&n.live, "earliest").map_err(broken)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&n.topic, 0, Offset::Offset(500))
            .map_err(broken)?;
        consumer
            .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
            .map_err(|e| broker.error("committing 500", e))
            .map_err(broken)?;
    }
    // It restarts with auto.offset.reset=earliest.
    let first = {
        let consumer = broker.consumer(&n.live, "earliest").map_err(broken)?;
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
        first.ok_or_else(|| ProbeError::broken("the restarted group received nothing"))?
    };
    ensure(first == 500, || {
        format!("the restarted group began at {first}, not at its committed 500")
    })?;

    let plan = ReplayPlan::new(&n.live, &n.replay, &n.topic, 0, 100, 200).map_err(broken)?;
    let mut consumer = KafkaReplayConsumer::new(&broker, &n.replay).map_err(broken)?;
    let mut store = ctx.open_store()?;
    let summary = run_bounded_replay(&plan, limits(started, ctx), &mut consumer, store.as_mut())
        .map_err(|e| ProbeError::failed(format!("replay [100, 200): {e}")))?;
    drop(consumer);
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
        summary.records
    ))
}

/// stop > captured end, over the broker: refused before seeking, nothing committed.
pub fn stop_beyond_end(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let mut broker = connect(ctx)?;
    let n = names(ctx, "beyond");
    broker.create_topic(&n.topic, 1).map_err(broken)?;
    load_simple(&broker, &n.topic, 50)?;
    let plan = ReplayPlan::new(&n.live, &n.replay, &n.topic, 0, 40, 60).map_err(broken)?;
    let mut consumer = KafkaReplayConsumer::new(&broker, &n.replay).map_err(broken)?;
    let mut store = ctx.open_store()?;
    let started = Instant::now();
    match run_bounded_replay(&plan, limits(started, ctx), &mut consumer, store.as_mut()) {
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
    drop(consumer);
    let replay = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(replay == [None], || {
        format!("the replay group committed {replay:?}")
    })?;
    let rows = store.audit_rows().map_err(broken)?;
    Ok(format!(
        "stop 60 > captured end 50: refused before seek; replay group committed=none; rows={rows}"
    ))
}

/// Fails with "database unavailable" on the `fail_at`-th apply (0-based).
struct FailsAt {
    inner: Box<dyn AuditStore>,
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
pub fn failure_mid_range(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let started = Instant::now();
    let mut broker = connect(ctx)?;
    let n = names(ctx, "midfail");
    broker.create_topic(&n.topic, 1).map_err(broken)?;
    load_simple(&broker, &n.topic, 50)?;
    let plan = ReplayPlan::new(&n.live, &n.replay, &n.topic, 0, 0, 50).map_err(broken)?;
    let mut failing = FailsAt {
        inner: ctx.open_store()?,
        applied: 0,
        fail_at: 25,
    };
    let mut consumer = KafkaReplayConsumer::new(&broker, &n.replay).map_err(broken)?;
    let committed_at =
        match run_bounded_replay(&plan, limits(started, ctx), &mut consumer, &mut failing) {
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

    let resume = on_broker[0].unwrap_or(0);
    let plan = ReplayPlan::new(&n.live, &n.replay, &n.topic, 0, resume, 50).map_err(broken)?;
    let mut consumer = KafkaReplayConsumer::new(&broker, &n.replay).map_err(broken)?;
    let summary = run_bounded_replay(&plan, limits(started, ctx), &mut consumer, store.as_mut())
        .map_err(|e| ProbeError::failed(format!("rerun from {resume}: {e}")))?;
    drop(consumer);
    let rows = store.audit_rows().map_err(broken)?;
    let on_broker = committed(&broker, &n.replay, &n.topic, &[0])?;
    ensure(rows == 50 && on_broker == [Some(50)], || {
        format!("after the rerun: rows {rows}, committed {on_broker:?}")
    })?;
    Ok(format!(
        "effect failed at offset 25: broker committed=25, rows={rows_after_failure}; rerun from 25 completed: rows={rows}, duplicates={}, committed=50",
        summary.duplicates
    ))
}
