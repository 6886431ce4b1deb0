//! (a) and (a*): the window read and decoded, no SQL.

use std::time::{Duration, Instant};

use ticketflow::event::EventRecord;
use ticketflow::kafka::{Broker, KafkaReplayConsumer};
use ticketflow::replay::{ReplayConsumer, ReplayGroup};

use super::TOPIC;

/// (a): every partition read from its start to its end and decoded, no SQL.
pub fn consume_only(broker: &Broker, partitions: i32) -> (u64, Duration) {
    let started = Instant::now();
    let mut n = 0u64;
    let mut consumer = KafkaReplayConsumer::new(
        broker,
        &ReplayGroup::new("bench-consume", "bench-live").expect("group"),
    )
    .expect("consumer");
    for p in 0..partitions {
        let (low, high) = broker.watermarks(TOPIC, p).expect("watermarks");
        consumer.seek(TOPIC, p, low).expect("seek");
        let mut next = low;
        while next < high {
            let record = consumer
                .poll(Duration::from_secs(10))
                .expect("poll")
                .expect("a record within 10 s");
            let _ = EventRecord::decode(&record.payload);
            next = record.offset + 1;
            n += 1;
        }
    }
    (n, started.elapsed())
}

/// (a*): every partition assigned at once to one plain read_committed consumer, read from its
/// start to its end and decoded, no SQL.
pub fn consume_all_at_once(broker: &Broker, partitions: i32) -> (u64, Duration) {
    use rdkafka::consumer::Consumer;
    use rdkafka::Message;
    let started = Instant::now();
    let consumer = broker
        .consumer("bench-consume-all", "earliest")
        .expect("consumer");
    let mut tpl = rdkafka::TopicPartitionList::new();
    let mut open = std::collections::HashMap::new();
    for p in 0..partitions {
        let (low, high) = broker.watermarks(TOPIC, p).expect("watermarks");
        if low < high {
            tpl.add_partition_offset(TOPIC, p, rdkafka::Offset::Offset(low))
                .expect("partition");
            open.insert(p, high);
        }
    }
    consumer.assign(&tpl).expect("assign");
    let mut n = 0u64;
    while !open.is_empty() {
        let message = consumer
            .poll(Duration::from_secs(10))
            .expect("a record within 10 s")
            .expect("poll");
        if let Some(payload) = message.payload() {
            let _ = EventRecord::decode(payload);
        }
        n += 1;
        let p = message.partition();
        if open
            .get(&p)
            .is_some_and(|&high| message.offset() + 1 >= high)
        {
            open.remove(&p);
        }
    }
    (n, started.elapsed())
}
