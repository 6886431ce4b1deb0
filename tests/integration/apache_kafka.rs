//! lessonprobe's own commands on Apache Kafka where a real broker behaves unlike the mock
//! cluster: lesson probes under Kafka's time retention, and a sample day loaded into a running
//! broker by `lessonprobe broker --kafka`.

use std::collections::HashSet;

use lessonprobe_testkit::kafka::{reader, watermarks};
use lessonprobe_testkit::*;
use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};
use ticketflow::day;

#[test]
fn lesson_30_passes_on_a_broker_with_seven_day_retention() {
    on_apache_kafka(|_| {
        // Kafka's default retention, checked from the start and every 100 ms (instead of after
        // 30 s and every 5 minutes), so that a record older than 7 days is deleted while the
        // probe still needs it.
        let kafka = ApacheKafka::start_with(
            1,
            &[
                "log.retention.ms=604800000",
                "log.retention.check.interval.ms=100",
                "log.initial.task.delay.ms=0",
            ],
        );
        let dir = Dir::new();
        dir.lessonprobe()
            .args(["--lesson", "30", "--kafka", &kafka.servers, "--no-junit"])
            .args(["--select", "EX-30-02", "--select", "L30-12", "--select", "L30-13"])
            .args(["--select", "L30-14"])
            .stdout_has("4 passed, 0 failed, 0 errors")
            .within(std::time::Duration::from_secs(120))
            .success();
    });
}

#[test]
fn a_sample_day_loaded_into_apache_kafka_is_there_whole_and_stays() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let ran = lessonprobe()
            .args(["broker", "--kafka", &broker.servers, "--sample-day", "day"])
            .args(["--events", "500", "--partitions", "4"])
            .stderr_has("the broker holds")
            .within(std::time::Duration::from_secs(60))
            .success();
        let records = day::generate(&day::sample_day(500));
        let held = watermarks(&broker.servers, "day");
        assert_eq!(held.len(), 4, "partitions: {held:?}");
        assert!(held.iter().all(|(low, _)| *low == 0), "{held:?}");
        let total: i64 = held.iter().map(|(low, high)| high - low).sum();
        assert_eq!(total, records.len() as i64, "{}", ran.text());
        // Every record is there, each in the partition of its key.
        let consumer = reader(&broker.servers, "check");
        let mut tpl = TopicPartitionList::new();
        for p in 0..4 {
            tpl.add_partition_offset("day", p, Offset::Beginning).unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let mut keys = HashSet::new();
        let mut read = 0;
        while read < total {
            let m = consumer
                .poll(std::time::Duration::from_secs(10))
                .expect("a record")
                .unwrap();
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            assert_eq!(day::partition_for(&key, 4), m.partition(), "{key}");
            keys.insert(key);
            read += 1;
        }
        let want: HashSet<String> = records.iter().map(|r| r.key.clone()).collect();
        assert_eq!(keys, want);
    });
}

#[test]
fn broker_kafka_needs_a_sample_day_and_properties_need_kafka() {
    lessonprobe()
        .args(["broker", "--kafka", "127.0.0.1:9"])
        .stderr_has("--kafka loads a sample day into a running broker: name its topic with --sample-day")
        .status(2);
    lessonprobe()
        .args(["broker", "-X", "security.protocol=SSL", "--sample-day", "t"])
        .stderr_has("--kafka")
        .status(2);
    lessonprobe()
        .args(["broker", "--kafka", "embedded", "--sample-day", "t"])
        .stderr_has("--kafka embedded")
        .status(2);
}

#[test]
fn broker_kafka_at_an_address_where_none_listens_fails_naming_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    lessonprobe()
        .args(["broker", "--kafka", &addr, "--sample-day", "t"])
        .stderr_has(addr.as_str())
        .within(std::time::Duration::from_secs(60))
        .status(4);
}
