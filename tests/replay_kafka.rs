//! `lessonprobe replay` on topics as real producers write them, against `lessonprobe broker`:
//! transactions (control markers, aborted records), out-of-order timestamps, retention that
//! removed a window, a live group that keeps consuming, deadlines, and SIGKILLs on a
//! transactional topic. Outcomes are read back from SQL and from the broker.

mod common;
#[path = "replay_kafka/txn.rs"]
mod txn;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use ticketflow::event::AuditEvent;
use txn::Txn;

const LIVE: &str = "audit-live";
const REPLAY: &str = "audit-replay";
/// 2026-09-22T10:00:00Z: the records of the transactional tests lie after it.
const T0: i64 = 1_790_071_200_000;
const SINCE: &str = "2026-09-22T00:00:00Z";
const UNTIL: &str = "2026-09-23T00:00:00Z";

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `lessonprobe replay` of `topic` into `db`.
fn replay(dir: &Path, servers: &str, topic: &str, db: &str, args: &[&str]) -> Command {
    let mut cmd = lessonprobe(dir);
    cmd.args([
        "replay",
        "--kafka",
        servers,
        "--topic",
        topic,
        "--live-group",
        LIVE,
        "--replay-group",
        REPLAY,
        "--db",
        db,
    ])
    .args(args);
    cmd
}

fn run(cmd: &mut Command) -> (Option<i32>, String, serde_json::Value) {
    let out = cmd.output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), text(&out), doc)
}

/// An audit event whose id names where it was written.
fn event(tag: &str) -> Vec<u8> {
    AuditEvent::sample_with_id(tag).to_json()
}

/// The layout on `topic[partition]`: commit 3, abort 2, commit 3 — markers at 3, 6
/// and 10, end 11.
fn commit_abort_commit(servers: &str, topic: &str, partition: i32) -> Vec<i64> {
    let txn = |first: i64, n: i64, commit: bool| Txn {
        records: (first..first + n)
            .map(|i| (T0 + i * 1000, event(&format!("{topic}-{partition}-{i}"))))
            .collect(),
        commit,
    };
    txn::write(
        servers,
        topic,
        partition,
        &[txn(0, 3, true), txn(3, 2, false), txn(5, 3, true)],
    )
}

/// `(offset, payload)` of every record a client with `isolation` delivers from
/// `topic[partition]` in `[from, to)`: what Kafka itself hands a consumer there.
fn delivered(
    servers: &str,
    topic: &str,
    partition: i32,
    isolation: &str,
    from: i64,
    to: i64,
) -> Vec<(i64, Vec<u8>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", "test-view")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "10")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(from))
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let started = Instant::now();
    loop {
        let position = match consumer.position().unwrap().elements()[0].offset() {
            Offset::Offset(o) => o,
            _ => from,
        };
        if position >= to {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "reading {topic}[{partition}] stalled at {position}"
        );
        if let Some(m) = consumer.poll(Duration::from_millis(50)) {
            let m = m.unwrap();
            if m.offset() < to {
                out.push((m.offset(), m.payload().unwrap_or_default().to_vec()));
            }
        }
    }
    out
}

fn event_ids(records: &[(i64, Vec<u8>)]) -> HashSet<String> {
    records
        .iter()
        .filter_map(|(_, p)| AuditEvent::decode(p).ok())
        .map(|e| e.event_id)
        .collect()
}

fn sqlite_ids(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare("SELECT event_id FROM audit_events").unwrap();
    let ids = stmt.query_map([], |r| r.get(0)).unwrap();
    ids.map(Result::unwrap).collect()
}

fn sqlite_count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(db)
        .and_then(|c| c.query_row(sql, [], |r| r.get(0)))
        .unwrap_or(0)
}

/// The report row of `partition` in a `--format json` result.
fn result_row(doc: &serde_json::Value, partition: i64) -> serde_json::Value {
    doc["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {doc}"))
        .iter()
        .find(|r| r["partition"].as_i64() == Some(partition))
        .cloned()
        .unwrap_or_else(|| panic!("no row for partition {partition} in {doc}"))
}

fn unique(ids: Vec<String>) -> HashSet<String> {
    let n = ids.len();
    let set: HashSet<String> = ids.into_iter().collect();
    assert_eq!(set.len(), n, "an event id was written twice");
    set
}

/// Checks what a replay of `[0, 11)` of the layout left behind: exactly what Kafka
/// delivers under read_committed, the markers and aborted records counted, offset 11 committed.
fn assert_transactional_replay(
    s: &str,
    topic: &str,
    ids: HashSet<String>,
    doc: &serde_json::Value,
) {
    let committed_view = delivered(s, topic, 0, "read_committed", 0, 11);
    let everything = delivered(s, topic, 0, "read_uncommitted", 0, 11);
    assert_eq!(
        ids,
        event_ids(&committed_view),
        "rows = what read_committed delivers"
    );
    let row = result_row(doc, 0);
    assert_eq!(
        row["markers"].as_i64(),
        Some(11 - everything.len() as i64),
        "{row}"
    );
    assert_eq!(row["markers"].as_i64(), Some(3), "{row}");
    assert_eq!(
        row["aborted"].as_i64(),
        Some((everything.len() - committed_view.len()) as i64),
        "{row}"
    );
    assert_eq!(row["replay_offset"].as_i64(), Some(11), "{row}");
    assert_eq!(committed(s, REPLAY, topic, 1), vec![Some(11)]);
}

#[test]
fn the_test_broker_lays_out_transactions_as_kafka_does() {
    let broker = BrokerProcess::start(&[]);
    let markers = commit_abort_commit(&broker.servers, "txn-layout", 0);
    assert_eq!(markers, vec![3, 6, 10]);
    assert_eq!(watermarks(&broker.servers, "txn-layout")[0], (0, 11));
    let offsets = |iso| -> Vec<i64> {
        delivered(&broker.servers, "txn-layout", 0, iso, 0, 11)
            .into_iter()
            .map(|r| r.0)
            .collect()
    };
    // The mock never lists aborted transactions in a Fetch answer, so read_committed delivers
    // the aborted records 4 and 5 too: only a real broker filters them.
    assert_eq!(offsets("read_uncommitted"), vec![0, 1, 2, 4, 5, 7, 8, 9]);
    assert_eq!(offsets("read_committed"), vec![0, 1, 2, 4, 5, 7, 8, 9]);
}

#[test]
fn a_transactional_topic_is_planned_and_replayed_completely_with_markers_counted() {
    let broker = BrokerProcess::start(&[]);
    let s = &broker.servers;
    commit_abort_commit(s, "txn1", 0);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let target = format!("sqlite:{}", db.display());

    // Planning by time scans to the position: the last offset is a marker, not a record.
    let started = Instant::now();
    let (code, said, doc) = run(&mut replay(
        dir.path(),
        s,
        "txn1",
        &target,
        &[
            "--since",
            SINCE,
            "--until",
            UNTIL,
            "--partitions",
            "0",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, Some(0), "{said}");
    let p = &doc["plan"]["partitions"][0];
    assert_eq!(
        (p["start"].as_i64(), p["stop"].as_i64()),
        (Some(0), Some(11)),
        "{doc}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "planning took {:?}",
        started.elapsed()
    );

    let (code, said, doc) = run(&mut replay(
        dir.path(),
        s,
        "txn1",
        &target,
        &[
            "--partitions",
            "0",
            "--start",
            "0",
            "--stop",
            "11",
            "--execute",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, Some(0), "{said}");
    assert_transactional_replay(s, "txn1", unique(sqlite_ids(&db)), &doc);
}

#[test]
fn a_transactional_topic_replays_completely_into_postgres() {
    let Some(admin) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let name = format!("lp_txn_{}", std::process::id());
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
        ))
        .unwrap();
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    let broker = BrokerProcess::start(&[]);
    let s = &broker.servers;
    commit_abort_commit(s, "txn-pg", 0);
    let dir = tempfile::tempdir().unwrap();
    let (code, said, doc) = run(&mut replay(
        dir.path(),
        s,
        "txn-pg",
        &url,
        &[
            "--partitions",
            "0",
            "--since",
            SINCE,
            "--until",
            UNTIL,
            "--execute",
            "--format",
            "json",
        ],
    ));
    assert_eq!(code, Some(0), "{said}");
    let ids: Vec<String> = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .query("SELECT event_id FROM audit_events", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_transactional_replay(s, "txn-pg", unique(ids), &doc);
    drop(broker);
    let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
}

#[test]
fn resume_after_a_partial_run_continues_past_the_markers() {
    let broker = BrokerProcess::start(&[]);
    let s = &broker.servers;
    // commit 3, abort 2, then a transaction whose second record is not an audit event.
    let records = |tags: &[&str]| -> Vec<(i64, Vec<u8>)> {
        tags.iter()
            .enumerate()
            .map(|(i, t)| {
                (
                    T0 + i as i64,
                    if *t == "junk" {
                        b"junk".to_vec()
                    } else {
                        event(t)
                    },
                )
            })
            .collect()
    };
    let markers = txn::write(
        s,
        "txn-resume",
        0,
        &[
            Txn {
                records: records(&["r0", "r1", "r2"]),
                commit: true,
            },
            Txn {
                records: records(&["a4", "a5"]),
                commit: false,
            },
            Txn {
                records: records(&["r7", "junk", "r9"]),
                commit: true,
            },
        ],
    );
    assert_eq!(markers, vec![3, 6, 10]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let target = format!("sqlite:{}", db.display());
    let range = [
        "--partitions",
        "0",
        "--start",
        "0",
        "--stop",
        "11",
        "--execute",
    ];
    let mut args = range.to_vec();
    args.extend(["--on-bad-record", "fail", "--batch", "2"]);
    let (code, said, _) = run(&mut replay(dir.path(), s, "txn-resume", &target, &args));
    assert_eq!(code, Some(4), "{said}");
    assert!(said.contains("last durable offset 8"), "{said}");
    assert_eq!(committed(s, REPLAY, "txn-resume", 1), vec![Some(8)]);

    let mut args = range.to_vec();
    args.extend(["--resume", "--format", "json"]);
    let (code, said, doc) = run(&mut replay(dir.path(), s, "txn-resume", &target, &args));
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(committed(s, REPLAY, "txn-resume", 1), vec![Some(11)]);
    assert_eq!(result_row(&doc, 0)["markers"].as_i64(), Some(1), "{doc}");
    let want: HashSet<String> = event_ids(&delivered(s, "txn-resume", 0, "read_committed", 0, 11));
    assert_eq!(unique(sqlite_ids(&db)), want);
    assert_eq!(
        sqlite_count(&db, "SELECT COUNT(*) FROM quarantined_records"),
        1
    );
}

#[test]
fn client_properties_the_replay_owns_are_refused() {
    let broker = BrokerProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    for (property, says) in [
        ("isolation.level=read_uncommitted", "isolation.level"),
        ("isolation.level=read_committed", "isolation.level"),
        ("group.id=someone-else", "group.id"),
        ("enable.auto.commit=true", "enable.auto.commit"),
    ] {
        let (code, said, _) = run(&mut replay(
            dir.path(),
            &broker.servers,
            "any",
            "sqlite:x.db",
            &["-X", property, "--since", SINCE, "--until", UNTIL],
        ));
        assert_eq!(code, Some(2), "{property}: {said}");
        assert!(
            said.contains(says) && said.contains("-X"),
            "{property}: {said}"
        );
    }
    assert!(!dir.path().join("x.db").exists());
}

#[test]
fn duplicate_partitions_and_negative_offsets_are_named() {
    let broker = BrokerProcess::start(&["--sample-day", "dup", "--events", "300"]);
    let dir = tempfile::tempdir().unwrap();
    let s = &broker.servers;
    let (code, said, _) = run(&mut replay(
        dir.path(),
        s,
        "dup",
        "sqlite:x.db",
        &["--partitions", "0,1,0", "--since", SINCE, "--until", UNTIL],
    ));
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("partition 0 is listed twice"), "{said}");
    let (code, said, _) = run(&mut replay(
        dir.path(),
        s,
        "dup",
        "sqlite:x.db",
        &["--partitions", "0", "--start=-5", "--stop", "3"],
    ));
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--start -5 is negative"), "{said}");
    assert!(!said.contains("empty window"), "{said}");
}

/// Produces `(partition, timestamp)` records with audit events as payloads.
fn produce_at(servers: &str, topic: &str, records: &[(i32, i64)]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("linger.ms", "1")
        .create()
        .unwrap();
    for (i, &(p, ts)) in records.iter().enumerate() {
        let payload = event(&format!("{topic}-{p}-{i}"));
        producer
            .send(
                BaseRecord::to(topic)
                    .partition(p)
                    .key("k")
                    .payload(&payload)
                    .timestamp(ts),
            )
            .unwrap();
        producer.flush(Duration::from_secs(10)).unwrap();
    }
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339()
}

#[test]
fn out_of_order_timestamps_plan_exactly_kafkas_answer() {
    let broker = BrokerProcess::start(&[]);
    let s = &broker.servers;
    produce_at(
        s,
        "ooo",
        &[
            (0, 1000),
            (0, 5000),
            (0, 2000),
            (0, 3000),
            (1, 1000),
            (1, 9000),
            (1, 2000),
            (1, 3000),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    // Kafka's rule: the first offset, in offset order, whose timestamp is at or after T.
    for (partition, since, until, want) in [("0", 4000, 10_000, (1, 4)), ("1", 500, 5000, (0, 1))] {
        let (code, said, doc) = run(&mut replay(
            dir.path(),
            s,
            "ooo",
            "sqlite:x.db",
            &[
                "--partitions",
                partition,
                "--since",
                &rfc3339(since),
                "--until",
                &rfc3339(until),
                "--format",
                "json",
            ],
        ));
        assert_eq!(code, Some(0), "partition {partition}: {said}");
        let p = &doc["plan"]["partitions"][0];
        assert_eq!(
            (p["start"].as_i64().unwrap(), p["stop"].as_i64().unwrap()),
            want,
            "partition {partition}: {doc}"
        );
    }
}

#[test]
fn a_partition_whose_records_retention_removed_entirely_is_refused() {
    let broker = BrokerProcess::start(&[]);
    let s = &broker.servers;
    produce_at(s, "gone", &[(0, T0), (0, T0 + 1), (0, T0 + 2)]);
    // One record larger than what the mock keeps per partition pushes every older one out,
    // and the log start becomes the end.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", s)
        .set("message.max.bytes", "8000000")
        .create()
        .unwrap();
    let big = vec![b'x'; 6 * 1024 * 1024];
    producer
        .send(
            BaseRecord::to("gone")
                .partition(0)
                .key("k")
                .payload(&big)
                .timestamp(T0 + 3),
        )
        .unwrap();
    producer.flush(Duration::from_secs(20)).unwrap();
    let (low, high) = watermarks(s, "gone")[0];
    assert_eq!(
        (low, high),
        (4, 4),
        "the mock's retention left the log start at the end"
    );
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["--partitions", "0", "--since", SINCE, "--until", UNTIL],
        vec!["--partitions", "0", "--start", "1", "--stop", "4"],
    ] {
        let (code, said, _) = run(&mut replay(dir.path(), s, "gone", "sqlite:x.db", &args));
        assert_eq!(code, Some(4), "{args:?}: {said}");
        assert!(said.contains("retention removed"), "{args:?}: {said}");
        assert!(
            said.contains("partition 0") && said.contains(", 4)"),
            "{args:?}: {said}"
        );
    }
}
