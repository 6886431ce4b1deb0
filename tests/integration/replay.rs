//! `lessonprobe replay` against `lessonprobe broker` in another process: plans, refusals,
//! execution read back from SQL and the broker, and interruption at random moments.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{commit, committed, first_offset_at, watermarks};
use lessonprobe_testkit::kills::kill_campaign;
use lessonprobe_testkit::postgres::{OwnCluster, OwnDatabase};
use lessonprobe_testkit::replay::assert_incomplete_on;
use lessonprobe_testkit::*;
use ticketflow::day::{self, YESTERDAY};

const TOPIC: &str = "ticketflow.audit.v1";
const LIVE: &str = "ticketflow-audit-v1";
const REPLAY: &str = "ticketflow-replay-20260922";
const SINCE: &str = "2026-09-22T00:00:00Z";
const UNTIL: &str = "2026-09-23T00:00:00Z";

/// `lessonprobe replay` of the sample topic in `dir`, with no target database named.
fn replay_anywhere(dir: &Dir, servers: &str, extra: &[&str]) -> Test {
    dir.lessonprobe()
        .args(["replay", "--kafka", servers, "--topic", TOPIC])
        .args(["--live-group", LIVE, "--replay-group", REPLAY])
        .args(extra)
}

/// `lessonprobe replay` of the sample topic in `dir` into `db`.
fn replay(dir: &Dir, servers: &str, db: &str, extra: &[&str]) -> Test {
    replay_anywhere(dir, servers, &["--db", db]).args(extra)
}

/// The `--db` of an SQLite file.
fn sqlite_target(db: &Path) -> String {
    format!("sqlite:{}", db.display())
}

fn window(extra: &[&'static str]) -> Vec<&'static str> {
    let mut args = vec!["--since", SINCE, "--until", UNTIL];
    args.extend_from_slice(extra);
    args
}

/// What the window holds, from the generator: decodable event ids and undecodable records.
fn expected(events: usize) -> (HashSet<String>, usize) {
    let records = day::generate(&day::sample_day(events));
    let inside: Vec<_> = records
        .iter()
        .filter(|r| r.timestamp_ms >= YESTERDAY.0 && r.timestamp_ms < YESTERDAY.1)
        .collect();
    let ids = inside
        .iter()
        .filter(|r| r.garbage.is_none())
        .map(|r| r.event.event_id.clone())
        .collect();
    (ids, inside.iter().filter(|r| r.garbage.is_some()).count())
}

/// The event ids of `audit_events`, which must be distinct.
#[track_caller]
fn distinct(ids: Vec<String>) -> HashSet<String> {
    let n = ids.len();
    let set: HashSet<String> = ids.into_iter().collect();
    assert_eq!(set.len(), n, "duplicate event ids in audit_events");
    set
}

fn sqlite_ids(db: &Path) -> HashSet<String> {
    distinct(sqlite::strings(db, "SELECT event_id FROM audit_events"))
}

fn sqlite_quarantined(db: &Path) -> usize {
    sqlite::count(db, "SELECT COUNT(*) FROM lessonprobe_replay_quarantine") as usize
}

/// What a replay may create in an empty database: the audit rows and its own bookkeeping.
const AUDIT_TABLES: [&str; 6] = [
    "audit_events",
    "lessonprobe_replay_batches",
    "lessonprobe_replay_conflicts",
    "lessonprobe_replay_partitions",
    "lessonprobe_replay_plans",
    "lessonprobe_replay_quarantine",
];

/// Per partition, the first offset at or after `until`: the plan's stop.
fn stops(servers: &str) -> Vec<i64> {
    watermarks(servers, TOPIC)
        .iter()
        .enumerate()
        .map(|(p, (_, high))| {
            first_offset_at(servers, TOPIC, p as i32, YESTERDAY.1).unwrap_or(*high)
        })
        .collect()
}

/// The invariants of a finished replay.
fn assert_complete(
    servers: &str,
    events: usize,
    ids: HashSet<String>,
    quarantined: usize,
    live: &[Option<i64>],
) {
    let (want, bad) = expected(events);
    assert_eq!(
        ids.len(),
        want.len(),
        "audit rows vs distinct event ids in the window"
    );
    assert!(
        ids == want,
        "rows outside the window or missing: {:?}",
        ids.symmetric_difference(&want).take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        quarantined, bad,
        "quarantined rows vs undecodable records in the window"
    );
    let n = stops(servers).len() as i32;
    let replayed = committed(servers, REPLAY, TOPIC, n);
    assert_eq!(
        replayed,
        stops(servers).into_iter().map(Some).collect::<Vec<_>>(),
        "replay group offsets = stop"
    );
    assert_eq!(
        committed(servers, LIVE, TOPIC, n),
        live,
        "live group offsets unchanged"
    );
}

on_each_broker! {
    fn the_dry_run_prints_the_plan_and_applies_nothing(kind) {
        let broker = kind.sample_day(TOPIC, 900, 3);
        let dir = Dir::new();
        let db = dir.join("audit.db");
        let doc = replay(
            &dir,
            &broker.servers,
            &sqlite_target(&db),
            &window(&["--format", "json"]),
        )
        .success()
        .json();
        let parts = doc["plan"]["partitions"].as_array().unwrap();
        let stops = stops(&broker.servers);
        assert_eq!(parts.len(), 3);
        // The planner's offsets (Apache Kafka answers the timestamp lookups; on the mock cluster
        // the planner reads the records) are those a reading of every record finds.
        for (i, (p, stop)) in parts.iter().zip(&stops).enumerate() {
            assert_eq!(p["stop"].as_i64(), Some(*stop));
            let start = first_offset_at(&broker.servers, TOPIC, i as i32, YESTERDAY.0);
            assert_eq!(p["start"].as_i64(), start, "partition {i}");
            assert!(p["start"].as_i64().unwrap() < *stop);
            assert_eq!(p["live_committed"], serde_json::Value::Null);
        }
        assert!(!db.exists(), "a dry run must not create the database");
        assert_eq!(
            committed(&broker.servers, REPLAY, TOPIC, 3),
            vec![None, None, None]
        );

        let csv = replay(
            &dir,
            &broker.servers,
            "sqlite:x.db",
            &window(&["--format", "csv"]),
        )
        .stdout_matches(
            "partition,since,until,log_start,end,start,stop,records,live,replay,resume_from\n...\n",
        )
        .success()
        .stdout;
        assert_eq!(csv.lines().count(), 4);
        // Read back as CSV: a committed offset that does not exist is an empty field.
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        for (row, stop) in reader.records().zip(&stops) {
            let row = row.unwrap();
            assert_eq!(row[6].parse::<i64>().unwrap(), *stop);
            assert_eq!((&row[8], &row[9]), ("", ""), "{row:?}");
        }
    }
}

on_each_broker! {
    fn execute_writes_audit_rows_only_and_leaves_the_live_group_alone(kind) {
        let events = 1500;
        let broker = kind.sample_day(TOPIC, events, 3);
        let s = &broker.servers;
        let ends: Vec<i64> = watermarks(s, TOPIC).iter().map(|w| w.1).collect();
        commit(s, LIVE, TOPIC, &ends);
        let dir = Dir::new();
        let db = dir.join("audit.db");
        let target = sqlite_target(&db);
        replay(
            &dir,
            s,
            &target,
            &window(&["--execute", "--jobs", "2", "--allow-quarantine"]),
        )
        .output_has("replay result (plan p-")
        .output_has("live_after")
        .success();
        let live: Vec<Option<i64>> = ends.iter().copied().map(Some).collect();
        assert_complete(s, events, sqlite_ids(&db), sqlite_quarantined(&db), &live);
        assert_eq!(
            sqlite::tables(&db),
            AUDIT_TABLES,
            "a replay into an empty file makes audit tables and its own bookkeeping only"
        );

        // The same plan again, with or without --resume: complete, nothing done.
        for extra in [&["--execute"][..], &["--execute", "--resume"][..]] {
            replay(&dir, s, &target, &window(extra))
                .output_has("is complete")
                .output_has("nothing to do")
                .success();
        }
    }
}

on_each_broker! {
    fn a_replay_into_an_empty_postgres_database_makes_audit_tables_only(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let target = OwnDatabase::create(&admin, "replay_tables");
        let runners = OwnDatabase::create(&admin, "runner_scratch");
        let broker = kind.sample_day(TOPIC, 600, 3);
        let dir = Dir::new();
        // The target comes from LESSONPROBE_REPLAY_DB; the runner's LESSONPROBE_DB is not used.
        replay_anywhere(
            &dir,
            &broker.servers,
            &window(&["--execute", "--allow-quarantine"]),
        )
        .env("LESSONPROBE_REPLAY_DB", target.url())
        .env("LESSONPROBE_DB", runners.url())
        .success();
        assert_eq!(target.tables(), AUDIT_TABLES);
        let rows = postgres::count(&target.url(), "SELECT COUNT(*) FROM audit_events");
        assert_eq!(rows as usize, expected(600).0.len());
        assert!(runners.tables().is_empty(), "{:?}", runners.tables());
    }
}

on_each_broker! {
    fn the_runners_database_variable_never_becomes_a_replays_target(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let scratch = OwnDatabase::create(&admin, "runner_only");
        let broker = kind.sample_day(TOPIC, 300, 3);
        let dir = Dir::new();
        replay_anywhere(&dir, &broker.servers, &window(&["--execute"]))
            .env("LESSONPROBE_DB", scratch.url())
            .output_has("LESSONPROBE_DB is the probe runner's scratch database")
            .output_has("--db")
            .output_has("LESSONPROBE_REPLAY_DB")
            .status(2);
        assert!(scratch.tables().is_empty(), "{:?}", scratch.tables());
        assert_eq!(
            committed(&broker.servers, REPLAY, TOPIC, 3),
            vec![None, None, None]
        );
    }
}

on_each_broker! {
    fn refusals_name_the_reason_and_touch_nothing(kind) {
        let broker = kind.sample_day(TOPIC, 600, 3);
        let s = &broker.servers;
        let dir = Dir::new();
        let db = "sqlite:refused.db";
        let refused = |test: Test, args: Vec<&str>, code: i32, says: &str| {
            test.args(args).output_has(says).status(code);
        };
        refused(
            dir.lessonprobe()
                .args(["replay", "--kafka", s, "--topic", TOPIC])
                .args(["--live-group", LIVE, "--replay-group", LIVE, "--db", db]),
            window(&[]),
            4,
            "must differ from the live group",
        );
        let plain = || replay(&dir, s, db, &[]);
        refused(
            plain(),
            vec!["--since", UNTIL, "--until", SINCE],
            2,
            "empty window: --until must be later than --since",
        );
        refused(
            plain(),
            vec![
                "--since",
                "2030-01-01T00:00:00Z",
                "--until",
                "2030-01-02T00:00:00Z",
            ],
            4,
            "empty window",
        );
        refused(
            plain(),
            window(&["--partitions", "7"]),
            4,
            "has 3 partitions",
        );
        refused(
            plain(),
            vec!["--partitions", "0", "--start", "5", "--stop", "100000"],
            4,
            "beyond the end offset",
        );
        refused(
            plain(),
            vec!["--start", "5", "--stop", "10"],
            4,
            "exactly one with --partitions",
        );
        refused(
            plain(),
            vec!["--since", "yesterday", "--until", UNTIL],
            2,
            "RFC 3339",
        );
        refused(
            replay(&dir, s, "mysql://x", &[]),
            window(&[]),
            2,
            "expected sqlite:PATH or postgres://URL",
        );
        refused(
            replay(&dir, "embedded", db, &[]),
            window(&[]),
            2,
            "embedded broker is refused",
        );

        // A replay group that committed outside the plan belongs to someone else.
        commit(s, REPLAY, TOPIC, &[1, 1, 1]);
        refused(
            plain(),
            window(&["--resume"]),
            4,
            "choose a new --replay-group",
        );
        assert!(!dir.join("refused.db").exists());
    }
}

on_each_broker! {
    fn explicit_offsets_of_one_partition_and_a_bad_record_that_must_stop(kind) {
        let broker = kind.sample_day(TOPIC, 3000, 3);
        let s = &broker.servers;
        // Find an undecodable record and replay up to and past it with --on-bad-record fail.
        let records = day::generate(&day::sample_day(3000));
        let (partition, offset) = {
            let mut next = [0i64; 3];
            let mut found = None;
            for r in &records {
                let p = day::partition_for(&r.key, 3) as usize;
                if r.garbage.is_some() && found.is_none() {
                    found = Some((p as i32, next[p]));
                }
                next[p] += 1;
            }
            found.expect("the sample day has undecodable records")
        };
        let dir = Dir::new();
        let db = dir.join("a.db");
        let p = partition.to_string();
        let (start, stop) = ((offset - 5).max(0).to_string(), (offset + 5).to_string());
        // Both runs replay the same range around it.
        let range = [
            "--partitions",
            &p,
            "--start",
            &start,
            "--stop",
            &stop,
            "--execute",
        ];
        let args = [&range[..], &["--on-bad-record", "fail", "--batch", "3"]].concat();
        replay(&dir, s, &sqlite_target(&db), &args)
            .output_has(format!("last durable offset {offset}"))
            .status(4);
        let mut want = vec![None; 3];
        want[partition as usize] = Some(offset);
        assert_eq!(committed(s, REPLAY, TOPIC, 3), want);

        // Quarantining it lets the rerun finish; the bad record is kept with its reason.
        let args = [&range[..], &["--resume", "--allow-quarantine"]].concat();
        replay(&dir, s, &sqlite_target(&db), &args).success();
        let conn = rusqlite::Connection::open(&db).unwrap();
        let (o, reason): (i64, String) = conn
            .query_row(
                "SELECT record_offset, reason FROM lessonprobe_replay_quarantine",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(o, offset);
        assert!(reason.contains("not an audit event"), "{reason}");
    }
}

on_each_broker! {
    /// Into SQLite without `--batch` the whole window is one transaction here (the default
    /// grows with the plan from 100,000 records): partitions stopped at their bad record
    /// mid-way through it leave every batch before theirs committed and nothing after, Kafka's
    /// offsets at the SQL checkpoints and never past them, and a resume lands every row once.
    fn a_failure_midway_through_a_default_transaction_then_a_resume_lands_every_row_once(kind) {
        let (events, partitions) = (6000, 3);
        let broker = kind.sample_day(TOPIC, events, partitions);
        let s = &broker.servers;
        let live: Vec<i64> = watermarks(s, TOPIC).iter().map(|w| w.1).collect();
        commit(s, LIVE, TOPIC, &live);
        let dir = Dir::new();
        let db = dir.join("audit.db");
        let target = sqlite_target(&db);
        replay(&dir, s, &target, &window(&["--execute", "--on-bad-record", "fail"]))
            .output_has("not an audit event")
            .status(4);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let checkpoints: Vec<(i64, i64, i64, i64)> = conn
            .prepare(
                "SELECT start_offset, next_offset, stop_offset, inserted
                 FROM lessonprobe_replay_partitions ORDER BY partition",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(checkpoints.len(), partitions as usize);
        assert!(
            checkpoints.iter().any(|&(start, next, stop, _)| start < next && next < stop),
            "a partition stopped mid-way: {checkpoints:?}"
        );
        let kafka = committed(s, REPLAY, TOPIC, partitions);
        for (p, (&(start, next, _, _), offset)) in checkpoints.iter().zip(&kafka).enumerate() {
            assert_eq!(
                offset.unwrap_or(start),
                next,
                "partition {p}: Kafka's offset is the SQL checkpoint"
            );
        }
        let inserted: i64 = checkpoints.iter().map(|c| c.3).sum();
        assert_eq!(
            sqlite::count(&db, "SELECT COUNT(*) FROM audit_events"),
            inserted,
            "the rows are what the committed batches inserted"
        );
        drop(conn);

        replay(
            &dir,
            s,
            &target,
            &window(&["--execute", "--resume", "--allow-quarantine"]),
        )
        .success();
        let live: Vec<Option<i64>> = live.into_iter().map(Some).collect();
        assert_complete(s, events, sqlite_ids(&db), sqlite_quarantined(&db), &live);
    }
}

/// Rows so far, read while a replay may be writing (0 before the table exists).
fn rows_now(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .and_then(|c| c.query_row("SELECT COUNT(*) FROM audit_events", [], |r| r.get(0)))
        .unwrap_or(0)
}

on_each_broker! {
    fn sigkill_at_random_moments_loses_nothing(kind) {
        let events = 60_000;
        let broker = kind.sample_day(TOPIC, events, 6);
        let s = &broker.servers;
        let live: Vec<i64> = watermarks(s, TOPIC).iter().map(|w| w.1 - 3).collect();
        commit(s, LIVE, TOPIC, &live);
        let dir = Dir::new();
        let db = dir.join("audit.db");
        let target = sqlite_target(&db);
        let started = Instant::now();
        let campaign = kill_campaign(
            30,
            30,
            Duration::from_millis(150),
            |run| {
                replay(
                    &dir,
                    s,
                    &target,
                    &window(&[
                        "--execute",
                        "--resume",
                        "--batch",
                        run.batch("1"),
                        "--allow-quarantine",
                    ]),
                )
                .spawn()
            },
            || rows_now(&db),
            |_| {},
        );
        eprintln!(
            "{} kills in {} runs, {:?}",
            campaign.kills,
            campaign.runs,
            started.elapsed()
        );
        let live: Vec<Option<i64>> = live.into_iter().map(Some).collect();
        assert_complete(s, events, sqlite_ids(&db), sqlite_quarantined(&db), &live);
    }
}

on_each_broker! {
    fn postgres_stopped_and_restarted_mid_replay_loses_nothing(kind) {
        let Some(pg_ctl) = services::pg_ctl() else {
            return;
        };
        let cluster = OwnCluster::start(&pg_ctl);
        let events = 9_000;
        let broker = kind.sample_day(TOPIC, events, 3);
        let s = &broker.servers;
        let dir = Dir::new();
        let url = cluster.url();
        // Without retries: the run ends on the outage (replay_outages.rs rides through it).
        let run = replay(&dir, s, &url, &window(&["--execute", "--batch", "1", "--retry-for", "0"]))
            .output_has("last durable offset")
            .output_has("--resume")
            .spawn();
        // Stop the server once the replay has made some rows durable, well before it is done.
        let started = Instant::now();
        let mut client = postgres::connect(&url);
        loop {
            let rows = client
                .query_one("SELECT COUNT(*) FROM audit_events", &[])
                .map(|r| r.get::<_, i64>(0))
                .unwrap_or(0);
            if rows >= 50 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the replay wrote nothing in 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(client);
        cluster.stop();
        run.status(4);
        cluster.restart();
        let before = postgres::count(&url, "SELECT COUNT(*) FROM audit_events");
        assert!(
            before > 0,
            "the replay made progress before the server stopped"
        );

        replay(
            &dir,
            s,
            &url,
            &window(&["--execute", "--resume", "--allow-quarantine"]),
        )
        .success();
        let ids = distinct(postgres::strings(&url, "SELECT event_id FROM audit_events"));
        let q = postgres::count(&url, "SELECT COUNT(*) FROM lessonprobe_replay_quarantine");
        assert_complete(s, events, ids, q as usize, &[None, None, None]);
    }
}

/// A window that ends where it starts, or before, is a usage error named by its flags, for a
/// replay and for a verification alike, before any broker or database is contacted (nothing
/// listens at the broker's address and no database file appears).
#[test]
fn a_backwards_window_is_a_usage_error_before_anything_connects() {
    let dir = Dir::new();
    let nowhere = "127.0.0.1:9";
    let db = "sqlite:never.db";
    let cases: [(&[&str], &str); 3] = [
        (
            &["--since", UNTIL, "--until", SINCE],
            "lessonprobe: empty window: --until must be later than --since",
        ),
        (
            &["--since", SINCE, "--until", SINCE],
            "lessonprobe: empty window: --until must be later than --since",
        ),
        (
            &["--partitions", "0", "--start", "7", "--stop", "7"],
            "lessonprobe: empty window: --stop 7 must be greater than --start 7",
        ),
    ];
    for (window, says) in cases {
        replay(&dir, nowhere, db, &["--execute"])
            .args(window)
            .stderr(format!("{says}\n"))
            .status(2);
        dir.lessonprobe()
            .args(["replay", "verify", "--kafka", nowhere, "--topic", TOPIC])
            .args(["--db", db])
            .args(window)
            .stderr(format!("{says}\n"))
            .status(2);
    }
    assert!(!dir.join("never.db").exists());
}

/// `replay status` of an SQLite file that does not exist says so (a mistyped path is not an
/// empty record) and creates nothing.
#[test]
fn replay_status_of_a_missing_sqlite_file_says_there_is_none() {
    let dir = Dir::new();
    dir.lessonprobe()
        .args(["replay", "status", "--db", "sqlite:typo.db"])
        .stderr("lessonprobe: sqlite typo.db: no such database file\n")
        .status(4);
    assert!(!dir.join("typo.db").exists());
}

/// An empty or blank topic or group name is a usage error naming its flag (Kafka has no such
/// names: the topic was "not found" and an empty group failed inside librdkafka).
#[test]
fn an_empty_topic_or_group_name_is_a_usage_error_naming_its_flag() {
    let dir = Dir::new();
    let nowhere = "127.0.0.1:9";
    let names = |blank: (&'static str, &'static str), flags: &[(&'static str, &'static str)]| {
        flags
            .iter()
            .flat_map(|&(flag, value)| [flag, if flag == blank.0 { blank.1 } else { value }])
            .collect::<Vec<&str>>()
    };
    let replay_names = [
        ("--topic", TOPIC),
        ("--live-group", LIVE),
        ("--replay-group", REPLAY),
    ];
    for blank in [
        ("--topic", ""),
        ("--live-group", ""),
        ("--replay-group", " "),
    ] {
        dir.lessonprobe()
            .args(["replay", "--kafka", nowhere, "--db", "sqlite:never.db"])
            .args(names(blank, &replay_names))
            .args(window(&[]))
            .stderr_has(format!("invalid value '{}' for '{} ", blank.1, blank.0))
            .stderr_has("a topic or group name must not be empty")
            .status(2);
    }
    let verify_names = [("--topic", TOPIC), ("--live-group", LIVE)];
    for blank in [("--topic", ""), ("--live-group", "\t")] {
        dir.lessonprobe()
            .args([
                "replay",
                "verify",
                "--kafka",
                nowhere,
                "--db",
                "sqlite:never.db",
            ])
            .args(names(blank, &verify_names))
            .args(window(&[]))
            .stderr_has(format!("for '{} ", blank.0))
            .stderr_has("a topic or group name must not be empty")
            .status(2);
    }
    assert!(!dir.join("never.db").exists());
}

on_each_broker! {
    /// A broker that goes away mid-replay (SIGTERM to `lessonprobe broker` after durable batches):
    /// the run ends by itself well before its deadline — a commit the coordinator never answers
    /// fails after the operation timeout instead of waiting for one — with exit 4 and the report
    /// of every partition: each one's `replay_offset` is its SQL checkpoint, the unfinished ones
    /// say why, and the live group's offsets after the run are reported unknown, not compared.
    fn a_broker_gone_mid_replay_ends_the_run_with_every_partition_reported(kind) {
        let mut broker = kind.sample_day(TOPIC, 20_000, 2);
        let dir = Dir::new();
        let file = dir.join("gone.db");
        let db = sqlite_target(&file);
        let mut running = replay(&dir, &broker.servers, &db, &["--execute", "--batch", "1"])
            .args(window(&["--allow-quarantine", "--idle-timeout", "3s"]))
            .args(["--deadline", "100s", "--format", "csv", "--retry-for", "0"])
            .spawn();
        sqlite::wait_for_durable_batches(&file, 3, &mut running);
        assert!(broker.terminate().is_some(), "the broker did not stop");
        // The deadline's own watchdog would end it at 105 s: it must end before, on its own.
        let ran = running.within(Duration::from_secs(90)).status(4);
        assert!(!ran.stderr.contains("the deadline of"), "{}", ran.stderr);
        assert!(
            ran.stderr.contains(
                "lessonprobe replay: the live group ticketflow-audit-v1's committed offsets could not be read after the run, so whether it moved is unknown"
            ),
            "{}",
            ran.stderr
        );
        let checkpoints = sqlite::checkpoints(&file);
        let mut unfinished = 0;
        for row in csv_rows(&ran.stdout) {
            let p: i32 = row["partition"].parse().unwrap();
            let (at, stop) = checkpoints[&p];
            assert_eq!(row["replay_offset"].parse::<i64>().unwrap(), at, "{row:?}");
            assert_eq!(row["live_after"], "", "not read, so not shown: {row:?}");
            if at < stop {
                unfinished += 1;
                assert!(row["status"].starts_with("error: "), "{row:?}");
            }
        }
        assert!(unfinished > 0, "{checkpoints:?}");
        assert_incomplete_on(&ran, unfinished);
    }
}

/// An Apache Kafka killed with `kill -9` in the middle of `replay --execute` (once some batches
/// are durable in SQL) and started again on the same log: the run either fails with the report
/// of every partition (exit 4, each row's `replay_offset` its SQL checkpoint) or rides out the
/// restart and completes; either way a `--resume` then ends with exactly the window's distinct
/// rows, every SQL checkpoint at its stop and the replay group's offsets, read from the
/// restarted broker, at the stops.
#[test]
fn apache_kafka_killed_and_restarted_mid_replay_then_a_resume_completes_the_window() {
    on_apache_kafka(|kind| {
        let events = 20_000;
        let broker = kind.sample_day(TOPIC, events, 3);
        let s = &broker.servers;
        let dir = Dir::new();
        let file = dir.join("crash.db");
        let db = sqlite_target(&file);
        let mut running = replay(&dir, s, &db, &["--execute", "--batch", "20"])
            .args(window(&["--allow-quarantine", "--idle-timeout", "30s"]))
            .args(["--deadline", "150s", "--format", "csv"])
            .spawn();
        sqlite::wait_for_durable_batches(&file, 3, &mut running);
        let kafka = broker.apache_kafka();
        let pids = kafka.pids();
        kafka.kill();
        for pid in &pids {
            assert!(
                !std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| s
                    .lines()
                    .any(|l| l.starts_with("State:") && !l.contains('Z'))),
                "broker process {pid} outlived kill -9"
            );
        }
        assert!(
            running.is_running(),
            "the replay ended before the broker was killed"
        );
        let killed_at = sqlite::checkpoints(&file);
        assert!(
            killed_at.values().any(|(at, stop)| at < stop),
            "the replay was done before the kill: {killed_at:?}"
        );
        kafka.restart();

        let ran = running
            .within(Duration::from_secs(160))
            .status_among(&[0, 4]);
        let rows = csv_rows(&ran.stdout);
        let checkpoints = sqlite::checkpoints(&file);
        eprintln!(
            "the run after the broker's restart: exit {:?}, checkpoints {checkpoints:?}\n{}",
            ran.code,
            ran.text()
        );
        assert_eq!(rows.len(), 3, "every partition reported: {}", ran.text());
        for row in &rows {
            let p: i32 = row["partition"].parse().unwrap();
            let (at, stop) = checkpoints[&p];
            assert_eq!(row["replay_offset"].parse::<i64>().unwrap(), at, "{row:?}");
            if at < stop {
                assert!(row["status"].starts_with("error: "), "{row:?}");
            }
        }
        if ran.code == Some(4) {
            let unfinished = checkpoints.values().filter(|(at, stop)| at < stop).count();
            assert_incomplete_on(&ran, unfinished);
        } else {
            assert!(
                checkpoints.values().all(|(at, stop)| at == stop),
                "exit 0 with partitions short of their stops: {checkpoints:?}"
            );
        }

        replay(
            &dir,
            s,
            &db,
            &window(&["--execute", "--resume", "--allow-quarantine"]),
        )
        .within(Duration::from_secs(120))
        .success();
        let stops = stops(s);
        for (p, (at, stop)) in sqlite::checkpoints(&file) {
            assert_eq!(at, stop, "partition {p}: SQL checkpoint at its stop");
            assert_eq!(stop, stops[p as usize], "partition {p}: the plan's stop");
        }
        assert_complete(
            s,
            events,
            sqlite_ids(&file),
            sqlite_quarantined(&file),
            &[None, None, None],
        );
    });
}
