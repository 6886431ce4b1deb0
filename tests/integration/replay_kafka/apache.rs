//! What only Apache Kafka can answer: a real coordinator's transactions interleaved with a plain
//! producer (aborted records filtered, markers of its own), planning by time from the broker's
//! index on many partitions, and DeleteRecords before and during a replay.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rand::{Rng, SeedableRng};

use super::*;
use lessonprobe_testkit::kafka::{create_topic, send_when_room};

/// Sends one record to `topic[0]` and waits until the broker has it, so the offsets follow the
/// order of the calls.
fn send_one(producer: &BaseProducer, topic: &str, id: &str) {
    let payload = event(id);
    producer
        .send(BaseRecord::to(topic).partition(0).key(id).payload(&payload))
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
}

/// The event ids of `layout` (`(offset, id)`) that lie in `[from, to)`.
fn ids_in(layout: &[(i64, String)], from: i64, to: i64) -> HashSet<String> {
    layout
        .iter()
        .filter(|(o, _)| (from..to).contains(o))
        .map(|(_, id)| id.clone())
        .collect()
}

/// A real transactional producer commits, aborts and commits on a partition that a plain
/// producer writes to in between (also while a transaction is open). A replay by offsets and
/// one by time write exactly the committed and the plain events, never an aborted one; their
/// reports count the markers and the aborted records, the gaps they jumped over; and the replay
/// groups' committed offsets are the stops.
#[test]
fn committed_and_plain_records_are_replayed_and_aborted_ones_never() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let s = &broker.servers;
        let topic = "mixed";
        let began = now_ms();
        let plain = producer(s, &[("linger.ms", "0")]);
        let txn = producer(s, &[("transactional.id", "test-mixed"), ("linger.ms", "0")]);
        let t = Duration::from_secs(10);
        txn.init_transactions(t).unwrap();
        let mut markers = Vec::new();
        // A transaction while `sends` are made in order (the plain producer's among them, outside
        // it), then committed or aborted.
        let mut transaction = |sends: &[(&BaseProducer, &str)], commit: bool| {
            txn.begin_transaction().unwrap();
            for (producer, id) in sends {
                send_one(producer, topic, id);
            }
            if commit {
                txn.commit_transaction(t).unwrap();
            } else {
                txn.abort_transaction(t).unwrap();
            }
            // The coordinator's marker is on the partition before anything else is written.
            markers.push(txn::coordinators_marker(s, topic, 0));
        };
        send_one(&plain, topic, "plain-0");
        send_one(&plain, topic, "plain-1");
        transaction(
            &[
                (&txn, "committed-a0"),
                (&txn, "committed-a1"),
                (&plain, "plain-2"),
                (&txn, "committed-a2"),
            ],
            true,
        );
        transaction(
            &[
                (&txn, "aborted-b0"),
                (&txn, "aborted-b1"),
                (&plain, "plain-3"),
            ],
            false,
        );
        send_one(&plain, topic, "plain-4");
        transaction(
            &[
                (&txn, "committed-c0"),
                (&plain, "plain-5"),
                (&txn, "committed-c1"),
                (&txn, "committed-c2"),
            ],
            true,
        );
        send_one(&plain, topic, "plain-6");
        drop(txn);

        // The layout, read back: every record once, the markers where the commits put them.
        assert_eq!(markers, [6, 10, 16]);
        assert_eq!(watermarks(s, topic)[0], (0, 18));
        let layout: Vec<(i64, String)> = delivered(s, topic, 0, "read_uncommitted", 0, 18)
            .into_iter()
            .map(|(o, p)| (o, AuditEvent::decode(&p).unwrap().event_id))
            .collect();
        let committed_view = delivered(s, topic, 0, "read_committed", 0, 18);
        let offsets = |r: &[(i64, Vec<u8>)]| r.iter().map(|r| r.0).collect::<Vec<_>>();
        assert_eq!(
            layout.iter().map(|r| r.0).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 13, 14, 15, 17]
        );
        assert_eq!(
            offsets(&committed_view),
            [0, 1, 2, 3, 4, 5, 9, 11, 12, 13, 14, 15, 17],
            "Apache Kafka filters the aborted 7 and 8"
        );
        let aborted: HashSet<String> = ["aborted-b0", "aborted-b1"].map(String::from).into();
        let not_aborted = |from, to| -> HashSet<String> {
            ids_in(&layout, from, to)
                .difference(&aborted)
                .cloned()
                .collect()
        };

        // By offsets, [2, 17): from inside the first transaction to past the last marker.
        let dir = Dir::new();
        let by_offsets = dir.join("offsets.db");
        let ran = dir
            .lessonprobe()
            .args(["replay", "--kafka", s, "--topic", topic])
            .args(["--live-group", LIVE, "--replay-group", "by-offsets", "--db"])
            .arg(format!("sqlite:{}", by_offsets.display()))
            .args(["--partitions", "0", "--start", "2", "--stop", "17"])
            .args(["--execute", "--format", "csv"])
            .success();
        let rows = csv_rows(&ran.stdout);
        assert_eq!(rows.len(), 1, "{}", ran.stdout);
        let row = &rows[0];
        assert_eq!(
            (
                row["markers"].as_str(),
                row["aborted"].as_str(),
                row["replay_offset"].as_str(),
                row["status"].as_str()
            ),
            ("3", "2", "17", "ok"),
            "{}",
            ran.stdout
        );
        let ids = unique(sqlite_ids(&by_offsets));
        assert_eq!(ids, not_aborted(2, 17));
        assert_eq!(ids.len(), 10);
        assert_eq!(committed(s, "by-offsets", topic, 1), [Some(17)]);

        // By time, a window around every record and marker: the whole partition.
        let since = rfc3339((began / 1000 - 60) * 1000);
        let until = rfc3339((now_ms() / 1000 + 60) * 1000);
        let by_time = dir.join("time.db");
        let ran = dir
            .lessonprobe()
            .args(["replay", "--kafka", s, "--topic", topic])
            .args(["--live-group", LIVE, "--replay-group", "by-time", "--db"])
            .arg(format!("sqlite:{}", by_time.display()))
            .args(["--partitions", "0", "--since", &since, "--until", &until])
            .args(["--execute", "--format", "json"])
            .success();
        let doc = ran.json();
        let plan = &doc["plan"][0];
        assert_eq!(
            (plan["start"].as_i64(), plan["stop"].as_i64()),
            (Some(0), Some(18)),
            "{doc}"
        );
        let row = result_row(&doc, 0);
        assert_eq!(
            (
                row["markers"].as_i64(),
                row["aborted"].as_i64(),
                row["replay_offset"].as_i64()
            ),
            (Some(3), Some(2), Some(18)),
            "{row}"
        );
        let ids = unique(sqlite_ids(&by_time));
        assert_eq!(ids, not_aborted(0, 18));
        assert_eq!(
            ids,
            event_ids(&committed_view),
            "rows = what read_committed delivers"
        );
        assert_eq!(ids.len(), 13);
        assert!(ids.is_disjoint(&aborted));
        assert_eq!(committed(s, "by-time", topic, 1), [Some(18)]);
        // The target's checkpoint carries the same counts.
        assert_eq!(
            sqlite::strings(
                &by_time,
                "SELECT next_offset || ' ' || markers || ' ' || aborted FROM lessonprobe_replay_partitions"
            ),
            ["18 3 2"]
        );
    });
}

/// `(offset, timestamp)` of every record of `topic[partition]` up to its end.
fn timestamps(servers: &str, topic: &str, partition: i32) -> Vec<(i64, i64)> {
    let consumer = lessonprobe_testkit::kafka::reader(servers, "test-timestamps");
    let (low, high) = consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .unwrap();
    assign_at(&consumer, topic, partition, Offset::Offset(low));
    let mut out = Vec::new();
    while out.last().map_or(low, |r: &(i64, i64)| r.0 + 1) < high {
        let m = consumer
            .poll(Duration::from_secs(10))
            .expect("a record")
            .unwrap();
        out.push((m.offset(), m.timestamp().to_millis().unwrap()));
    }
    out
}

/// A one-day window on 100 partitions whose timestamps go back and forth is planned from the
/// broker's time index, not by reading the window (the planner says which way it took), and
/// each partition's range is Kafka's rule, worked out here by reading every record: the first
/// offset, in offset order, whose timestamp is at or after `--since`, and the same for
/// `--until` (the end where there is none).
#[test]
fn a_day_on_100_partitions_is_planned_from_the_brokers_index() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let s = &broker.servers;
        let topic = "wide";
        let partitions = 100;
        create_topic(s, topic, partitions);
        let since_ms = T0 - 10 * 3_600_000; // 2026-09-22T00:00:00Z
        let until_ms = since_ms + 86_400_000;
        // Per partition 40 records stamped anywhere from 6 h before the window to 6 h after
        // it, in no order.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let producer = producer(s, &[("linger.ms", "5")]);
        for p in 0..partitions {
            for i in 0..40 {
                let ts = rng.random_range(since_ms - 21_600_000..until_ms + 21_600_000);
                let payload = event(&format!("wide-{p}-{i}"));
                let key = format!("k{i}");
                let record = BaseRecord::to(topic)
                    .partition(p)
                    .key(&key)
                    .payload(&payload)
                    .timestamp(ts);
                send_when_room(&producer, record);
            }
        }
        producer.flush(Duration::from_secs(30)).unwrap();

        let dir = Dir::new();
        let ran = replay(
            &dir,
            s,
            topic,
            "sqlite:x.db",
            &["--since", &rfc3339(since_ms), "--until", &rfc3339(until_ms)],
        )
        .args(["--format", "json"])
        .env("RUST_LOG", "ticketflow=debug")
        .success();
        assert!(
            ran.stderr.contains(&format!(
                "{topic}: offsets by time from the broker's index (ListOffsets) on {partitions} partition(s)"
            )),
            "{}",
            ran.stderr
        );
        assert!(
            !ran.stderr
                .contains("the broker answers no timestamp lookup"),
            "the window was read: {}",
            ran.stderr
        );
        let doc = ran.json();
        let plan: HashMap<i64, (i64, i64)> = doc["plan"]["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["partition"].as_i64().unwrap(),
                    (p["start"].as_i64().unwrap(), p["stop"].as_i64().unwrap()),
                )
            })
            .collect();
        assert_eq!(plan.len(), partitions as usize, "{doc}");
        let (mut non_empty, mut late) = (0, 0);
        for p in 0..partitions {
            let records = timestamps(s, topic, p);
            assert_eq!(records.len(), 40);
            let end = 40;
            let first_at = |t: i64| records.iter().find(|r| r.1 >= t).map(|r| r.0);
            let start = first_at(since_ms).unwrap_or(end);
            let stop = first_at(until_ms).unwrap_or(end).max(start);
            // Timestamps that go back: a record before the window after one inside it.
            assert!(
                records.windows(2).any(|w| w[1].1 < w[0].1),
                "partition {p} is in time order"
            );
            assert_eq!(
                plan[&i64::from(p)],
                (start, stop),
                "partition {p}: {records:?}"
            );
            non_empty += usize::from(start < stop);
            // Records of the window after the stop: the rule is the offset order's, not the
            // clock's.
            late += usize::from(
                records[stop as usize..]
                    .iter()
                    .any(|r| (since_ms..until_ms).contains(&r.1)),
            );
        }
        // With this seed 72 partitions hold a range of the window, and most hold events of
        // the window past their stop.
        assert!(
            non_empty > 50,
            "only {non_empty} partitions hold the window"
        );
        assert!(
            late > 50,
            "only {late} partitions hold records of the window past their stop"
        );
    });
}

/// Records of the window deleted (DeleteRecords) before a replay is planned: by time and by
/// offsets the replay is refused, naming retention and the offsets gone, and writes nothing.
#[test]
fn records_deleted_before_planning_refuse_the_replay_naming_retention() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let s = &broker.servers;
        produce_at(
            s,
            "deleted",
            &(0..10).map(|i| (0, T0 + i)).collect::<Vec<_>>(),
        );
        delete_records(s, "deleted", 0, 4);
        assert_eq!(watermarks(s, "deleted")[0], (4, 10));
        let dir = Dir::new();
        for args in [
            vec!["--partitions", "0", "--since", SINCE, "--until", UNTIL],
            vec!["--partitions", "0", "--start", "2", "--stop", "8"],
        ] {
            let mut args = args;
            args.push("--execute");
            let (said, _) = run(replay(&dir, s, "deleted", "sqlite:x.db", &args), 4);
            assert!(said.contains("retention removed"), "{args:?}: {said}");
            assert!(said.contains("partition 0"), "{args:?}: {said}");
            assert!(said.contains(", 4)"), "{args:?}: {said}");
        }
        assert_eq!(
            sqlite_count(&dir.join("x.db"), "SELECT COUNT(*) FROM audit_events"),
            0
        );
        assert_eq!(committed(s, REPLAY, "deleted", 1), [None]);
    });
}

/// The log start moves past a running replay's position (DeleteRecords while a `--batch 1` run
/// writes): the run ends with its report, naming retention; the rows are exactly the events
/// below its checkpoint — every one a real event of the window, each once, none missing
/// below the checkpoint — and the broker's committed offset, the SQL checkpoint and the report
/// agree.
#[test]
fn the_log_start_moving_past_a_running_replay_ends_it_with_nothing_lost_or_invented() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let s = &broker.servers;
        let topic = "shrinking";
        // 10,000 events of about 3 KB: more than the replay consumer prefetches (8 MiB), so
        // its position is still far below the deletion when it comes.
        let records: Vec<(i32, Vec<u8>)> = (0..10_000)
            .map(|i| {
                let mut e = AuditEvent::sample_with_id(&format!("s-{i:05}"));
                e.payload = serde_json::json!({ "i": i, "pad": "x".repeat(3000) });
                (0, e.to_json())
            })
            .collect();
        lessonprobe_testkit::kafka::produce(s, topic, T0, &records);
        let window: HashMap<i64, String> = delivered(s, topic, 0, "read_committed", 0, 10_000)
            .into_iter()
            .map(|(o, p)| (o, AuditEvent::decode(&p).unwrap().event_id))
            .collect();
        assert_eq!(window.len(), 10_000);
        let dir = Dir::new();
        let db = dir.join("audit.db");
        let run = replay(&dir, s, topic, &format!("sqlite:{}", db.display()), &WINDOW)
            .args([
                "--partitions",
                "0",
                "--execute",
                "--batch",
                "1",
                "--format",
                "json",
            ])
            .spawn();
        until_rows_in(&db);
        let cut = 7_000;
        delete_records(s, topic, 0, cut);
        let ran = run.status(4);
        let said = ran.text();
        assert!(said.contains("retention removed offsets ["), "{said}");
        assert!(
            said.contains(&format!(", {cut}) while the replay ran")),
            "{said}"
        );
        let doc: serde_json::Value =
            serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("no report ({e}): {said}"));
        let row = result_row(&doc, 0);
        let reported = row["replay_offset"].as_i64().unwrap();

        let checkpoint = sqlite_count(&db, "SELECT next_offset FROM lessonprobe_replay_partitions");
        let recorded = sqlite_count(&db, "SELECT records FROM lessonprobe_replay_partitions");
        assert!(
            0 < checkpoint && checkpoint < cut,
            "checkpoint {checkpoint}"
        );
        assert_eq!(reported, checkpoint, "{row}");
        assert_eq!(committed(s, REPLAY, topic, 1), [Some(checkpoint)]);
        assert_eq!(recorded, checkpoint, "the checkpoint covers its records");
        let ids = unique(sqlite_ids(&db));
        let below: HashSet<String> = (0..checkpoint).map(|o| window[&o].clone()).collect();
        assert_eq!(
            ids, below,
            "rows = the window's events below the checkpoint"
        );
        assert_eq!(watermarks(s, topic)[0], (cut, 10_000));
    });
}

/// Transactional records stamped in the past (a producer that sets their timestamps, a mirror
/// that keeps them) and committed now: Apache Kafka stamps each marker with the time of its
/// commit and answers a time with the first offset stamped at or after it, marker or record.
/// A window that ends before the commits ends at the first marker, and what follows it is
/// late, as Kafka's rule has it. (The mock cluster answers no lookup; the replay then reads,
/// and markers carry no timestamp a client sees: there the window runs on to the end.)
#[test]
fn a_marker_stamped_after_the_window_ends_it_as_kafkas_rule_says() {
    on_apache_kafka(|kind| {
        let broker = kind.start();
        let s = &broker.servers;
        let txn = |first: i64, commit: bool| Txn {
            records: (first..first + 3)
                .map(|i| (T0 + i * 1000, event(&format!("past-{i}"))))
                .collect(),
            commit,
        };
        let markers = txn::write(kind, s, "past", 0, &[txn(0, true), txn(3, true)]);
        assert_eq!(markers, [3, 7]);
        let dir = Dir::new();
        let plan = plan_of_partition(replay(&dir, s, "past", "sqlite:x.db", &WINDOW), "0");
        assert_eq!(plan, (Some(0), Some(3), Some(8)));
    });
}
