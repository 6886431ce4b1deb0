//! lessonprobe's own commands on Apache Kafka where a real broker behaves unlike the mock
//! cluster: lesson probes under Kafka's time retention, and a sample day loaded into a running
//! broker by `lessonprobe broker --kafka`, and the ordering probe on fresh topics under load.

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
            .args([
                "--select", "EX-30-02", "--select", "L30-12", "--select", "L30-13",
            ])
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
            // An idempotent producer's wait for its producer id is no warning of the program's.
            .stderr_lacks("WARN")
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
            tpl.add_partition_offset("day", p, Offset::Beginning)
                .unwrap();
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

/// The ordering probe (EX-29-02) right 20 runs in a row on one fresh Apache Kafka node, each
/// run on a topic of its own created moments before its first record, with every core busy:
/// the product's producer is idempotent, so a retried first request cannot land after the next
/// one and put a ticket's versions out of order.
#[test]
fn the_ordering_probe_is_right_on_fresh_apache_kafka_topics_under_load_20_runs_in_a_row() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let _hog = load::CpuHog::on_every_core();
        let dir = Dir::new();
        for run in 1..=20 {
            dir.lessonprobe()
                .args(["--lesson", "29", "--select", "EX-29-02", "--no-junit"])
                .args([
                    "--kafka",
                    &broker.servers,
                    "--run-id",
                    &format!("order{run}"),
                ])
                .stdout_has("1 passed, 0 failed, 0 errors")
                .within(std::time::Duration::from_secs(90))
                .success();
        }
    });
}

#[test]
fn broker_kafka_needs_a_sample_day_and_properties_need_kafka() {
    lessonprobe()
        .args(["broker", "--kafka", "127.0.0.1:9"])
        .stderr_has(
            "--kafka loads a sample day into a running broker: name its topic with --sample-day",
        )
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

/// `lessonprobe broker --kafka … --sample-day … 2>&1 | head -1`: what it says of the loaded
/// topic cannot be written, and the topic stays, whole (the closed pipe made a panic, whose
/// unwinding dropped the broker handle, which deleted the topic it had created).
#[test]
fn a_sample_day_whose_account_nobody_reads_stays_loaded() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let mut child = Command::new(bin())
            .args([
                "broker",
                "--kafka",
                &broker.servers,
                "--sample-day",
                "unread",
            ])
            .args(["--events", "500", "--partitions", "40"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        drop(child.stderr.take());
        let until = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > until {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("the load did not end within 60 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(status.code(), Some(0), "{status:?}");
        let held = watermarks(&broker.servers, "unread");
        assert_eq!(held.len(), 40, "partitions: {held:?}");
        let total: i64 = held.iter().map(|(low, high)| high - low).sum();
        assert_eq!(total, day::generate(&day::sample_day(500)).len() as i64);
    });
}

/// Which node leads each partition of `topic`, from the cluster's metadata.
fn leaders(servers: &str, topic: &str) -> Vec<i32> {
    let consumer = reader(servers, "leaders");
    let md = consumer
        .fetch_metadata(Some(topic), std::time::Duration::from_secs(10))
        .unwrap();
    let mut parts: Vec<(i32, i32)> = md.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader()))
        .collect();
    parts.sort();
    parts.into_iter().map(|(_, leader)| leader).collect()
}

/// A three-broker cluster, every partition on all three: the broker leading some of the
/// window's partitions is killed (`kill -9`) while `replay --execute` runs, leadership moves to
/// the others, and the replay — resumed once if the broker's loss ended it — leaves exactly the
/// window's distinct event ids in SQL, every partition's checkpoint at its stop, and the replay
/// group committed at the stops in Kafka.
#[test]
fn a_replay_outlives_a_partition_leader_killed_mid_run() {
    use std::time::Duration;
    on_apache_kafka(|_| {
        let kafka = ApacheKafka::start(3);
        let topic = "moved";
        let events = 20_000;
        kafka.load_sample_day(topic, events, 6);
        let before = leaders(&kafka.servers, topic);
        // Node 1 is also the controller: the victim is another node that leads a partition.
        let victim = *before
            .iter()
            .find(|&&n| n > 1)
            .expect("node 2 or 3 leads a partition");
        let dir = Dir::new();
        let file = dir.join("moved.db");
        let db = format!("sqlite:{}", file.display());
        let replay = |extra: &[&str]| {
            dir.lessonprobe()
                .args(["replay", "--kafka", &kafka.servers, "--topic", topic])
                .args([
                    "--live-group",
                    "live",
                    "--replay-group",
                    "replay",
                    "--db",
                    &db,
                ])
                .args([
                    "--since",
                    "2026-09-22T00:00:00Z",
                    "--until",
                    "2026-09-23T00:00:00Z",
                ])
                .args(["--execute", "--allow-quarantine", "--deadline", "120s"])
                .args(extra)
        };
        let mut running = replay(&["--batch", "20"]).spawn();
        sqlite::wait_for_durable_batches(&file, 5, &mut running);
        kafka.kill_node(victim as u32);
        let first = running
            .within(Duration::from_secs(150))
            .status_among(&[0, 4]);
        let after = leaders(&kafka.servers, topic);
        assert!(
            after.iter().all(|&n| n != victim),
            "leadership moved off node {victim}: {before:?} -> {after:?}"
        );
        if first.code != Some(0) {
            // Ended by the loss, with its report: a resume finishes what it left.
            replay(&["--resume"])
                .within(Duration::from_secs(150))
                .success();
        }
        let want: HashSet<String> = day::generate(&day::sample_day(events))
            .iter()
            .filter(|r| r.timestamp_ms >= day::YESTERDAY.0 && r.timestamp_ms < day::YESTERDAY.1)
            .filter(|r| r.garbage.is_none())
            .map(|r| r.event.event_id.clone())
            .collect();
        let ids = sqlite::strings(&file, "SELECT event_id FROM audit_events");
        let got: HashSet<String> = ids.iter().cloned().collect();
        assert_eq!(got.len(), ids.len(), "duplicate event ids");
        assert!(
            got == want,
            "rows differ from the window's distinct event ids"
        );
        let checkpoints = sqlite::checkpoints(&file);
        let stops: Vec<i64> = (0..6).map(|p| checkpoints[&p].1).collect();
        for (p, (at, stop)) in &checkpoints {
            assert_eq!(at, stop, "partition {p} checkpoint at its stop");
        }
        assert_eq!(
            lessonprobe_testkit::kafka::committed(&kafka.servers, "replay", topic, 6),
            stops.into_iter().map(Some).collect::<Vec<_>>(),
            "replay group at the stops"
        );
    });
}
