//! Kafka probes against `lessonprobe broker` running as a separate process, with results read
//! back from the broker (committed offsets, watermarks) and from the SQLite files.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::consumer::Consumer;

use ticketflow::day::{self, DaySpec, YESTERDAY};

fn count(db: &std::path::Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn kafka_probes_pass_against_a_broker_process_and_the_broker_agrees() {
    let mut broker = BrokerProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = lessonprobe(&repo())
        .args([
            "--lesson",
            "30",
            "--select",
            "L30-1*",
            "--select",
            "EX-30-02",
            "--run-id",
            "kt1",
            "--kafka",
            &broker.servers,
        ])
        .arg(format!("--db=sqlite:{}", dir.path().display()))
        .arg("--junit")
        .arg(dir.path().join("k.xml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases = verdicts(&parse_junit(&dir.path().join("k.xml")));
    for id in ["EX-30-02", "L30-12", "L30-13", "L30-14"] {
        assert!(
            cases.iter().any(|(n, v)| n.starts_with(id) && v == "PASS"),
            "{id}: {cases:?}"
        );
    }
    let s = &broker.servers;

    // L30-12: the live group is at the end of every partition, the replay group at yesterday's stop.
    let suffix = "accept.lp-kt1.30.l30-12-sqlite";
    let topic = format!("ticketflow.audit.v1.{suffix}");
    let n = partitions_of(s, &topic);
    let live = committed(s, &format!("ticketflow-audit-v1.{suffix}"), &topic, n);
    let replay = committed(
        s,
        &format!("ticketflow-replay-20260922.{suffix}"),
        &topic,
        n,
    );
    let consumer = reader(s, "test-watermarks");
    for p in 0..n {
        let (_, high) = consumer
            .fetch_watermarks(&topic, p, Duration::from_secs(10))
            .unwrap();
        assert_eq!(live[p as usize], Some(high), "live group on partition {p}");
        let stop = first_offset_at(s, &topic, p, YESTERDAY.1).unwrap_or(high);
        assert_eq!(
            replay[p as usize],
            Some(stop),
            "replay group on partition {p}"
        );
        assert!(stop < high, "yesterday must end inside partition {p}");
    }
    let db = dir.path().join("lp-kt1.30.l30-12-sqlite.db");
    let records = day::generate(&DaySpec::default());
    let distinct: HashSet<&str> = records.iter().map(|r| r.event.event_id.as_str()).collect();
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM audit_events"),
        distinct.len() as i64
    );
    assert_eq!(
        count(&db, "SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        distinct.len() as i64
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM notifications"),
        distinct.len() as i64
    );
    assert_eq!(
        count(&db, "SELECT SUM(changes) FROM sla_counts"),
        distinct.len() as i64
    );

    // EX-30-02: the original group stays at 500, the replay group at 200.
    let suffix = "earliest.lp-kt1.30.ex-30-02-sqlite";
    let topic = format!("ticketflow.audit.v1.{suffix}");
    assert_eq!(
        committed(s, &format!("ticketflow-audit-v1.{suffix}"), &topic, 1),
        vec![Some(500)]
    );
    assert_eq!(
        committed(
            s,
            &format!("ticketflow-replay-20260922.{suffix}"),
            &topic,
            1
        ),
        vec![Some(200)]
    );
    assert_eq!(
        count(
            &dir.path().join("lp-kt1.30.ex-30-02-sqlite.db"),
            "SELECT COUNT(*) FROM audit_events"
        ),
        100
    );

    // L30-13: nothing committed by the refused replay.
    let suffix = "beyond.lp-kt1.30.l30-13-sqlite";
    let topic = format!("ticketflow.audit.v1.{suffix}");
    assert_eq!(
        committed(
            s,
            &format!("ticketflow-replay-20260922.{suffix}"),
            &topic,
            1
        ),
        vec![None]
    );

    // L30-14: the rerun finished at 50 with 50 distinct rows.
    let suffix = "midfail.lp-kt1.30.l30-14-sqlite";
    let topic = format!("ticketflow.audit.v1.{suffix}");
    assert_eq!(
        committed(
            s,
            &format!("ticketflow-replay-20260922.{suffix}"),
            &topic,
            1
        ),
        vec![Some(50)]
    );
    let db = dir.path().join("lp-kt1.30.l30-14-sqlite.db");
    assert_eq!(
        count(&db, "SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        50
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM audit_events"), 50);

    // The broker process does not answer DeleteTopics: every topic the run created is still
    // there, and the run said so, naming each one.
    let stderr = String::from_utf8_lossy(&out.stderr);
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

#[test]
fn the_sample_day_is_loaded_and_readable_by_another_client() {
    let broker = BrokerProcess::start(&[
        "--sample-day",
        "ticketflow.audit.v1",
        "--partitions",
        "4",
        "--events",
        "400",
    ]);
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

#[test]
fn a_sample_day_beyond_the_mock_retention_reports_what_is_held_and_warns_with_the_numbers() {
    let broker = BrokerProcess::start(&[
        "--sample-day",
        "big",
        "--partitions",
        "1",
        "--events",
        "100000",
    ]);
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
        let mut child = lessonprobe(&repo())
            .args(["broker", "--sample-day", name])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("--sample-day {name:?} started a broker");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name:?}: {stderr}");
        assert!(
            stderr.starts_with("lessonprobe: --sample-day: ") && stderr.contains(says),
            "{name:?}: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{name:?}: a broker address was printed"
        );
    }
}

#[test]
fn an_unreachable_broker_is_an_error_naming_the_address_within_the_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener); // nothing listens there now
    let started = Instant::now();
    let out = lessonprobe(&repo())
        .args([
            "--lesson",
            "30",
            "--select",
            "L30-13",
            "--no-junit",
            "--kafka",
            &addr,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("ERROR") && stdout.contains(&format!("kafka {addr}: connecting")),
        "{stdout}"
    );
}

#[test]
fn bad_kafka_arguments_are_usage_errors() {
    for args in [
        vec!["--kafka", "no-port"],
        vec!["--kafka", ""],
        vec!["-X", "security.protocol=SSL"],
        vec!["--kafka", "h:1", "-X", "novalue"],
    ] {
        let out = lessonprobe(&repo())
            .args(["--lesson", "30", "--no-junit"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
