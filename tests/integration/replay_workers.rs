//! `lessonprobe replay --execute --worker`: three processes share one plan through the replay
//! group, one of them is SIGKILLed mid-run, and the others finish it — read back from the
//! target (rows, batches, checkpoints, owners) and from `lessonprobe broker` (the group's
//! committed offsets), on PostgreSQL and on SQLite, on the mock cluster and on Apache Kafka.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::committed;
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::replay::{assert_incomplete_on, replay_args, SAMPLE_DAYS};
use lessonprobe_testkit::*;

const TOPIC: &str = "workers";
const GROUP: &str = "replay-workers";
const EVENTS: usize = 24_000;
const PARTITIONS: i32 = 6;

/// The database the workers share, read back through the test's own connections.
enum Target {
    Postgres(OwnDatabase),
    /// The folder goes with the value.
    Sqlite {
        _dir: Dir,
        file: PathBuf,
    },
}

impl Target {
    fn url(&self) -> String {
        match self {
            Target::Postgres(db) => db.url(),
            Target::Sqlite { file, .. } => format!("sqlite:{}", file.display()),
        }
    }

    /// The one integer `sql` answers; 0 while the tables do not exist yet.
    fn count(&self, sql: &str) -> i64 {
        match self {
            Target::Postgres(db) => db
                .client()
                .query_one(sql, &[])
                .map(|r| r.get(0))
                .unwrap_or(0),
            Target::Sqlite { file, .. } => rusqlite::Connection::open(file)
                .and_then(|c| c.query_row(sql, [], |r| r.get(0)))
                .unwrap_or(0),
        }
    }

    fn strings(&self, sql: &str) -> Vec<String> {
        match self {
            Target::Postgres(db) => postgres::strings(&db.url(), sql),
            Target::Sqlite { file, .. } => sqlite::rows(file, sql),
        }
    }
}

fn worker(servers: &str, db: &str, session_timeout: Duration) -> Test {
    worker_in_session(servers, db, "100", "150s", session_timeout)
}

fn worker_with(servers: &str, db: &str, batch: &str, deadline: &str) -> Test {
    // The default already; stated so the test does not depend on it.
    worker_in_session(servers, db, batch, deadline, Duration::from_secs(6))
}

/// The run `worker` makes of a lone worker into a SQLite file of its own (given its `--db`),
/// which must exit 4 within `limit`: what it printed, and each partition's checkpoint and stop
/// as SQL holds them after it.
#[track_caller]
fn lone_worker_ending_4(
    worker: impl FnOnce(&str) -> Test,
    limit: Duration,
) -> (Ran, BTreeMap<i32, (i64, i64)>) {
    let dir = Dir::new();
    let file = dir.join("worker.db");
    let ran = worker(&format!("sqlite:{}", file.display()))
        .within(limit)
        .status(4);
    (ran, sqlite::checkpoints(&file))
}

fn worker_in_session(
    servers: &str,
    db: &str,
    batch: &str,
    deadline: &str,
    session_timeout: Duration,
) -> Test {
    lessonprobe()
        .args(replay_args(servers, TOPIC, "live-workers", GROUP, db))
        .args(SAMPLE_DAYS)
        .args([
            "--execute",
            "--worker",
            "--batch",
            batch,
            "--allow-quarantine",
            "--deadline",
            deadline,
            "--format",
            "csv",
        ])
        .args(["-X"])
        .arg(format!(
            "session.timeout.ms={}",
            session_timeout.as_millis()
        ))
}

/// Three workers on one plan, one SIGKILLed after it made batches durable: the other two finish
/// the plan, each event once, each offset applied once, and the group's offsets at stop. The
/// partitions the killed worker held (unfinished in SQL) are claimed by another worker once the
/// group's coordinator counts it dead, one `session_timeout` after its last heartbeat: the time
/// from the kill until then is returned.
fn three_workers_one_killed(
    kind: BrokerKind,
    target: Target,
    session_timeout: Duration,
) -> Duration {
    let broker = kind.sample_day(TOPIC, EVENTS, PARTITIONS);
    let s = &broker.servers;
    let db = target.url();
    let mut workers: Vec<Running> = (0..3)
        .map(|_| worker(s, &db, session_timeout).spawn())
        .collect();
    let owned_by = |pid: u32| {
        format!("SELECT COUNT(*) FROM lessonprobe_replay_batches WHERE owner LIKE '%:{pid}:%'")
    };
    // The victim is the first worker with three durable batches: the group's coordinator, not
    // the order the workers started in, decides who is given partitions first (on Apache Kafka
    // the first worker started was sometimes given none and ended with nothing to do).
    let waiting = Instant::now();
    let chosen = loop {
        if let Some(i) = workers
            .iter()
            .position(|w| target.count(&owned_by(w.id())) >= 3)
        {
            break i;
        }
        assert!(
            workers.iter_mut().any(|w| w.is_running()),
            "every worker ended before one made three durable batches"
        );
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "no worker made three durable batches"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut victim = workers.remove(chosen);
    let others = workers;
    let pid = victim.id();
    let victim_tag = format!(":{pid}:");
    if !victim.is_running() {
        let ran = victim.success();
        panic!(
            "the worker with three durable batches ended before it was killed:\n{}",
            ran.text()
        );
    }
    victim.kill();
    let killed = Instant::now();
    // What the killed worker held, unfinished: these must move to the others.
    let held = format!(
        "SELECT COUNT(*) FROM lessonprobe_replay_partitions
         WHERE owner LIKE '%{victim_tag}%' AND next_offset < stop_offset"
    );
    let held_at_kill = target.count(&held);
    assert!(
        held_at_kill > 0,
        "the killed worker held an unfinished partition"
    );
    while target.count(&held) > 0 {
        assert!(
            killed.elapsed() < session_timeout + Duration::from_secs(60),
            "the killed worker's partitions were not taken over"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let takeover = killed.elapsed();
    eprintln!("{held_at_kill} partition(s) of the killed worker taken over after {takeover:?}");
    let killed_at = target.count("SELECT COUNT(*) FROM lessonprobe_replay_batches");
    for other in others {
        let ran = other.within(Duration::from_secs(160)).success();
        assert!(ran.stdout.contains("partition,records"), "{}", ran.text());
        eprintln!("{}", ran.text());
    }
    assert!(
        target.count("SELECT COUNT(*) FROM lessonprobe_replay_batches") > killed_at,
        "the survivors worked after the kill"
    );

    // Every event of the window once.
    assert_eq!(
        target.count("SELECT COUNT(*) FROM audit_events"),
        EVENTS as i64
    );
    assert_eq!(
        target.count("SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        EVENTS as i64
    );
    assert_eq!(
        target.count("SELECT CAST(SUM(inserted) AS BIGINT) FROM lessonprobe_replay_partitions"),
        EVENTS as i64,
        "every row counted once, by the batch that inserted it"
    );

    // Batches tile each range: contiguous, none twice, each with its owner.
    let ranges: BTreeMap<i32, (i64, i64, i64)> = target
        .strings(
            "SELECT CAST(partition AS TEXT) || ' ' || CAST(start_offset AS TEXT) || ' ' ||
                    CAST(stop_offset AS TEXT) || ' ' || CAST(next_offset AS TEXT)
             FROM lessonprobe_replay_partitions",
        )
        .iter()
        .map(|row| {
            let v: Vec<i64> = row.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[0] as i32, (v[1], v[2], v[3]))
        })
        .collect();
    assert_eq!(ranges.len(), PARTITIONS as usize);
    let batches = target.strings(
        "SELECT CAST(partition AS TEXT) || ' ' || CAST(first_offset AS TEXT) || ' ' ||
                CAST(next_offset AS TEXT) || ' ' || owner
         FROM lessonprobe_replay_batches ORDER BY partition, first_offset",
    );
    let mut at: BTreeMap<i32, i64> = ranges.iter().map(|(p, r)| (*p, r.0)).collect();
    let mut owners: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for row in &batches {
        let v: Vec<&str> = row.split(' ').collect();
        let (p, first, next) = (
            v[0].parse::<i32>().unwrap(),
            v[1].parse::<i64>().unwrap(),
            v[2].parse::<i64>().unwrap(),
        );
        assert_eq!(
            first, at[&p],
            "partition {p}: batches contiguous, none twice"
        );
        at.insert(p, next);
        let list = owners.entry(p).or_default();
        if !list.contains(&v[3].to_owned()) {
            list.push(v[3].to_owned());
        }
    }
    for (p, (_, stop, next)) in &ranges {
        assert_eq!(at[p], *stop, "partition {p}: batches reach stop");
        assert_eq!(next, stop, "partition {p}: checkpoint at stop");
    }
    let distinct: std::collections::BTreeSet<&String> = owners.values().flatten().collect();
    assert!(distinct.len() > 1, "more than one owner: {owners:?}");
    assert!(
        owners
            .values()
            .any(|o| o.len() > 1 && o[0].contains(&victim_tag)),
        "a partition the killed worker began was finished by another: {owners:?}"
    );

    // The group's offsets in Kafka at stop: visible progress caught up with SQL.
    let kafka = committed(s, GROUP, TOPIC, PARTITIONS);
    for (p, k) in kafka.iter().enumerate() {
        assert_eq!(
            *k,
            Some(ranges[&(p as i32)].1),
            "partition {p}: Kafka at stop"
        );
    }

    // `replay status` shows who owns what and how far it got.
    let status = lessonprobe()
        .args(["replay", "status", "--db", &db, "--format", "csv"])
        .success();
    let rows = csv_rows(&status.stdout);
    for row in &rows {
        assert_eq!(row["remaining"], "0", "{row:?}");
        assert!(row["owner"].contains(':'), "{row:?}");
        assert_eq!(row["status"], "complete", "{row:?}");
    }
    assert_eq!(rows.len(), PARTITIONS as usize, "{}", status.stdout);
    takeover
}

on_each_broker! {
    fn replay_workers_share_a_plan_on_postgres_and_survive_a_sigkill(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let target = Target::Postgres(OwnDatabase::create(&admin, "workers"));
        three_workers_one_killed(kind, target, Duration::from_secs(6));
    }

    fn replay_workers_share_a_plan_on_sqlite_and_survive_a_sigkill(kind) {
        let dir = Dir::new();
        let file = dir.join("workers.db");
        three_workers_one_killed(kind, Target::Sqlite { _dir: dir, file }, Duration::from_secs(6));
    }
}

/// Contention is waiting, not failure: `n` workers started at the same moment on one fresh
/// target, every core busy with a CPU hog (the load under which a worker once gave up with
/// "database is locked"), each waiting for the others' locks: every worker exits 0, every
/// event lands once and every checkpoint reaches its stop.
fn workers_at_once_under_load(kind: BrokerKind, target: Target, n: usize) {
    let broker = kind.sample_day(TOPIC, EVENTS / 2, PARTITIONS);
    let db = target.url();
    let _hog = load::CpuHog::on_every_core();
    let workers: Vec<Running> = (0..n)
        .map(|_| {
            worker_in_session(&broker.servers, &db, "50", "150s", Duration::from_secs(6)).spawn()
        })
        .collect();
    for w in workers {
        let ran = w.within(Duration::from_secs(160)).success();
        assert!(ran.stdout.contains("partition,records"), "{}", ran.text());
    }
    assert_eq!(
        target.count("SELECT COUNT(DISTINCT event_id) FROM audit_events"),
        (EVENTS / 2) as i64
    );
    assert_eq!(
        target.count("SELECT COUNT(*) FROM audit_events"),
        (EVENTS / 2) as i64
    );
    assert_eq!(
        target.count(
            "SELECT COUNT(*) FROM lessonprobe_replay_partitions WHERE next_offset = stop_offset"
        ),
        PARTITIONS as i64
    );
}

on_each_broker! {
    fn workers_started_at_once_on_one_sqlite_file_wait_for_each_other_under_load(kind) {
        let dir = Dir::new();
        let file = dir.join("contended.db");
        workers_at_once_under_load(kind, Target::Sqlite { _dir: dir, file }, 4);
    }

    fn workers_started_at_once_on_one_postgres_database_wait_for_each_other_under_load(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let target = Target::Postgres(OwnDatabase::create(&admin, "contended"));
        workers_at_once_under_load(kind, target, 4);
    }
}

/// On Apache Kafka's own group coordinator, with a session timeout of 1.5 s (its minimum here is
/// 1 s): a SIGKILLed worker's partitions move to the others about one session timeout after the
/// kill (not at once: nobody may claim them while the group still counts it alive; not after
/// librdkafka's 45 s default), and the plan still ends with each event once, every SQL
/// checkpoint and the group's committed offsets at their stops.
#[test]
fn on_apache_kafka_a_killed_workers_partitions_move_after_a_short_session_timeout() {
    on_apache_kafka(|kind| {
        let session = Duration::from_millis(1500);
        let dir = Dir::new();
        let file = dir.join("workers.db");
        let takeover = three_workers_one_killed(kind, Target::Sqlite { _dir: dir, file }, session);
        assert!(
            takeover >= session / 2,
            "taken over {takeover:?} after the kill: before the session timeout"
        );
        assert!(
            takeover < session + Duration::from_secs(15),
            "taken over {takeover:?} after the kill, long after the session timeout of {session:?}"
        );
    });
}

#[test]
fn replay_worker_needs_execute_and_takes_no_jobs() {
    let replay = |extra: &[&str]| {
        lessonprobe()
            .arg("replay")
            .args([
                "--kafka",
                "127.0.0.1:9",
                "--topic",
                "t",
                "--live-group",
                "l",
            ])
            .args(["--replay-group", "r", "--db", "sqlite:x.db", "--worker"])
            .args([
                "--since",
                "2026-09-21T00:00:00Z",
                "--until",
                "2026-09-22T00:00:00Z",
            ])
            .args(extra)
    };
    replay(&[]).stderr_has("--execute").status(2);
    replay(&["--execute", "--jobs", "2"])
        .stderr_has("--jobs")
        .status(2);
}

on_each_broker! {
    /// A lone worker whose deadline passes mid-plan: every partition not at its stop is reported
    /// unfinished, as the deadline, and counted so — none as "replayed by other workers", since
    /// there are none — each with the checkpoint SQL holds for it.
    fn a_worker_past_its_deadline_reports_every_unfinished_partition(kind) {
        let broker = kind.sample_day(TOPIC, 60_000, 12);
        let (ran, checkpoints) = lone_worker_ending_4(
            |db| worker_with(&broker.servers, db, "1", "6s"),
            Duration::from_secs(60),
        );
        assert_eq!(checkpoints.len(), 12, "{}", ran.text());
        let unfinished = checkpoints.values().filter(|(at, stop)| at < stop).count();
        assert!(
            unfinished > 1,
            "the deadline left several partitions: {checkpoints:?}"
        );
        let rows = csv_rows(&ran.stdout);
        for row in &rows {
            let p: i32 = row["partition"].parse().unwrap();
            let (at, stop) = checkpoints[&p];
            assert_eq!(row["replay_offset"].parse::<i64>().unwrap(), at, "{row:?}");
            let status = &row["status"];
            if at < stop {
                assert!(
                    status.starts_with("error: ") && status.contains("deadline of 6s"),
                    "partition {p} at {at} of {stop}: {status}"
                );
            } else {
                assert_eq!(status, "ok", "partition {p}");
            }
        }
        assert_eq!(rows.len(), 12, "{}", ran.stdout);
        assert_incomplete_on(&ran, unfinished);
    }
}

on_each_broker! {
    /// A lone worker whose partition stops at an undecodable record (`--on-bad-record fail`): that
    /// partition fails with its own error, and every other one short of its stop is reported left
    /// at its SQL checkpoint for the plan's other workers, naming the partition that failed.
    fn a_worker_stopped_by_a_failure_reports_the_partitions_it_left(kind) {
        let broker = kind.sample_day(TOPIC, 24_000, 8);
        let (ran, checkpoints) = lone_worker_ending_4(
            |db| worker_with(&broker.servers, db, "100", "150s").args(["--on-bad-record", "fail"]),
            Duration::from_secs(120),
        );
        let rows: Vec<(i32, String)> = csv_rows(&ran.stdout)
            .into_iter()
            .map(|row| (row["partition"].parse().unwrap(), row["status"].clone()))
            .collect();
        assert_eq!(rows.len(), 8, "{}", ran.text());
        let failed: Vec<i32> = rows
            .iter()
            .filter(|(_, s)| s.starts_with("error: ") && !s.contains("left at"))
            .map(|(p, _)| *p)
            .collect();
        assert_eq!(failed.len(), 1, "one partition failed on its own: {rows:?}");
        let failed = failed[0];
        for (p, status) in &rows {
            let (at, stop) = checkpoints[p];
            if *p == failed {
                assert!(
                    at < stop,
                    "partition {p} stopped at its bad record: {checkpoints:?}"
                );
            } else if at < stop {
                assert_eq!(
                    status,
                    &format!("error: left at {at} when this worker stopped on partition {failed}'s failure; the plan's other workers or --resume take it up"),
                    "partition {p}"
                );
            } else {
                assert_eq!(status, "ok", "partition {p}");
            }
        }
        let unfinished = checkpoints.values().filter(|(at, stop)| at < stop).count();
        assert!(unfinished > 1, "{checkpoints:?}");
        assert_incomplete_on(&ran, unfinished);
    }
}
