//! EX-29-02 executed: keyed events produced through the Kafka client's own partitioner land one
//! key to one partition, in offset order; and the business version check keeps a late old
//! version from overwriting a newer one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError as ClientError;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::system::System;
use crate::context::{ensure, ProbeContext, ProbeError};
use crate::live::TicketKey;
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

/// The lesson's ticket; eight more keep it company, so that keys spread over the partitions.
const KEY: &str = "tenant-a:ticket-7";
const OTHER_TICKETS: usize = 8;

pub(crate) fn same_key_same_partition(
    sys: &dyn System,
    ctx: &ProbeContext,
) -> Result<String, ProbeError> {
    let started = Instant::now();
    let mut broker = Broker::for_target(&ctx.kafka, ctx.deadline).map_err(broken)?;
    let topic = format!("ticketflow.audit.ordering.{}", ctx.run_id);
    let partitions = broker.create_topic(&topic, 3).map_err(broken)?;
    // v1..v3 of each ticket, the tickets' changes interleaved.
    let mut events = Vec::new();
    for version in 1..=3 {
        events.push(version_event("tenant-a", "ticket-7", version));
        for other in 1..=OTHER_TICKETS {
            events.push(version_event(
                "tenant-b",
                &format!("ticket-{other}"),
                version,
            ));
        }
    }
    produce_keyed(sys, &broker, &topic, &events)?;
    let seen = read_back(&broker, &topic, partitions, events.len(), ctx, started)?;

    // Where each key's records landed, and its versions in offset order.
    let mut by_key: BTreeMap<String, Vec<(i32, i64, i64)>> = BTreeMap::new();
    for (partition, offset, event) in &seen {
        by_key.entry(event.key()).or_default().push((
            *partition,
            *offset,
            event.version().unwrap_or(0),
        ));
    }
    for (key, landed) in &mut by_key {
        let places: BTreeSet<i32> = landed.iter().map(|(p, _, _)| *p).collect();
        ensure(places.len() == 1, || {
            format!("key {key} landed on partitions {places:?}: one key must map to one partition")
        })?;
        landed.sort_by_key(|(_, offset, _)| *offset);
        let versions: Vec<i64> = landed.iter().map(|(_, _, v)| *v).collect();
        ensure(versions == [1, 2, 3], || {
            format!("key {key}: versions in offset order {versions:?}, produced 1, 2, 3")
        })?;
    }
    let used: BTreeSet<i32> = seen.iter().map(|(p, _, _)| *p).collect();
    ensure(used.len() > 1, || {
        format!(
            "all {} keys landed on partition(s) {used:?} of {partitions}: a partitioner that ignores keys would look the same",
            by_key.len()
        )
    })?;
    ensure(by_key.contains_key(KEY), || {
        format!("no record of {KEY} was read back")
    })?;

    // A projection that applies v3, then v2 arriving late (a retry), must keep v3.
    let mut store = sys.open_store(ctx)?;
    let v3 = store
        .project_ticket(&version_event("tenant-a", "ticket-7", 3))
        .map_err(broken)?;
    let late_v2 = store
        .project_ticket(&version_event("tenant-a", "ticket-7", 2))
        .map_err(broken)?;
    let kept = store
        .ticket_version(TicketKey {
            tenant_id: "tenant-a",
            ticket_id: "ticket-7",
        })
        .map_err(broken)?;
    ensure(v3 && !late_v2 && kept == Some(3), || {
        format!("v3 applied {v3}, late v2 applied {late_v2}, kept {kept:?}")
    })?;
    Ok(format!("key {KEY}: v1,v2,v3 in one partition at rising offsets; late v2 refused, projection keeps v3"))
}

/// Produces `events` keyed `tenant_id:ticket_id` with no partition given, in order, and waits
/// until every one is acknowledged.
fn produce_keyed(
    sys: &dyn System,
    broker: &Broker,
    topic: &str,
    events: &[AuditEvent],
) -> Result<(), ProbeError> {
    let producer = sys.producer(broker).map_err(broken)?;
    for (i, event) in events.iter().enumerate() {
        let (key, payload) = (event.key(), event.to_json());
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .payload(&payload)
            .timestamp(1_000 + i as i64);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((ClientError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => {
                    return Err(broken(broker.error(format!("producing to {topic}"), e)))
                }
            }
        }
    }
    producer
        .flush(broker.op_timeout)
        .map_err(|e| broken(broker.error(format!("flushing records to {topic}"), e)))
}

/// Every record of `topic` as `(partition, offset, event)`, read from the beginning of each
/// partition until `expected` have arrived.
fn read_back(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    expected: usize,
    ctx: &ProbeContext,
    started: Instant,
) -> Result<Vec<(i32, i64, AuditEvent)>, ProbeError> {
    let consumer = broker
        .consumer(&format!("ordering-reader.{}", ctx.run_id), "earliest")
        .map_err(broken)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(broken)?;
    }
    consumer.assign(&tpl).map_err(broken)?;
    let mut seen = Vec::new();
    while seen.len() < expected {
        if started.elapsed() > ctx.deadline {
            return Err(ProbeError::broken(format!(
                "read {} of {expected} records before the deadline",
                seen.len()
            )));
        }
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.map_err(broken)?;
            let event = AuditEvent::from_json(m.payload().unwrap_or_default()).map_err(broken)?;
            seen.push((m.partition(), m.offset(), event));
        }
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use ticketflow::kafka::{IdempotentProducer, KafkaError, ProducerLog};

    use super::*;
    use crate::checks::testing::{assert_catches, sql_backends, sqlite, BrokenStore};

    /// The real system but for the producer, whose partitioner ignores keys.
    struct RandomPartitioner;

    impl System for RandomPartitioner {
        fn producer(&self, broker: &Broker) -> Result<IdempotentProducer, KafkaError> {
            let mut config = broker.config();
            config.set("partitioner", "random");
            config
                .create_with_context(ProducerLog)
                .map_err(|e| broker.error("creating a producer", e))
        }
    }

    #[test]
    fn ex_29_02_fails_when_keys_do_not_decide_the_partition() {
        assert_catches(
            same_key_same_partition,
            sqlite,
            &[(&RandomPartitioner, "one key must map to one partition")],
        );
    }

    #[test]
    fn ex_29_02_fails_when_the_projection_has_no_version_check() {
        let unversioned = BrokenStore {
            apply_once: None,
            unversioned: true,
        };
        for ctx in sql_backends() {
            assert_catches(
                same_key_same_partition,
                || ctx.clone(),
                &[(
                    &unversioned,
                    "v3 applied true, late v2 applied true, kept Some(2)",
                )],
            );
        }
    }
}
