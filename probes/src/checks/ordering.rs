//! EX-29-02 executed: one key, one partition, offset order; and the business version check that
//! keeps a late old version from overwriting a newer one.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::context::{ensure, ProbeContext, ProbeError};
use ticketflow::day::partition_for;
use ticketflow::event::AuditEvent;
use ticketflow::kafka::Broker;

fn broken<E: std::fmt::Display>(e: E) -> ProbeError {
    ProbeError::broken(e.to_string())
}

fn version_event(tenant: &str, ticket: &str, version: i64) -> AuditEvent {
    let mut e = AuditEvent::sample_with_id(&format!("evt-{tenant}-{ticket}-v{version}"));
    e.tenant_id = tenant.to_owned();
    e.ticket_id = ticket.to_owned();
    e.payload = serde_json::json!({ "version": version });
    e
}

pub fn same_key_same_partition(ctx: &ProbeContext) -> Result<String, ProbeError> {
    let started = Instant::now();
    let mut broker = Broker::for_target(&ctx.kafka, ctx.deadline).map_err(broken)?;
    let topic = format!("ticketflow.audit.ordering.{}", ctx.run_id);
    let partitions = broker.create_topic(&topic, 3).map_err(broken)?;
    // v1..v3 of ticket-7 interleaved with other tickets' changes.
    let mut events = Vec::new();
    for version in 1..=3 {
        events.push(version_event("tenant-a", "ticket-7", version));
        for other in 1..=4 {
            events.push(version_event(
                "tenant-b",
                &format!("ticket-{other}"),
                version,
            ));
        }
    }
    let encoded: Vec<(String, Vec<u8>)> = events.iter().map(|e| (e.key(), e.to_json())).collect();
    broker
        .produce(
            &topic,
            encoded.iter().enumerate().map(|(i, (k, v))| {
                (
                    partition_for(k, partitions),
                    k.as_str(),
                    v.as_slice(),
                    1_000 + i as i64,
                )
            }),
        )
        .map_err(broken)?;

    let consumer = broker
        .consumer(&format!("ordering-reader.{}", ctx.run_id), "earliest")
        .map_err(broken)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(&topic, p, Offset::Beginning)
            .map_err(broken)?;
    }
    consumer.assign(&tpl).map_err(broken)?;
    let mut seen = Vec::new(); // (partition, offset, event)
    while seen.len() < events.len() {
        if started.elapsed() > ctx.deadline {
            return Err(ProbeError::broken(format!(
                "read {} of {} records before the deadline",
                seen.len(),
                events.len()
            )));
        }
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.map_err(broken)?;
            let event = AuditEvent::from_json(m.payload().unwrap_or_default()).map_err(broken)?;
            seen.push((m.partition(), m.offset(), event));
        }
    }
    drop(consumer);
    let mine: Vec<&(i32, i64, AuditEvent)> = seen
        .iter()
        .filter(|(_, _, e)| e.key() == "tenant-a:ticket-7")
        .collect();
    let partition = mine[0].0;
    ensure(mine.iter().all(|(p, _, _)| *p == partition), || {
        format!("ticket-7 spread over partitions: {mine:?}")
    })?;
    let mut by_offset = mine.clone();
    by_offset.sort_by_key(|(_, o, _)| *o);
    let versions: Vec<i64> = by_offset
        .iter()
        .filter_map(|(_, _, e)| e.version())
        .collect();
    ensure(versions == [1, 2, 3], || {
        format!("versions in offset order: {versions:?}")
    })?;

    // A projection that applies v3, then v2 arriving late (a retry), must keep v3.
    let mut store = ctx.open_live_store()?;
    let v3 = store
        .project_ticket(&version_event("tenant-a", "ticket-7", 3))
        .map_err(broken)?;
    let late_v2 = store
        .project_ticket(&version_event("tenant-a", "ticket-7", 2))
        .map_err(broken)?;
    let kept = store
        .ticket_version("tenant-a", "ticket-7")
        .map_err(broken)?;
    ensure(v3 && !late_v2 && kept == Some(3), || {
        format!("v3 applied {v3}, late v2 applied {late_v2}, kept {kept:?}")
    })?;
    Ok("key tenant-a:ticket-7: v1,v2,v3 in one partition at rising offsets; late v2 refused, projection keeps v3".to_owned())
}
