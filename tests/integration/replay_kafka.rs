//! `lessonprobe replay` on topics as real producers write them, on both brokers (librdkafka's
//! mock cluster in `lessonprobe broker`, and Apache Kafka): transactions (control markers,
//! aborted records), out-of-order timestamps, retention that removed a window, a live group
//! that keeps consuming, deadlines, and SIGKILLs on a transactional topic. Outcomes are read
//! back from SQL and from the broker. What only Apache Kafka can answer is in [`apache`].

mod apache;
mod txn;

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{
    assign_at, commit, committed, delete_records, first_offset_at, producer, watermarks,
};
use lessonprobe_testkit::kills::kill_campaign;
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::replay::replay_args;
use lessonprobe_testkit::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset};
use ticketflow::event::AuditEvent;
use txn::Txn;

const LIVE: &str = "audit-live";
const REPLAY: &str = "audit-replay";
/// 2026-09-22T10:00:00Z: records a test stamps inside the window `[SINCE, UNTIL)`.
const T0: i64 = 1_790_071_200_000;
const SINCE: &str = "2026-09-22T00:00:00Z";
const UNTIL: &str = "2026-09-23T00:00:00Z";
/// The window `[SINCE, UNTIL)` as `replay` options.
const WINDOW: [&str; 4] = ["--since", SINCE, "--until", UNTIL];

/// `lessonprobe replay` of `topic` into `db`.
fn replay(dir: &Dir, servers: &str, topic: &str, db: &str, args: &[&str]) -> Test {
    dir.lessonprobe()
        .args(replay_args(servers, topic, LIVE, REPLAY, db))
        .args(args)
}

/// Runs `test`, which must exit `code`: everything it printed, and stdout as JSON (null when
/// it is not JSON).
#[track_caller]
fn run(test: Test, code: i32) -> (String, serde_json::Value) {
    let ran = test.status(code);
    let doc = serde_json::from_str(&ran.stdout).unwrap_or(serde_json::Value::Null);
    (ran.text(), doc)
}

/// Partition 0's offsets `[0, 11)`, replayed: the three transactions of the transactional tests
/// and the marker that ends the last.
const ALL_11_OF_PARTITION_0: [&str; 7] = [
    "--partitions",
    "0",
    "--start",
    "0",
    "--stop",
    "11",
    "--execute",
];

/// `start`, `stop` and `end` of partition `partition` in the JSON plan of `test` (a `replay`
/// that plans and stops), which must exit 0.
#[track_caller]
fn plan_of_partition(test: Test, partition: &str) -> (Option<i64>, Option<i64>, Option<i64>) {
    let (_, doc) = run(
        test.args(["--partitions", partition, "--format", "json"]),
        0,
    );
    let p = &doc["plan"]["partitions"][0];
    (p["start"].as_i64(), p["stop"].as_i64(), p["end"].as_i64())
}

/// Now, in milliseconds since the epoch.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A window by time around the present, `[now - 1 day, now + 1 day)`, and a time an hour ago
/// to stamp records with. Transactional records are stamped with the present, as a producer
/// stamps them: Apache Kafka stamps each control marker with the time of its commit, and
/// answers a window's end with the first offset stamped at or after it, marker or record — a
/// marker of today would end a window of September at the first commit.
fn around_now() -> (String, String, i64) {
    let now = now_ms();
    let day = 86_400_000;
    (rfc3339(now - day), rfc3339(now + day), now - 3_600_000)
}

/// An audit event whose id names where it was written.
fn event(tag: &str) -> Vec<u8> {
    AuditEvent::sample_with_id(tag).to_json()
}

/// The layout on `topic[partition]`: commit 3, abort 2, commit 3 — markers at 3, 6
/// and 10, end 11. The records are stamped an hour ago, a second apart.
fn commit_abort_commit(kind: BrokerKind, servers: &str, topic: &str, partition: i32) -> Vec<i64> {
    let (_, _, recent) = around_now();
    let txn = |first: i64, n: i64, commit: bool| Txn {
        records: (first..first + n)
            .map(|i| {
                (
                    recent + i * 1000,
                    event(&format!("{topic}-{partition}-{i}")),
                )
            })
            .collect(),
        commit,
    };
    txn::write(
        kind,
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
    assign_at(&consumer, topic, partition, Offset::Offset(from));
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
    sqlite::strings(db, "SELECT event_id FROM audit_events")
}

/// The one integer `sql` answers, 0 when it cannot be read (before the replay made its tables).
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

on_each_broker! {
    fn the_test_broker_lays_out_transactions_as_kafka_does(kind) {
        let broker = kind.start();
        let markers = commit_abort_commit(kind, &broker.servers, "txn-layout", 0);
        assert_eq!(markers, vec![3, 6, 10]);
        assert_eq!(watermarks(&broker.servers, "txn-layout")[0], (0, 11));
        let offsets = |iso| -> Vec<i64> {
            delivered(&broker.servers, "txn-layout", 0, iso, 0, 11)
                .into_iter()
                .map(|r| r.0)
                .collect()
        };
        assert_eq!(offsets("read_uncommitted"), vec![0, 1, 2, 4, 5, 7, 8, 9]);
        match kind {
            // Apache Kafka filters the aborted records 4 and 5 for a read_committed reader.
            BrokerKind::ApacheKafka => assert_eq!(offsets("read_committed"), vec![0, 1, 2, 7, 8, 9]),
            // The mock never lists aborted transactions in a Fetch answer, so read_committed
            // delivers the aborted records too.
            BrokerKind::MockCluster => {
                assert_eq!(offsets("read_committed"), vec![0, 1, 2, 4, 5, 7, 8, 9])
            }
        }
    }
}

on_each_broker! {
    fn a_transactional_topic_is_planned_and_replayed_completely_with_markers_counted(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        commit_abort_commit(kind, s, "txn1", 0);
        let (since, until, _) = around_now();
        let dir = Dir::new();
        let db = &dir.join("audit.db");
        let target = format!("sqlite:{}", db.display());

        // Planning by time scans to the position: the last offset is a marker, not a record.
        let started = Instant::now();
        let window = ["--since", &since, "--until", &until];
        let (start, stop, _) =
            plan_of_partition(replay(&dir, s, "txn1", &target, &window), "0");
        assert_eq!((start, stop), (Some(0), Some(11)));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "planning took {:?}",
            started.elapsed()
        );

        let (_, doc) = run(
            replay(&dir, s, "txn1", &target, &ALL_11_OF_PARTITION_0).args(["--format", "json"]),
            0,
        );
        assert_transactional_replay(s, "txn1", unique(sqlite_ids(db)), &doc);
        // The target's checkpoint is the position past the last marker, with the counts beside it.
        let row = result_row(&doc, 0);
        assert_eq!(
            sqlite_count(
                db,
                "SELECT next_offset * 10000 + markers * 100 + aborted FROM lessonprobe_replay_partitions"
            ),
            11 * 10000 + row["markers"].as_i64().unwrap() * 100 + row["aborted"].as_i64().unwrap()
        );
    }
}

on_each_broker! {
    fn a_transactional_topic_replays_completely_into_postgres(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let db = OwnDatabase::create(&admin, "txn");
        let url = db.url();
        let broker = kind.start();
        let s = &broker.servers;
        commit_abort_commit(kind, s, "txn-pg", 0);
        let (since, until, _) = around_now();
        let dir = Dir::new();
        let (_, doc) = run(
            replay(
                &dir,
                s,
                "txn-pg",
                &url,
                &[
                    "--partitions",
                    "0",
                    "--since",
                    &since,
                    "--until",
                    &until,
                    "--execute",
                    "--format",
                    "json",
                ],
            ),
            0,
        );
        let ids = postgres::strings(&url, "SELECT event_id FROM audit_events");
        assert_transactional_replay(s, "txn-pg", unique(ids), &doc);
        drop(broker);
    }
}

on_each_broker! {
    fn resume_after_a_partial_run_continues_past_the_markers(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        let (_, _, recent) = around_now();
        // commit 3, abort 2, then a transaction whose second record is not an audit event.
        let records = |tags: &[&str]| -> Vec<(i64, Vec<u8>)> {
            tags.iter()
                .enumerate()
                .map(|(i, t)| {
                    (
                        recent + i as i64,
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
            kind,
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
        let dir = Dir::new();
        let db = &dir.join("audit.db");
        let target = format!("sqlite:{}", db.display());
        let all = || replay(&dir, s, "txn-resume", &target, &ALL_11_OF_PARTITION_0);
        let (said, _) = run(all().args(["--on-bad-record", "fail", "--batch", "2"]), 4);
        assert!(said.contains("last durable offset 8"), "{said}");
        assert_eq!(committed(s, REPLAY, "txn-resume", 1), vec![Some(8)]);

        let (_, doc) = run(
            all().args(["--resume", "--allow-quarantine", "--format", "json"]),
            0,
        );
        assert_eq!(committed(s, REPLAY, "txn-resume", 1), vec![Some(11)]);
        assert_eq!(result_row(&doc, 0)["markers"].as_i64(), Some(1), "{doc}");
        let want: HashSet<String> = event_ids(&delivered(s, "txn-resume", 0, "read_committed", 0, 11));
        assert_eq!(unique(sqlite_ids(db)), want);
        assert_eq!(
            sqlite_count(db, "SELECT COUNT(*) FROM lessonprobe_replay_quarantine"),
            1
        );
    }
}

#[test]
fn client_properties_the_replay_owns_are_refused() {
    let broker = BrokerProcess::start(&[]);
    let dir = Dir::new();
    for (property, says) in [
        ("isolation.level=read_uncommitted", "isolation.level"),
        ("isolation.level=read_committed", "isolation.level"),
        ("group.id=someone-else", "group.id"),
        ("enable.auto.commit=true", "enable.auto.commit"),
    ] {
        let (said, _) = run(
            replay(
                &dir,
                &broker.servers,
                "any",
                "sqlite:x.db",
                &["-X", property, "--since", SINCE, "--until", UNTIL],
            ),
            2,
        );
        assert!(
            said.contains(says) && said.contains("-X"),
            "{property}: {said}"
        );
    }
    assert!(!&dir.join("x.db").exists());
}

#[test]
fn duplicate_partitions_and_negative_offsets_are_named() {
    let broker = BrokerProcess::sample_day("dup", 300, 3);
    let dir = Dir::new();
    let s = &broker.servers;
    let (said, _) = run(
        replay(
            &dir,
            s,
            "dup",
            "sqlite:x.db",
            &["--partitions", "0,1,0", "--since", SINCE, "--until", UNTIL],
        ),
        2,
    );
    assert!(said.contains("partition 0 is listed twice"), "{said}");
    let (said, _) = run(
        replay(
            &dir,
            s,
            "dup",
            "sqlite:x.db",
            &["--partitions", "0", "--start=-5", "--stop", "3"],
        ),
        2,
    );
    assert!(said.contains("--start -5 is negative"), "{said}");
    assert!(!said.contains("empty window"), "{said}");
}

/// Produces `(partition, timestamp)` records with audit events as payloads.
fn produce_at(servers: &str, topic: &str, records: &[(i32, i64)]) {
    let producer = producer(servers, &[("linger.ms", "1")]);
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

/// The out-of-order timestamps: `[1000, 5000, 2000, 3000]` on partition 0 and
/// `[1000, 9000, 2000, 3000]` on partition 1.
fn produce_out_of_order(servers: &str, topic: &str) {
    let on = |p, ts: [i64; 4]| ts.map(|t| (p, t));
    let records: Vec<(i32, i64)> = [
        on(0, [1000, 5000, 2000, 3000]),
        on(1, [1000, 9000, 2000, 3000]),
    ]
    .concat();
    produce_at(servers, topic, &records);
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap()
        .to_rfc3339()
}

on_each_broker! {
    fn out_of_order_timestamps_plan_exactly_kafkas_answer(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        produce_out_of_order(s, "ooo");
        let dir = Dir::new();
        // Kafka's rule: the first offset, in offset order, whose timestamp is at or after T.
        for (partition, since, until, want) in [("0", 4000, 10_000, (1, 4)), ("1", 500, 5000, (0, 1))] {
            let window = ["--since", &rfc3339(since), "--until", &rfc3339(until)];
            let (start, stop, _) =
                plan_of_partition(replay(&dir, s, "ooo", "sqlite:x.db", &window), partition);
            assert_eq!((start, stop), (Some(want.0), Some(want.1)), "partition {partition}");
        }
    }
}

on_each_broker! {
    fn records_outside_the_window_and_late_arrivals_are_counted_per_partition(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        produce_out_of_order(s, "late");
        let dir = Dir::new();
        // Partition 0, window [4 s, 10 s): Kafka's range [1, 4) holds 2 s and 3 s, outside it.
        // Partition 1, window [0.5 s, 5 s): range [0, 1); past stop, 2 s and 3 s belong to the
        // window (9 s does not), and a skew of 10 s reads on to the end to count them.
        for (partition, since, until, skew, want) in [
            ("0", 4000, 10_000, None, (3, 2, 0)),
            ("1", 500, 5000, Some("10s"), (1, 0, 2)),
        ] {
            let db = format!("sqlite:{}", &dir.join(format!("p{partition}.db")).display());
            let window = ["--since", &rfc3339(since), "--until", &rfc3339(until)];
            let test = replay(&dir, s, "late", &db, &window)
                .args(["--partitions", partition, "--execute", "--format", "json"])
                .args(skew.map(|skew| ["--skew", skew]).into_iter().flatten());
            let (_, doc) = run(test, 0);
            let row = result_row(&doc, partition.parse().unwrap());
            assert_eq!(
                (
                    row["records"].as_i64().unwrap(),
                    row["out_of_window"].as_i64().unwrap(),
                    row["late"].as_i64().unwrap()
                ),
                want,
                "partition {partition}: {row}"
            );
        }
    }
}

on_each_broker! {
    fn a_partition_whose_records_retention_removed_entirely_is_refused(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        produce_at(s, "gone", &[(0, T0), (0, T0 + 1), (0, T0 + 2)]);
        match kind {
            // One record larger than what the mock keeps per partition pushes every older one
            // out, and the log start becomes the end.
            BrokerKind::MockCluster => {
                let producer = producer(s, &[("message.max.bytes", "8000000")]);
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
            }
            // Apache Kafka keeps these records forever (and refuses a 6 MiB one): DeleteRecords
            // moves its log start instead.
            BrokerKind::ApacheKafka => {
                produce_at(s, "gone", &[(0, T0 + 3)]);
                delete_records(s, "gone", 0, 4);
            }
        }
        let (low, high) = watermarks(s, "gone")[0];
        assert_eq!(
            (low, high),
            (4, 4),
            "retention left the log start at the end"
        );
        let dir = Dir::new();
        for args in [
            vec!["--partitions", "0", "--since", SINCE, "--until", UNTIL],
            vec!["--partitions", "0", "--start", "1", "--stop", "4"],
        ] {
            let (said, _) = run(replay(&dir, s, "gone", "sqlite:x.db", &args), 4);
            assert!(said.contains("retention removed"), "{args:?}: {said}");
            assert!(
                said.contains("partition 0") && said.contains(", 4)"),
                "{args:?}: {said}"
            );
        }
    }
}

on_each_broker! {
    /// A plan stopped at an undecodable record, then resumed after retention removed offsets it
    /// had already replayed: the resume needs only what follows its checkpoint, which is still
    /// there. Planned as new, the window's start is gone; the recorded plan decides.
    fn a_resume_after_retention_removed_replayed_offsets_continues_from_its_checkpoint(kind) {
        let broker = kind.start();
        let s = &broker.servers;
        let producer = producer(s, &[("message.max.bytes", "8000000")]);
        let send = |payload: &[u8], ts: i64| {
            producer
                .send(
                    BaseRecord::to("trimmed")
                        .partition(0)
                        .key("k")
                        .payload(payload)
                        .timestamp(ts),
                )
                .unwrap();
            // One message set per record: retention removes whole sets.
            producer.flush(Duration::from_secs(20)).unwrap();
        };
        let big = |i: i64| {
            let mut e = AuditEvent::sample_with_id(&format!("big-{i}"));
            // The mock removes old records by size alone; Apache Kafka refuses records over 1 MiB.
            let pad = match kind {
                BrokerKind::MockCluster => 1_500_000,
                BrokerKind::ApacheKafka => 1000,
            };
            e.payload = serde_json::json!({ "version": i, "pad": "x".repeat(pad) });
            e.to_json()
        };
        // In the window: three records of 1.5 MB (offsets 0-2), an undecodable one (3), two small
        // events (4, 5); then a record past the window's end (6).
        for i in 0..3 {
            send(&big(i), T0 + i);
        }
        send(b"not an event", T0 + 3);
        send(&event("small-4"), T0 + 4);
        send(&event("small-5"), T0 + 5);
        send(&event("after"), T0 + 86_400_000);
        let dir = Dir::new();
        let window = [&WINDOW[..], &["--partitions", "0", "--execute"]].concat();
        let (said, _) = run(
            replay(&dir, s, "trimmed", "sqlite:t.db", &window).args(["--on-bad-record", "fail"]),
            4,
        );
        assert!(said.contains("last durable offset 3"), "{said}");
        // Two more large records past the window: the mock keeps about 5 MiB of a partition, so
        // the oldest sets go. Apache Kafka keeps them all: DeleteRecords removes the first two.
        for i in 0..2 {
            send(&big(100 + i), T0 + 86_400_000 + 1 + i);
        }
        if kind == BrokerKind::ApacheKafka {
            delete_records(s, "trimmed", 0, 2);
        }
        let (low, _) = watermarks(s, "trimmed")[0];
        assert!(
            (1..=3).contains(&low),
            "retention should have removed offsets before the checkpoint 3 only, log start {low}"
        );
        let (said, _) = run(
            replay(&dir, s, "trimmed", "sqlite:t.db", &window).args(["--resume", "--allow-quarantine"]),
            0,
        );
        assert!(!said.contains("retention removed"), "{said}");
        let db = dir.join("t.db");
        assert_eq!(sqlite_count(&db, "SELECT COUNT(*) FROM audit_events"), 5);
        assert_eq!(
            sqlite_count(&db, "SELECT COUNT(*) FROM lessonprobe_replay_quarantine"),
            1
        );
        assert_eq!(
            sqlite_count(&db, "SELECT next_offset FROM lessonprobe_replay_partitions"),
            6
        );
        assert_eq!(committed(s, REPLAY, "trimmed", 1), [Some(6)]);
    }
}

/// Rows so far, read while a replay may be writing (0 before the table exists).
fn rows_now(db: &Path) -> i64 {
    sqlite_count(db, "SELECT COUNT(*) FROM audit_events")
}

/// Waits (up to 60 s) until a replay under way has made rows durable in `db`.
#[track_caller]
fn until_rows_in(db: &Path) {
    let started = Instant::now();
    while rows_now(db) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the replay wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A sample day on three partitions with the live group committed at 10 on each, and a slow
/// replay of it (`--batch 1`) into a database in the folder, returned once it has made rows
/// durable.
fn replay_under_way(kind: BrokerKind) -> (BrokerProcess, Dir, Running) {
    let broker = kind.sample_day("day", 30_000, 3);
    commit(&broker.servers, LIVE, "day", &[10, 10, 10]);
    let dir = Dir::new();
    let db = dir.join("audit.db");
    let run = replay(
        &dir,
        &broker.servers,
        "day",
        &format!("sqlite:{}", db.display()),
        &WINDOW,
    )
    .args(["--execute", "--batch", "1", "--allow-quarantine"])
    .spawn();
    until_rows_in(&db);
    (broker, dir, run)
}

on_each_broker! {
    fn a_live_consumer_committing_during_a_replay_is_reported_not_failed(kind) {
        let (broker, _dir, run) = replay_under_way(kind);
        let s = &broker.servers;
        // The live service keeps consuming and committing its progress meanwhile.
        for step in 1..=5 {
            commit(s, LIVE, "day", &[10 + 10 * step, 10, 10 + step]);
            std::thread::sleep(Duration::from_millis(20));
        }
        let ran = run.success();
        let said = ran.text();
        for line in [
            "live group audit-live advanced by 50 on partition 0 while the replay ran",
            "live group audit-live advanced by 5 on partition 2 while the replay ran",
        ] {
            assert!(said.contains(line), "{line:?} missing: {said}");
        }
        assert!(!said.contains("partition 1 while"), "{said}");
        assert_eq!(
            committed(s, LIVE, "day", 3),
            vec![Some(60), Some(10), Some(15)]
        );
    }
}

on_each_broker! {
    fn a_live_group_reset_backwards_during_a_replay_fails_it(kind) {
        let (broker, _dir, run) = replay_under_way(kind);
        let s = &broker.servers;
        commit(s, LIVE, "day", &[4, 10, 10]); // an operator resets the running group
        run.status(4);
    }
}

on_each_broker! {
    fn a_deadline_is_reported_as_a_deadline_on_every_partition_and_ends_the_run_in_time(kind) {
        // About 1,800 records per partition in the window: two seconds at a record a
        // transaction reach a few of the 30 stops, never 10 (with half as many, a quiet run
        // finished 11).
        let broker = kind.sample_day("day", 120_000, 30);
        let dir = Dir::new();
        let db = &dir.join("audit.db");
        let ran = replay(&dir, &broker.servers, "day", &format!("sqlite:{}", db.display()), &WINDOW)
            .args(["--execute", "--batch", "1", "--deadline", "2s"])
        // 2 s, plus start-up and the final read of the live group's offsets.
        .within(Duration::from_millis(3500))
        .status(4);
        let said = ran.text();
        let stderr = &ran.stderr;
        let failures: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("lessonprobe replay: partition "))
            .collect();
        // Every partition that did not reach its stop (begun or not) names the run's deadline.
        let finished = committed(&broker.servers, REPLAY, "day", 30)
            .iter()
            .zip(0..)
            .filter(|(c, p)| {
                **c == Some(
                    first_offset_at(&broker.servers, "day", *p, ticketflow::day::YESTERDAY.1).unwrap(),
                )
            })
            .count();
        assert!(failures.len() >= 20, "{stderr}");
        assert_eq!(failures.len() + finished, 30, "{stderr}");
        assert!(
            stderr.contains(&format!(
                "replay incomplete on {} partition(s)",
                failures.len()
            )),
            "{stderr}"
        );
        for line in &failures {
            assert!(
                line.contains("deadline of 2s reached") && line.contains("last durable offset"),
                "{line}"
            );
        }
        assert!(!said.contains("BrokerTransportFailure"), "{said}");
        assert!(!stderr.contains('\u{1b}'), "colour on a pipe: {stderr}");
        let mut kinds = HashSet::new();
        for line in stderr.lines().filter(|l| l.contains("librdkafka: ")) {
            let kind = line
                .split("librdkafka: ")
                .last()
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            assert!(kinds.insert(kind.to_owned()), "{kind} twice: {stderr}");
        }
        // What was durable when the deadline came is in SQL with its checkpoint, and Kafka's
        // committed offset is that checkpoint, never ahead of it.
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut stmt = conn
            .prepare("SELECT partition, start_offset, next_offset, records FROM lessonprobe_replay_partitions")
            .unwrap();
        let checkpoints: Vec<(i32, i64, i64, i64)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(checkpoints.len(), 30);
        let on_broker = committed(&broker.servers, REPLAY, "day", 30);
        for &(p, start, next, records) in &checkpoints {
            let kafka = on_broker[p as usize].unwrap_or(start);
            assert!(
                kafka <= next,
                "partition {p}: Kafka {kafka} ahead of SQL {next}"
            );
            assert_eq!(
                records,
                next - start,
                "partition {p}: the checkpoint covers its records"
            );
        }
        let applied: i64 = checkpoints.iter().map(|c| c.2 - c.1).sum();
        let sum_records = sqlite_count(db, "SELECT SUM(records) FROM lessonprobe_replay_partitions");
        assert!(applied > 0 && applied == sum_records, "{checkpoints:?}");
    }
}

/// Delivers what the real replay consumer delivers, except the record at `skip`: a consumer that
/// loses a committed record. Its re-reads are the real ones.
struct Skipping {
    inner: ticketflow::kafka::KafkaReplayConsumer,
    skip: i64,
}

impl ticketflow::replay::ReplayConsumer for Skipping {
    fn group_id(&self) -> &str {
        self.inner.group_id()
    }
    fn end_offset(&mut self, t: &str, p: i32) -> Result<i64, ticketflow::replay::ConsumerError> {
        self.inner.end_offset(t, p)
    }
    fn seek(&mut self, t: &str, p: i32, o: i64) -> Result<(), ticketflow::replay::ConsumerError> {
        self.inner.seek(t, p, o)
    }
    fn poll(
        &mut self,
        d: Duration,
    ) -> Result<Option<ticketflow::replay::ReplayRecord>, ticketflow::replay::ConsumerError> {
        match self.inner.poll(d)? {
            Some(r) if r.offset == self.skip => self.inner.poll(d),
            other => Ok(other),
        }
    }
    fn position(
        &mut self,
        t: &str,
        p: i32,
    ) -> Result<Option<i64>, ticketflow::replay::ConsumerError> {
        self.inner.position(t, p)
    }
    fn reread(
        &mut self,
        t: &str,
        p: i32,
        from: i64,
        to: i64,
    ) -> Result<Option<ticketflow::replay::GapReading>, ticketflow::replay::ConsumerError> {
        self.inner.reread(t, p, from, to)
    }
    fn commit(&mut self, t: &str, p: i32, o: i64) -> Result<(), ticketflow::replay::ConsumerError> {
        self.inner.commit(t, p, o)
    }
}

on_each_broker! {
    fn a_jump_the_rereads_do_not_explain_still_fails_and_commits_only_before_it(kind) {
        use ticketflow::replay::{
            run_bounded_replay, GapFinding, PartitionRequest, ReplayErrorKind, ReplayLimits,
            ReplayPlan,
        };
        let broker = kind.start();
        let s = &broker.servers;
        commit_abort_commit(kind, s, "gap", 0);
        let target: ticketflow::KafkaTarget = s.parse().unwrap();
        let kafka = ticketflow::kafka::Broker::for_target(&target, Duration::from_secs(10)).unwrap();
        let plan = ReplayPlan::new(PartitionRequest {
            live_group: LIVE,
            replay_group: REPLAY,
            topic: "gap",
            partition: 0,
            start: 0,
            stop: 11,
        })
        .unwrap();
        let inner = ticketflow::kafka::KafkaReplayConsumer::new(&kafka, &plan.group()).unwrap();
        let mut consumer = Skipping { inner, skip: 8 };
        let mut store = ticketflow::store::SqliteAuditStore::in_memory().unwrap();
        let limits = ReplayLimits {
            deadline: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(3),
        };
        let err = run_bounded_replay(&plan, limits, &mut consumer, &mut store).unwrap_err();
        assert!(
            matches!(
                err.kind,
                ReplayErrorKind::UnexplainedGap {
                    expected: 8,
                    got: 9,
                    finding: GapFinding::Undelivered { offset: 8 }
                }
            ),
            "{err}"
        );
        assert_eq!(err.committed, Some(8), "{err}");
        assert_eq!(committed(s, REPLAY, "gap", 1), vec![Some(8)]);
        // Offsets 0-7 made durable: the records the broker delivers there (Apache Kafka 0-2 and
        // 7; the mock hands over the aborted 4 and 5 too), no more.
        assert_eq!(
            ticketflow::store::AuditStore::audit_rows(&mut store).unwrap(),
            delivered(s, "gap", 0, "read_committed", 0, 8).len() as u64
        );
    }
}

on_each_broker! {
    fn sigkill_at_random_moments_on_a_transactional_topic_loses_and_doubles_nothing(kind) {
        use rand::{Rng, SeedableRng};
        let broker = kind.start();
        let s = &broker.servers;
        let (since, until, recent) = around_now();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(10);
        let partitions = 4;
        let mut n = 0i64;
        for p in 0..partitions {
            let txns: Vec<Txn> = (0..120)
                .map(|_| {
                    let size = rng.random_range(1..40);
                    let records = (0..size)
                        .map(|_| {
                            n += 1;
                            (recent + n, event(&format!("k-{p}-{n}")))
                        })
                        .collect();
                    Txn {
                        records,
                        commit: rng.random_range(0..10) > 0,
                    }
                })
                .collect();
            txn::write(kind, s, "txn-kill", p, &txns);
        }
        let ends: Vec<i64> = watermarks(s, "txn-kill").iter().map(|w| w.1).collect();
        let dir = Dir::new();
        let db = &dir.join("audit.db");
        let target = format!("sqlite:{}", db.display());
        kill_campaign(
            rng.random(),
            30,
            Duration::from_millis(100),
            |run| {
                replay(
                    &dir,
                    s,
                    "txn-kill",
                    &target,
                    &[
                        "--since",
                        &since,
                        "--until",
                        &until,
                        "--execute",
                        "--resume",
                        "--batch",
                        run.batch("1"),
                    ],
                )
                .spawn()
            },
            || rows_now(db),
            |_| {},
        );
        let mut want = HashSet::new();
        for p in 0..partitions {
            want.extend(event_ids(&delivered(
                s,
                "txn-kill",
                p,
                "read_committed",
                0,
                ends[p as usize],
            )));
        }
        assert_eq!(
            unique(sqlite_ids(db)),
            want,
            "rows = what read_committed delivers"
        );
        assert_eq!(
            committed(s, REPLAY, "txn-kill", partitions),
            ends.iter().copied().map(Some).collect::<Vec<_>>(),
            "every partition committed to its end, past its last marker"
        );
    }
}

/// The Kafka clients a run opened, as the debug log of `ticketflow::kafka::clients` lists them:
/// `(librdkafka's number of the client, its role)`.
fn clients_opened(stderr: &str) -> Vec<(u32, String)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("kafka client opened: ").nth(1)?;
            let (name, role) = rest.split_once(" (")?;
            let number = name.rsplit('-').next()?.parse().ok()?;
            Some((number, role.rsplit_once("), ")?.0.to_owned()))
        })
        .collect()
}

on_each_broker! {
    /// One client per role: the lookup client, one client of the live group (read before and
    /// after), one of the replay group (read while planning, committing for every lane), and one
    /// fetching consumer per lane — counted against librdkafka's own numbering of the clients
    /// it made in the process, so a client opened anywhere else would show.
    fn a_replay_opens_one_client_per_role_and_one_consumer_per_lane(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let broker = kind.start();
        let s = &broker.servers;
        let records: Vec<(i32, i64)> = (0..4).flat_map(|p| (0..5).map(move |i| (p, T0 + i))).collect();
        produce_at(s, "clients", &records);
        let db = OwnDatabase::create(&admin, "clients");
        let dir = Dir::new();
        let sqlite = format!("sqlite:{}", dir.join("clients.db").display());
        // A replay group per target: a group with offsets and no plan in the target is refused.
        for (target, group) in [(db.url(), "clients-pg"), (sqlite, "clients-sqlite")] {
            let ran = dir
                .lessonprobe()
                .args(replay_args(s, "clients", LIVE, group, &target))
                .args(["--since", SINCE, "--until", UNTIL, "--execute"])
                .env("RUST_LOG", "warn,ticketflow::kafka::clients=debug")
                .status(0);
            let lanes: usize = ran
                .stderr
                .split(" partition(s) at once")
                .next()
                .and_then(|head| head.rsplit(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("no lane count:\n{}", ran.stderr));
            let postgres = target.starts_with("postgres");
            // The default: several lanes into PostgreSQL (4 partitions here), one into SQLite.
            assert_eq!(lanes > 1, postgres, "{target}: {lanes} lanes");
            let clients = clients_opened(&ran.stderr);
            let mut numbers: Vec<u32> = clients.iter().map(|c| c.0).collect();
            numbers.sort_unstable();
            assert_eq!(
                numbers,
                (1..=clients.len() as u32).collect::<Vec<_>>(),
                "every client librdkafka made is counted once:\n{}",
                ran.stderr
            );
            let count = |f: &dyn Fn(&str) -> bool| clients.iter().filter(|c| f(&c.1)).count();
            let fetching = count(&|r| r.contains(&format!("group {group}, read_committed, fetch wait 10 ms")));
            let replay_group = count(&|r| r.contains(&format!("group {group},"))) - fetching;
            let live = count(&|r| r.contains(&format!("group {LIVE},")));
            let lookup = count(&|r| r.contains("group lessonprobe-utility, read_committed"));
            // The mock cluster answers no timestamp lookup: planning reads the partitions once.
            let scan = count(&|r| r.contains("group lessonprobe-utility, read_uncommitted"));
            assert_eq!(
                (fetching, replay_group, live, lookup),
                (lanes, 1, 1, 1),
                "{target}: {clients:?}"
            );
            assert_eq!(clients.len(), lanes + 3 + scan, "{target}: {clients:?}");
            assert!(scan <= usize::from(matches!(kind, BrokerKind::MockCluster)), "{clients:?}");
        }
        drop(broker);
    }
}
