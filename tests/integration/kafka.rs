//! Kafka probes against `lessonprobe broker` running as a separate process, sample days on the
//! mock cluster and on Apache Kafka, and the test kit's Apache Kafka itself, with results read
//! back from the broker (committed offsets, watermarks, records) and from the SQLite files.

use std::collections::HashSet;
use std::time::Duration;

use lessonprobe_testkit::kafka::{
    assign_at, committed, first_offset_at, partitions_of, produce, reader,
};
use lessonprobe_testkit::sqlite::count;
use lessonprobe_testkit::*;
use rdkafka::consumer::Consumer;

use ticketflow::day::{self, DaySpec, YESTERDAY};

/// On the mock cluster only: it has no DeleteTopics, so the run leaves its topics behind and
/// says so (Apache Kafka deletes them).
#[test]
fn kafka_probes_pass_against_the_mock_cluster_in_a_process_and_the_broker_agrees() {
    let mut broker = BrokerProcess::start(&[]);
    let dir = Dir::new();
    let ran = lessonprobe()
        .in_repo()
        .args([
            "--lesson", "30", "--select", "L30-1*", "--select", "EX-30-02",
        ])
        .args(["--run-id", "kt1", "--kafka", &broker.servers])
        .arg(format!("--db=sqlite:{}", dir.display()))
        .arg("--junit")
        .arg(dir.join("k.xml"))
        .success();
    let cases = verdicts(&parse_junit(&dir.join("k.xml")));
    for id in ["EX-30-02", "L30-12", "L30-13", "L30-14"] {
        assert!(
            cases.iter().any(|(n, v)| n.starts_with(id) && v == "PASS"),
            "{id}: {cases:?}"
        );
    }
    let s = &broker.servers;
    // The probe's topic and its live and replay groups carry the case's suffix.
    let topic = |suffix: &str| format!("ticketflow.audit.v1.{suffix}");
    let live_group = |suffix: &str, n| {
        committed(
            s,
            &format!("ticketflow-audit-v1.{suffix}"),
            &topic(suffix),
            n,
        )
    };
    let replay_group = |suffix: &str, n| {
        committed(
            s,
            &format!("ticketflow-replay-20260922.{suffix}"),
            &topic(suffix),
            n,
        )
    };

    // L30-12: the live group is at the end of every partition, the replay group at yesterday's stop.
    let suffix = "accept.lp-kt1.30.l30-12-sqlite";
    let n = partitions_of(s, &topic(suffix));
    let (live, replay) = (live_group(suffix, n), replay_group(suffix, n));
    let consumer = reader(s, "test-watermarks");
    for p in 0..n {
        let (_, high) = consumer
            .fetch_watermarks(&topic(suffix), p, Duration::from_secs(10))
            .unwrap();
        assert_eq!(live[p as usize], Some(high), "live group on partition {p}");
        let stop = first_offset_at(s, &topic(suffix), p, YESTERDAY.1).unwrap_or(high);
        assert_eq!(
            replay[p as usize],
            Some(stop),
            "replay group on partition {p}"
        );
        assert!(stop < high, "yesterday must end inside partition {p}");
    }
    let db = dir.join("lp-kt1.30.l30-12-sqlite.db");
    let records = day::generate(&DaySpec::default());
    let distinct: HashSet<&str> = records.iter().map(|r| r.event.event_id.as_str()).collect();
    // Each distinct event once: stored, notified and counted.
    for sql in [
        "SELECT COUNT(*) FROM audit_events",
        "SELECT COUNT(DISTINCT event_id) FROM audit_events",
        "SELECT COUNT(*) FROM notifications",
        "SELECT SUM(changes) FROM sla_counts",
    ] {
        assert_eq!(count(&db, sql), distinct.len() as i64, "{sql}");
    }

    // EX-30-02: the original group stays at 500, the replay group at 200.
    let suffix = "earliest.lp-kt1.30.ex-30-02-sqlite";
    assert_eq!(live_group(suffix, 1), vec![Some(500)]);
    assert_eq!(replay_group(suffix, 1), vec![Some(200)]);
    assert_eq!(
        count(
            &dir.join("lp-kt1.30.ex-30-02-sqlite.db"),
            "SELECT COUNT(*) FROM audit_events"
        ),
        100
    );

    // L30-13: nothing committed by the refused replay.
    assert_eq!(
        replay_group("beyond.lp-kt1.30.l30-13-sqlite", 1),
        vec![None]
    );

    // L30-14: the rerun finished at 50 with 50 distinct rows.
    assert_eq!(
        replay_group("midfail.lp-kt1.30.l30-14-sqlite", 1),
        vec![Some(50)]
    );
    let db = dir.join("lp-kt1.30.l30-14-sqlite.db");
    assert_eq!(
        count(&db, "SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        50
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM audit_events"), 50);

    // The broker process does not answer DeleteTopics: every topic the run created is still
    // there, and the run said so, naming each one.
    let stderr = &ran.stderr;
    for suffix in [
        "accept.lp-kt1.30.l30-12-sqlite",
        "earliest.lp-kt1.30.ex-30-02-sqlite",
        "beyond.lp-kt1.30.l30-13-sqlite",
        "midfail.lp-kt1.30.l30-14-sqlite",
    ] {
        let topic = format!("ticketflow.audit.v1.{suffix}");
        assert!(partitions_of(s, &topic) > 0, "{topic} is gone");
        assert!(
            stderr.lines().any(|l| l.contains("topics left behind: ")
                && l.contains(&format!(
                    "{topic} (the broker does not answer admin requests"
                ))),
            "no warning names {topic}: {stderr}"
        );
    }

    drop(consumer);
    assert_eq!(
        broker.terminate(),
        Some(0),
        "the broker exits cleanly on SIGTERM"
    );
}

on_each_broker! {
    fn the_sample_day_is_loaded_and_readable_by_another_client(kind) {
        let broker = kind.sample_day("ticketflow.audit.v1", 400, 4);
        let consumer = reader(&broker.servers, "test-sample");
        let mut total = 0;
        for p in 0..4 {
            let (low, high) = consumer
                .fetch_watermarks("ticketflow.audit.v1", p, Duration::from_secs(10))
                .unwrap();
            total += high - low;
        }
        let expected = day::generate(&day::sample_day(400)).len() as i64;
        assert_eq!(total, expected);
        // It says what the broker holds, partition by partition, and that nothing was dropped.
        assert!(
            broker.report[0].ends_with(&format!("the broker holds {expected}:")),
            "{:?}",
            broker.report
        );
        assert_eq!(
            broker
                .report
                .iter()
                .filter(|l| l.starts_with("  partition "))
                .count(),
            4,
            "{:?}",
            broker.report
        );
        assert!(
            !broker.report.iter().any(|l| l.contains("warning")),
            "{:?}",
            broker.report
        );
    }
}

/// On the mock cluster only: its retention is what is tested (Apache Kafka here keeps records).
#[test]
fn a_sample_day_past_the_mock_clusters_retention_reports_what_is_held_and_warns() {
    let broker = BrokerProcess::sample_day("big", 100_000, 1);
    let sent = day::generate(&day::sample_day(100_000)).len() as i64;
    let (low, high) = reader(&broker.servers, "test-retention")
        .fetch_watermarks("big", 0, Duration::from_secs(10))
        .unwrap();
    assert_eq!(high, sent, "every record was stored once");
    assert!(low > 0, "the mock cluster kept all {sent} records");
    let report = broker.report.join("\n");
    assert!(
        report.contains(&format!(
            "produced {sent} records to big (1 partition, 2026-09-21 to 2026-09-23); the broker holds {}:",
            high - low
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "  partition 0: offsets [{low}, {high}), {} records",
            high - low
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!(
            "lessonprobe broker: warning: the mock cluster dropped {low} of {sent} records (partition 0 lost offsets [0, {low})): it keeps only"
        )),
        "{report}"
    );
}

#[test]
fn a_sample_day_topic_name_kafka_refuses_is_a_usage_error_before_any_broker_starts() {
    let long = "x".repeat(250);
    for (name, says) in [
        ("", "a topic name must not be empty"),
        (
            "bad topic name!",
            "topic name \"bad topic name!\" holds ' '",
        ),
        (".", "\".\" cannot be a topic name"),
        ("..", "\"..\" cannot be a topic name"),
        (
            long.as_str(),
            "has 250 characters; Kafka allows at most 249",
        ),
    ] {
        let ran = lessonprobe()
            .in_repo()
            .args(["broker", "--sample-day", name])
            .within(Duration::from_secs(10))
            .stderr_has(says)
            .stdout("")
            .status(2);
        assert!(
            ran.stderr.starts_with("lessonprobe: --sample-day: "),
            "{name:?}: {}",
            ran.stderr
        );
    }
}

#[test]
fn an_unreachable_broker_is_an_error_naming_the_address_within_the_deadline() {
    let addr = format!("127.0.0.1:{}", net::free_port()); // nothing listens there now
                                                          // The preflight finds it before any probe starts: one environment ERROR naming the
                                                          // address, and the probe that needs the broker NOT RUN.
    lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--select", "L30-13", "--no-junit"])
        .args(["--kafka", &addr])
        .within(Duration::from_secs(60))
        .stdout_has(format!("ERROR   environment: kafka {addr}: "))
        .stdout_has("NOT RUN [")
        .stdout_has(format!(
            "L30-13 kafka-stop-beyond-end [sqlite]: needs kafka {addr}"
        ))
        .failure();
}

#[test]
fn bad_kafka_arguments_are_usage_errors() {
    for args in [
        vec!["--kafka", "no-port"],
        vec!["--kafka", ""],
        vec!["-X", "security.protocol=SSL"],
        vec!["--kafka", "h:1", "-X", "novalue"],
    ] {
        lessonprobe()
            .in_repo()
            .args(["--lesson", "30", "--no-junit"])
            .args(args)
            .status(2);
    }
}

/// Whether process `pid` runs (exists and is not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("State:") && !l.contains('Z'))
    })
}

/// The pids of the processes whose command line names `-Dlessonprobe.kafka.dir=DIR`.
fn jvms_of(dir: &std::path::Path) -> Vec<i32> {
    let mark = format!("-Dlessonprobe.kafka.dir={}", dir.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == mark.as_bytes()))
                && alive(*pid)
        })
        .collect()
}

/// The payloads of `topic`'s partition 0 from its start, read until `want` arrived (or 60 s).
fn read_back(servers: &str, topic: &str, want: usize) -> Vec<Vec<u8>> {
    use rdkafka::{Message, Offset};
    let consumer = reader(servers, "test-read-back");
    assign_at(&consumer, topic, 0, Offset::Beginning);
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    while got.len() < want && started.elapsed() < Duration::from_secs(60) {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => got.push(m.payload().unwrap_or_default().to_vec()),
            Some(Err(e)) => eprintln!("reading {topic} back: {e}"),
            None => {}
        }
    }
    got
}

/// The test kit's Apache Kafka itself: it starts and serves a produced record; `kill()` leaves
/// no process of it; `restart()` serves the same record from the log on disk; and once dropped
/// no JVM of its folder runs (`scripts/kafka.sh running DIR` agrees).
#[test]
fn apache_kafka_of_the_test_kit_starts_survives_kill_9_with_its_log_and_leaves_nothing_running() {
    on_apache_kafka(|_| {
        let kafka = ApacheKafka::start(1);
        let dir = kafka.dir().to_path_buf();
        let pids = kafka.pids();
        assert_eq!(pids.len(), 1, "one node");
        assert_eq!(jvms_of(&dir), pids, "the node is the JVM of its folder");
        let payload = b"kept on disk".to_vec();
        produce(
            &kafka.servers,
            "kit",
            1_790_000_000_000,
            &[(0, payload.clone())],
        );
        assert_eq!(read_back(&kafka.servers, "kit", 1), vec![payload.clone()]);

        kafka.kill();
        for pid in &pids {
            assert!(!alive(*pid), "node {pid} outlived kill -9");
        }
        assert_eq!(
            jvms_of(&dir),
            Vec::<i32>::new(),
            "no JVM of {}",
            dir.display()
        );

        kafka.restart();
        let restarted = kafka.pids();
        assert_eq!(restarted.len(), 1);
        assert_ne!(restarted, pids, "a new process");
        assert!(alive(restarted[0]));
        assert_eq!(
            read_back(&kafka.servers, "kit", 1),
            vec![payload],
            "the record, from the log on disk"
        );

        drop(kafka);
        assert_eq!(
            jvms_of(&dir),
            Vec::<i32>::new(),
            "no JVM of {} after drop",
            dir.display()
        );
        let running = std::process::Command::new("bash")
            .arg(repo().join("scripts/kafka.sh"))
            .arg("running")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            running.status.success(),
            "scripts/kafka.sh running {}: {}",
            dir.display(),
            String::from_utf8_lossy(&running.stdout)
        );
        assert!(!dir.exists(), "the folder goes with it");
    });
}

/// `scripts/kafka.sh start` with a JIT setting it does not know: exit 2 at once, one line naming
/// the variable and the value, and nothing made or started (no folder, no JVM to wait for).
#[test]
fn an_unknown_jit_setting_is_refused_before_the_broker_folder_is_made() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("kafka");
    let started = std::time::Instant::now();
    let out = std::process::Command::new("bash")
        .arg(repo().join("scripts/kafka.sh"))
        .arg("start")
        .arg(&dir)
        .env("LESSONPROBE_KAFKA_JIT", "fast")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "scripts/kafka.sh: LESSONPROBE_KAFKA_JIT must be quick or full, not fast\n"
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.exists(), "nothing made");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(jvms_of(&dir), Vec::<i32>::new());
}
