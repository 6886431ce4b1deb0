//! Replay throughput, every figure measured in the same run against one broker in another
//! process (`lessonprobe broker`, librdkafka's mock cluster, or a throwaway Apache Kafka), on
//! SQLite (a file in WAL mode, synchronous=FULL) and PostgreSQL:
//! (p) planning a one-day window (2026-09-22, a third of the day) as a whole `replay` process
//!     without --execute, wall time, three times: on Apache Kafka the planner asks the broker's
//!     ListOffsets by timestamp, on the mock it reads the partitions once;
//! (a) consume-only (every partition read and decoded, no SQL), partition after partition
//!     through the replay's own consumer, as a replay reads; (a*) the same records read by a
//!     plain consumer assigned every partition at once, as an independent client reads;
//! (i) the independent insert-only limit: every event bulk-inserted in one transaction into a
//!     fresh `audit_events` of the same definition as the replay's target, with no replay code
//!     (SQLite: one prepared INSERT; PostgreSQL: binary COPY), in the order a replay delivers
//!     them and in key order;
//! (b) the replay's own write path alone (batches with their checkpoints, no Kafka);
//! (c) `replay --execute --batch 1`; (d) `replay --execute` with the default batch, as whole
//!     processes, with the planning time the command reports shown separately;
//! (h) on SQLite, what an operator would do instead of (e): the window dumped with kcat, the
//!     event ids taken with jq and anti-joined against `audit_events` in the sqlite3 shell;
//! (e) `replay verify` of (d)'s window against (d)'s table, as a whole process: once as
//!     `--compare auto` chooses, once `--compare lookup`; the command prints no planning time,
//!     so the seconds outside its reading and comparing (start-up, planning, closing) are shown.
//! Prints events/s, the ratios of (d) to (i) and of (e) to (a) and (a*), and each process's
//! peak RSS.
//! `cargo bench --bench replay`.
//!
//! LESSONPROBE_BENCH_BROKER (`mock`, the default: `lessonprobe broker`; `apache-kafka`: a
//! throwaway Apache Kafka that `scripts/kafka.sh start` starts in a temporary directory, with
//! LESSONPROBE_KAFKA_JIT=full unless it is set, and `scripts/kafka.sh stop` stops when the
//! benchmark ends, also on a panic),
//! LESSONPROBE_BENCH_TABLE (`store`, the default: every target gets the store's own
//! `audit_events` of 11 columns, made by the replay; `lesson`: the lesson's six-column
//! `audit_events` is created first and adopted as it is, so (b), (c), (d) and (i) all write the
//! same six columns), LESSONPROBE_BENCH_EVENTS (default 1,000,000), LESSONPROBE_BENCH_PARTITIONS
//! (100: the mock keeps only ~5 MiB per partition), LESSONPROBE_BENCH_BATCH1_EVENTS (20,000: the
//! part (c) replays), LESSONPROBE_BENCH_POSTGRES or LESSONPROBE_TEST_POSTGRES (a PostgreSQL URL;
//! without one the PostgreSQL rows are skipped, saying so), LESSONPROBE_BENCH_BATCHES (a list
//! such as 100,500,2000,10000 for a sweep of (d) on SQLite), LESSONPROBE_BENCH_SKIP (a list of
//! parts among p,a,i,b,c,e to leave out of a long run: without i and b the events are not kept
//! in this process, so that a day of 10,000,000 fits in memory), LESSONPROBE_BENCH_BASELINE
//! (another lessonprobe binary whose (d) runs beside this one's, in the same run),
//! LESSONPROBE_BENCH_JOBS (--jobs of (d); unset, the replay's own default, and each round also
//! runs (d) with --jobs 1, the single-lane figure), LESSONPROBE_BENCH_ROUNDS (3: rounds of
//! (i) in delivery order and (d) run one right after the other, each pair's ratio printed and
//! the median of the rounds' ratios; with LESSONPROBE_BENCH_BASELINE, each round on PostgreSQL
//! also runs this binary's and the baseline's (d) with --jobs 1 one after the other, and
//! prints the CPU (user + system) each process used). Each figure is also printed to standard
//! error as soon as it is measured.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_testkit::bench::setting;
use ticketflow::day::{self, DaySpec};
use ticketflow::event::EventRecord;
use ticketflow::kafka::{Broker, KafkaReplayConsumer};
use ticketflow::replay::{ReplayConsumer, ReplayGroup};
use ticketflow::store::{
    schema, AuditDb, Backend, Batch, Counters, Entry, PartitionProgress, PlanScope, PlanStatus,
    PlanWindow, RecordedPlan, Timeouts,
};
use ticketflow::KafkaTarget;

const TOPIC: &str = "bench.audit";
/// Events generated and produced at a time when the day is not kept.
const CHUNK_EVENTS: usize = 1_000_000;
/// `replay --batch`'s default: records per SQL transaction, in batches of up to
/// `BATCH_RECORDS` of one partition each.
const DEFAULT_BATCH: usize = 100_000;
const BATCH_RECORDS: usize = ticketflow::replay::BATCH_RECORDS;

struct Finished {
    wall: Duration,
    /// CPU seconds (user + system) the process used, its threads and children included.
    cpu: f64,
    /// Partitions the replay ran at once, as it reported (0: not reported).
    lanes: usize,
    peak_rss_mib: f64,
    stdout: String,
    stderr: String,
    /// Records/s of the execution phase, as the command reported it.
    execute_rate: f64,
    /// Seconds the command reported for planning.
    planning: f64,
    /// Seconds the command reported for its execution phase (replay) or its reading and
    /// comparing (verify).
    reported: f64,
}

/// Runs `lessonprobe ARGS`, sampling its peak RSS (VmHWM of /proc/PID/status) until it exits.
/// (wait4's ru_maxrss would count the memory of this process at fork time as well.)
fn run_measured(args: &[String]) -> Finished {
    run_measured_with(env!("CARGO_BIN_EXE_lessonprobe"), args)
}

/// CPU seconds (user + system) of this process's children that have been waited for.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn run_measured_with(binary: &str, args: &[String]) -> Finished {
    // The one child waited for while it runs (the broker of the mock is waited for at the
    // end), so the difference is this process's CPU.
    let cpu_before = children_cpu();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lessonprobe");
    let stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status_file = format!("/proc/{}/status", child.id());
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut reader = BufReader::new(stdout);
        while reader.read_line(&mut out).map(|n| n > 0).unwrap_or(false) {}
        out
    });
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        let hwm = std::fs::read_to_string(&status_file).ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        });
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    };
    let cpu = children_cpu() - cpu_before;
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    assert!(status.success(), "lessonprobe {args:?} failed:\n{out}{err}");
    // From "… N records in X s (R records/s) after planning in Y s": the number after
    // `marker` on the first line that has one (R: the execution phase alone; Y: planning).
    let after = |marker: &str| {
        err.lines()
            .find_map(|l| {
                l.split(marker)
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    let execute_rate = after(" s (");
    let planning = after("after planning in ");
    let reported = after(" records in ");
    let lanes = err
        .lines()
        .find_map(|l| {
            l.split(" partition(s) at once")
                .next()
                .filter(|head| head.len() < l.len())?
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    Finished {
        wall: started.elapsed(),
        cpu,
        lanes,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        stdout: out,
        stderr: err,
        execute_rate,
        planning,
        reported,
    }
}

/// Which broker the day is loaded into.
#[derive(Clone, Copy, PartialEq)]
enum BrokerKind {
    /// `lessonprobe broker`: librdkafka's mock cluster in a process of its own.
    Mock,
    /// A throwaway Apache Kafka started by `scripts/kafka.sh`.
    ApacheKafka,
}

impl BrokerKind {
    fn from_env() -> BrokerKind {
        match std::env::var("LESSONPROBE_BENCH_BROKER").as_deref() {
            Err(_) | Ok("") | Ok("mock") => BrokerKind::Mock,
            Ok("apache-kafka") => BrokerKind::ApacheKafka,
            Ok(other) => panic!("LESSONPROBE_BENCH_BROKER={other}: mock or apache-kafka"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            BrokerKind::Mock => "mock",
            BrokerKind::ApacheKafka => "apache-kafka",
        }
    }
}

/// The running broker, stopped when dropped (a panic included).
enum BrokerGuard {
    Mock(Child),
    /// The directory `scripts/kafka.sh start` was given; removed after the stop.
    ApacheKafka(tempfile::TempDir),
}

impl Drop for BrokerGuard {
    fn drop(&mut self) {
        match self {
            BrokerGuard::Mock(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            BrokerGuard::ApacheKafka(dir) => {
                let stopped = Command::new("bash")
                    .arg(kafka_script())
                    .arg("stop")
                    .arg(dir.path())
                    .status();
                if !stopped.as_ref().is_ok_and(|s| s.success()) {
                    eprintln!(
                        "scripts/kafka.sh stop {} failed: {stopped:?}",
                        dir.path().display()
                    );
                }
            }
        }
    }
}

fn kafka_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh")
}

/// Starts the broker and makes the topic: `lessonprobe broker` hosts it with a sample day of one
/// event; on Apache Kafka it is created through the admin API, empty.
fn start_broker(kind: BrokerKind, partitions: usize) -> (BrokerGuard, String) {
    match kind {
        BrokerKind::Mock => {
            let mut child = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
                .args([
                    "broker",
                    "--sample-day",
                    TOPIC,
                    "--events",
                    "1",
                    "--partitions",
                    &partitions.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start lessonprobe broker");
            let stdout = child.stdout.take().expect("stdout");
            let guard = BrokerGuard::Mock(child);
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("bootstrap line");
            (guard, line.trim().to_owned())
        }
        BrokerKind::ApacheKafka => {
            let dir = tempfile::Builder::new()
                .prefix("lessonprobe-bench-kafka.")
                .tempdir()
                .expect("tempdir");
            let path = dir.path().to_owned();
            // The guard first: a start that fails half way still gets its stop.
            let guard = BrokerGuard::ApacheKafka(dir);
            // Both of the JVM's compilers, as a broker in production runs (the test kit's
            // brokers start sooner with the first alone), unless the caller chose.
            let jit = std::env::var("LESSONPROBE_KAFKA_JIT").unwrap_or_else(|_| "full".into());
            let out = Command::new("bash")
                .arg(kafka_script())
                .arg("start")
                .arg(&path)
                .env("LESSONPROBE_KAFKA_JIT", jit)
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/kafka.sh start");
            assert!(
                out.status.success(),
                "scripts/kafka.sh start {} failed",
                path.display()
            );
            let servers = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(!servers.is_empty(), "scripts/kafka.sh printed no servers");
            let target = KafkaTarget::Bootstrap {
                servers: servers.clone(),
                properties: Vec::new(),
            };
            let mut broker = Broker::for_target(&target, Duration::from_secs(10)).expect("broker");
            let have = broker
                .create_topic(TOPIC, partitions as i32)
                .expect("create the topic");
            assert_eq!(have, partitions as i32, "partitions of {TOPIC}");
            // The broker goes with its directory: nothing to delete.
            broker.keep_created_topics();
            (guard, servers)
        }
    }
}

fn rate(events: u64, wall: Duration) -> f64 {
    events as f64 / wall.as_secs_f64()
}

/// (a): every partition read from its start to its end and decoded, no SQL.
fn consume_only(broker: &Broker, partitions: i32) -> (u64, Duration) {
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
fn consume_all_at_once(broker: &Broker, partitions: i32) -> (u64, Duration) {
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

/// (b): the same records into the target through the replay's own write path (decoding,
/// conflict checks, checkpoint and batch row), in batches of the default size, no Kafka.
fn insert_only(db: &AuditDb, records: &[Vec<u8>]) -> Duration {
    let mut target = db
        .open_target(Timeouts::all(Duration::from_secs(3600)))
        .expect("target");
    let adoption = target
        .inspect()
        .expect("inspect")
        .adopt()
        .expect("adoptable");
    target.prepare(&adoption).expect("prepare");
    let n = records.len() as i64;
    target
        .record_plan(&RecordedPlan {
            plan_id: "bench-insert".into(),
            topic: TOPIC.into(),
            replay_group: "bench-insert".into(),
            live_group: "bench-live".into(),
            window: PlanWindow::Offsets { start: 0, stop: n },
            created_at: "bench".into(),
            created_by: "bench".into(),
            status: PlanStatus::Running,
            finished_at: None,
            partitions: vec![PartitionProgress {
                partition: 0,
                start: 0,
                stop: n,
                captured_end: n,
                next_offset: 0,
                owner: None,
                counters: Counters::default(),
                updated_at: "bench".into(),
            }],
        })
        .expect("record the plan");
    let ranges = [(0, 0, n)];
    let scope = PlanScope {
        plan_id: "bench-insert",
        topic: TOPIC,
        ranges: &ranges,
        owner: None,
        fail_on_refused: false,
    };
    let started = Instant::now();
    let mut first = 0i64;
    for (i, chunk) in records.chunks(BATCH_RECORDS).enumerate() {
        // As the replay does: batches share a transaction of DEFAULT_BATCH records.
        if i % (DEFAULT_BATCH / BATCH_RECORDS) == 0 {
            if i > 0 {
                target.commit().expect("commit");
            }
            target.begin().expect("begin");
        }
        let entries: Vec<Entry<'_>> = chunk
            .iter()
            .enumerate()
            .map(|(i, raw)| Entry {
                topic: TOPIC,
                partition: 0,
                offset: first + i as i64,
                timestamp: None,
                raw,
                decoded: EventRecord::decode(raw).map_err(|e| e.to_string()),
            })
            .collect();
        let next = first + entries.len() as i64;
        target
            .write_batch(
                &scope,
                &Batch {
                    partition: 0,
                    first,
                    next,
                    entries,
                    markers: 0,
                    aborted: 0,
                },
            )
            .expect("write_batch");
        first = next;
    }
    target.commit().expect("commit");
    started.elapsed()
}

/// The `audit_events` every target of a run has.
#[derive(Clone, Copy, PartialEq)]
enum Table {
    /// The store's own, of 11 columns, created by the replay in a fresh target.
    Store,
    /// The lesson's six columns, created before the replay, which adopts it as it is.
    Lesson,
}

/// Every column the independent insert can write, in the order of the store's own table; the
/// lesson's table has the first six.
const COLUMNS: [&str; 11] = [
    "event_id",
    "tenant_id",
    "ticket_id",
    "action",
    "occurred_at",
    "payload",
    "record",
    "topic",
    "partition",
    "record_offset",
    "record_timestamp",
];

impl Table {
    fn from_env() -> Table {
        match std::env::var("LESSONPROBE_BENCH_TABLE").as_deref() {
            Err(_) | Ok("") | Ok("store") => Table::Store,
            Ok("lesson") => Table::Lesson,
            Ok(other) => panic!("LESSONPROBE_BENCH_TABLE={other}: store or lesson"),
        }
    }

    fn columns(self) -> usize {
        match self {
            Table::Store => COLUMNS.len(),
            Table::Lesson => 6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Table::Store => "store",
            Table::Lesson => "lesson",
        }
    }

    /// `CREATE TABLE` of `audit_events` as `qualified` (a table name, with its schema or not).
    fn create(self, backend: Backend, qualified: &str) -> String {
        match self {
            Table::Store => schema::audit_events(backend).replacen(
                "CREATE TABLE audit_events",
                &format!("CREATE TABLE {qualified}"),
                1,
            ),
            // The lesson's table: the event's six fields as text, a unique key on event_id.
            Table::Lesson => format!(
                "CREATE TABLE {qualified} (
                    event_id    TEXT NOT NULL CONSTRAINT audit_events_event_id_key UNIQUE,
                    tenant_id   TEXT NOT NULL,
                    ticket_id   TEXT NOT NULL,
                    action      TEXT NOT NULL,
                    occurred_at TEXT NOT NULL,
                    payload     TEXT NOT NULL
                )"
            ),
        }
    }

    /// Before a replay into the SQLite file `path`: the lesson's table there, or nothing (the
    /// replay makes its own).
    fn before_replay_sqlite(self, path: &Path) {
        if self == Table::Lesson {
            rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(&self.create(Backend::Sqlite, "audit_events")))
                .expect("the lesson's audit_events in SQLite");
        }
    }

    /// Before a replay into the PostgreSQL schema `schema_name`: the schema made fresh, with
    /// the lesson's table in it, or empty (the replay makes its own).
    fn fresh_postgres_schema(self, client: &mut postgres::Client, schema_name: &str) {
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema_name} CASCADE; CREATE SCHEMA {schema_name}"
            ))
            .expect("a fresh schema");
        if self == Table::Lesson {
            client
                .batch_execute(
                    &self.create(Backend::Postgres, &format!("{schema_name}.audit_events")),
                )
                .expect("the lesson's audit_events in PostgreSQL");
        }
    }
}

/// One event as the independent bulk insert writes it: every column of `audit_events`.
struct Row {
    event: EventRecord,
    raw: Vec<u8>,
    partition: i32,
    offset: i64,
    timestamp: i64,
}

/// (i) on SQLite: a fresh file with the store's own `audit_events`, WAL and synchronous=FULL
/// as the store opens it, every row through one prepared INSERT in one transaction.
fn independent_sqlite(path: &std::path::Path, table: Table, rows: &[&Row]) -> Duration {
    let conn = rusqlite::Connection::open(path).expect("sqlite file");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("full");
    conn.execute_batch(&table.create(Backend::Sqlite, "audit_events"))
        .expect("audit_events");
    let k = table.columns();
    let placeholders: Vec<String> = (1..=k).map(|i| format!("?{i}")).collect();
    let started = Instant::now();
    conn.execute_batch("BEGIN").expect("begin");
    {
        let mut insert = conn
            .prepare(&format!(
                "INSERT INTO audit_events ({}) VALUES ({})",
                COLUMNS[..k].join(", "),
                placeholders.join(", ")
            ))
            .expect("prepare");
        for r in rows {
            let e = &r.event;
            let values: [&dyn rusqlite::ToSql; 11] = [
                &e.event_id,
                &e.tenant_id,
                &e.ticket_id,
                &e.action,
                &e.occurred_at,
                &e.payload,
                &r.raw,
                &TOPIC,
                &r.partition,
                &r.offset,
                &r.timestamp,
            ];
            insert.execute(&values[..k]).expect("insert");
        }
    }
    conn.execute_batch("COMMIT").expect("commit");
    started.elapsed()
}

/// (i) on PostgreSQL: a fresh schema with the store's own `audit_events`, every row through one
/// binary COPY in one transaction.
fn independent_postgres(url: &str, schema_name: &str, table: Table, rows: &[&Row]) -> Duration {
    use postgres::binary_copy::BinaryCopyInWriter;
    use postgres::types::Type;
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("postgres");
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema_name} CASCADE; CREATE SCHEMA {schema_name};
             SET search_path TO {schema_name}; {}",
            table.create(Backend::Postgres, "audit_events")
        ))
        .expect("audit_events");
    let k = table.columns();
    let started = Instant::now();
    let mut tx = client.transaction().expect("begin");
    {
        let sink = tx
            .copy_in(&format!(
                "COPY audit_events ({}) FROM STDIN BINARY",
                COLUMNS[..k].join(", ")
            ))
            .expect("copy");
        let types = [
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::BYTEA,
            Type::TEXT,
            Type::INT4,
            Type::INT8,
            Type::INT8,
        ];
        let mut writer = BinaryCopyInWriter::new(sink, &types[..k]);
        for r in rows {
            let e = &r.event;
            let values: [&(dyn postgres::types::ToSql + Sync); 11] = [
                &e.event_id,
                &e.tenant_id,
                &e.ticket_id,
                &e.action,
                &e.occurred_at,
                &e.payload,
                &r.raw,
                &TOPIC,
                &r.partition,
                &r.offset,
                &r.timestamp,
            ];
            writer.write(&values[..k]).expect("copy row");
        }
        writer.finish().expect("copy end");
    }
    tx.commit().expect("commit");
    let elapsed = started.elapsed();
    let _ = client.batch_execute(&format!("DROP SCHEMA {schema_name} CASCADE"));
    elapsed
}

/// `url` with its search path set to `schema`.
fn in_schema(url: &str, schema: &str) -> String {
    let glue = if url.contains('?') { '&' } else { '?' };
    format!("{url}{glue}options=-csearch_path%3D{schema}")
}

/// What `replay` and `replay verify` are both given: the broker, the topic, the window every
/// run reads, the database and the deadline.
fn window_args(servers: &str, db: &str) -> Vec<String> {
    [
        "--kafka",
        servers,
        "--topic",
        TOPIC,
        "--since",
        "2026-09-21T00:00:00Z",
        "--until",
        "2026-09-25T00:00:00Z",
        "--db",
        db,
        "--deadline",
        "1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn replay_args(
    servers: &str,
    db: &str,
    group: &str,
    partitions: Option<&str>,
    batch: usize,
    jobs: Option<usize>,
) -> Vec<String> {
    let mut args = vec!["replay".to_owned()];
    args.extend(window_args(servers, db));
    args.extend(
        [
            "--live-group",
            "bench-live",
            "--replay-group",
            group,
            "--execute",
            "--format",
            "csv",
        ]
        .map(String::from),
    );
    args.extend(["--batch".into(), batch.to_string()]);
    if let Some(jobs) = jobs {
        args.extend(["--jobs".into(), jobs.to_string()]);
    }
    if let Some(p) = partitions {
        args.extend(["--partitions".into(), p.to_owned()]);
    }
    args
}

/// Where the further rounds of (i) and (d) run.
struct Paired<'a> {
    backend: &'a str,
    url: &'a str,
    dir: &'a Path,
    table: Table,
    rows: &'a [&'a Row],
    servers: &'a str,
    jobs: Option<usize>,
    /// Another lessonprobe binary whose (d) with --jobs 1 runs beside this one's, each round.
    baseline: Option<&'a str>,
}

/// A fresh target for one more replay of a round: `name`'s SQLite file or PostgreSQL schema.
fn fresh_target(at: &Paired<'_>, name: &str) -> String {
    match at.backend {
        "sqlite" => {
            let path = at.dir.join(format!("{name}.db"));
            let _ = std::fs::remove_file(&path);
            at.table.before_replay_sqlite(&path);
            format!("sqlite:{}", path.display())
        }
        _ => {
            let schema = format!("lessonprobe_bench_{name}");
            let mut client = postgres::Client::connect(at.url, postgres::NoTls).expect("postgres");
            at.table.fresh_postgres_schema(&mut client, &schema);
            in_schema(at.url, &schema)
        }
    }
}

/// Of an even number of values, the mean of the two middle ones.
fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    }
}

/// Rounds 1..=`rounds` of (i) in delivery order and (d), one right after the other, each into
/// a fresh table (`first` is round 1's (i), (d) execution and (d) whole rates, measured
/// before): the shared machine's speed drifts from minute to minute, so the ratio is given per
/// round and as the median of the rounds. On PostgreSQL, with the replay's default lanes, each
/// round also runs (d) with --jobs 1 (the single-lane figure); with a baseline binary, that
/// binary's (d) with --jobs 1 right after, and the CPU of both processes.
fn paired_rounds(at: &Paired<'_>, rounds: usize, first: (f64, f64, f64)) {
    let n = at.rows.len() as u64;
    let mut seen = Vec::new();
    let mut single = Vec::new();
    let mut cpus = Vec::new();
    let postgres = at.backend == "postgres";
    for round in 1..=rounds {
        let (i, exec, whole) = if round == 1 {
            first
        } else {
            let i = match at.backend {
                "sqlite" => {
                    let i = rate(
                        n,
                        independent_sqlite(&at.dir.join("i-round.db"), at.table, at.rows),
                    );
                    let _ = std::fs::remove_file(at.dir.join("i-round.db"));
                    i
                }
                _ => rate(
                    n,
                    independent_postgres(at.url, "lessonprobe_bench_copy", at.table, at.rows),
                ),
            };
            let db = fresh_target(at, "round");
            let d = run_measured(&replay_args(
                at.servers,
                &db,
                &format!("bench-round{round}-{}", at.backend),
                None,
                DEFAULT_BATCH,
                at.jobs,
            ));
            let whole = rate(replayed(&d.stdout), d.wall);
            eprintln!(
                "{} round {round}: (i) delivery order {i:.0}/s; (d) {whole:.0}/s whole, {:.0}/s execution, {} partition(s) at once, CPU {:.2} s; (d)/(i) = {:.2} (execution), {:.2} (whole)",
                at.backend,
                d.execute_rate,
                d.lanes,
                d.cpu,
                d.execute_rate / i,
                whole / i
            );
            (i, d.execute_rate, whole)
        };
        seen.push((i, exec, whole));
        if !postgres || (at.jobs.is_some() && at.baseline.is_none()) {
            continue;
        }
        // One lane, this binary: beside the default's figure, and the CPU it took.
        let db = fresh_target(at, "single");
        let d1 = run_measured(&replay_args(
            at.servers,
            &db,
            &format!("bench-single{round}-{}", at.backend),
            None,
            DEFAULT_BATCH,
            Some(1),
        ));
        let whole1 = rate(replayed(&d1.stdout), d1.wall);
        eprintln!(
            "{} round {round}: (d) --jobs 1 {whole1:.0}/s whole, {:.0}/s execution, CPU {:.2} s; (d --jobs 1)/(i) = {:.2} (execution), {:.2} (whole)",
            at.backend,
            d1.execute_rate,
            d1.cpu,
            d1.execute_rate / i,
            whole1 / i
        );
        single.push((i, d1.execute_rate, whole1));
        if let Some(baseline) = at.baseline {
            let db = fresh_target(at, "base");
            let b = run_measured_with(
                baseline,
                &replay_args(
                    at.servers,
                    &db,
                    &format!("bench-base{round}-{}", at.backend),
                    None,
                    DEFAULT_BATCH,
                    Some(1),
                ),
            );
            let whole_b = rate(replayed(&b.stdout), b.wall);
            eprintln!(
                "{} round {round}: the baseline's (d) --jobs 1 {whole_b:.0}/s whole, {:.0}/s execution, CPU {:.2} s; this binary's CPU / the baseline's = {:.2}",
                at.backend,
                b.execute_rate,
                b.cpu,
                d1.cpu / b.cpu
            );
            cpus.push((d1.cpu, b.cpu, whole1, whole_b));
        }
    }
    let low = seen
        .iter()
        .map(|(i, e, _)| e / i)
        .fold(f64::INFINITY, f64::min);
    let high = seen.iter().map(|(i, e, _)| e / i).fold(0.0, f64::max);
    println!(
        "{}: (d)/(i) over {} paired rounds (round 1 is the table's), {}: median {:.2} (execution), {:.2} (whole process); execution ratios from {low:.2} to {high:.2}",
        at.backend,
        seen.len(),
        at.jobs
            .map_or_else(|| "the replay's default lanes".to_owned(), |j| format!("--jobs {j}")),
        median(seen.iter().map(|(i, e, _)| e / i).collect()),
        median(seen.iter().map(|(i, _, w)| w / i).collect()),
    );
    if !single.is_empty() {
        println!(
            "{}: (d --jobs 1)/(i) over the same {} rounds: median {:.2} (execution), {:.2} (whole process), each round's: {}",
            at.backend,
            single.len(),
            median(single.iter().map(|(i, e, _)| e / i).collect()),
            median(single.iter().map(|(i, _, w)| w / i).collect()),
            single
                .iter()
                .map(|(i, _, w)| format!("{:.2}", w / i))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !cpus.is_empty() {
        println!(
            "{}: CPU (user + system) of (d) --jobs 1, this binary / the baseline, over {} rounds: median {:.2}; this binary {} s, the baseline {} s; whole rates {} vs {} records/s",
            at.backend,
            cpus.len(),
            median(cpus.iter().map(|(a, b, _, _)| a / b).collect()),
            cpus.iter().map(|c| format!("{:.2}", c.0)).collect::<Vec<_>>().join(", "),
            cpus.iter().map(|c| format!("{:.2}", c.1)).collect::<Vec<_>>().join(", "),
            cpus.iter().map(|c| format!("{:.0}", c.2)).collect::<Vec<_>>().join(", "),
            cpus.iter().map(|c| format!("{:.0}", c.3)).collect::<Vec<_>>().join(", "),
        );
    }
}

/// `replay verify` of the window every (d) replays, against `db`.
fn verify_args(servers: &str, db: &str) -> Vec<String> {
    let mut args = vec!["replay".to_owned(), "verify".to_owned()];
    args.extend(window_args(servers, db));
    args
}

/// Records the replay reported (the csv's `records` column summed).
fn replayed(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("partition,records"))
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Records a dry run's plan covers (the csv's `records` column summed).
fn planned_records(stdout: &str) -> u64 {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with("partition,since,"));
    let Some(column) = lines
        .next()
        .and_then(|header| header.split(',').position(|c| c == "records"))
    else {
        panic!("no plan in the dry run's output:\n{stdout}");
    };
    lines
        .filter_map(|l| l.split(',').nth(column)?.parse::<u64>().ok())
        .sum()
}

/// One `replay verify` run of (e).
struct Verified {
    /// Records/s of the whole process and of its reading and comparing.
    whole: f64,
    /// CPU seconds (user + system) of the process.
    cpu: f64,
    exec: f64,
    /// Peak RSS, MiB.
    rss: f64,
    /// Seconds of the whole process outside its reading and comparing: start-up, planning
    /// (which the command does not print) and closing.
    outside: f64,
    /// How it compared the table: "scan" or "lookup".
    compared: &'static str,
    /// Seconds of the whole process.
    seconds: f64,
}

/// One backend's figures, events/s unless said otherwise.
struct Figures {
    backend: &'static str,
    /// (i) in delivery order and in key order.
    i_delivery: Option<f64>,
    i_key: Option<f64>,
    b: Option<f64>,
    c: Option<f64>,
    d: f64,
    /// (d)'s execution phase alone (the command's own figure), without start-up and planning.
    d_exec: f64,
    /// Seconds (d) spent planning, as it reported.
    planning: f64,
    rss_c: Option<f64>,
    rss_d: f64,
    /// (e) `replay verify`, as auto chose and looking up.
    e: Vec<Verified>,
    /// (h) the operator's check by hand (SQLite only): seconds, and the ids it found missing.
    by_hand: Option<(f64, u64)>,
}

fn main() {
    let n = setting("LESSONPROBE_BENCH_EVENTS", 1_000_000);
    let partitions = setting("LESSONPROBE_BENCH_PARTITIONS", 100);
    let batch1 = setting("LESSONPROBE_BENCH_BATCH1_EVENTS", 20_000);
    let jobs = std::env::var_os("LESSONPROBE_BENCH_JOBS")
        .is_some()
        .then(|| setting("LESSONPROBE_BENCH_JOBS", 1));
    let baseline = std::env::var("LESSONPROBE_BENCH_BASELINE").ok();
    let rounds = setting("LESSONPROBE_BENCH_ROUNDS", 3);
    let skip = std::env::var("LESSONPROBE_BENCH_SKIP").unwrap_or_default();
    let skip = |part: &str| skip.split(',').any(|s| s.trim() == part);
    let postgres = std::env::var("LESSONPROBE_BENCH_POSTGRES")
        .or_else(|_| std::env::var("LESSONPROBE_TEST_POSTGRES"))
        .ok();

    let kind = BrokerKind::from_env();
    let table = Table::from_env();
    // Dropped last (after the Broker handle below): stops the broker, a panic included.
    let (_broker_guard, servers) = start_broker(kind, partitions);
    let target = KafkaTarget::Bootstrap {
        servers: servers.clone(),
        properties: Vec::new(),
    };
    let broker = Broker::for_target(&target, Duration::from_secs(10)).expect("broker");
    let keep = !skip("i") || !skip("b");
    // Kept for (i) and (b), the day is generated at once. Otherwise it is generated in chunks
    // of a million events (each with its own seed, so every event_id is distinct, and each
    // spread over the same three days), produced and dropped one after the other: a day of
    // 10,000,000 events held whole took 17.5 GB here.
    let chunk = if keep { n } else { n.min(CHUNK_EVENTS) };
    let mut avg = 0;
    let mut produced = Duration::ZERO;
    let mut records = Vec::new();
    let mut done = 0;
    for part in 0u64.. {
        if done >= n {
            break;
        }
        let size = chunk.min(n - done);
        records = day::generate(&DaySpec {
            events: size,
            tickets: 50_000,
            tenants: 20,
            redelivery_per_mille: 0,
            padding: 100,
            // Not the broker's sample day's seed: its one event would come back as a conflict.
            seed: 0xbe4c_4d4a + part,
            ..DaySpec::default()
        });
        if part == 0 {
            avg = records
                .iter()
                .take(1000)
                .map(|r| r.payload().len())
                .sum::<usize>()
                / records.len().clamp(1, 1000);
        }
        let started = Instant::now();
        broker
            .produce_day(TOPIC, partitions as i32, &records)
            .expect("produce");
        produced += started.elapsed();
        done += size;
    }
    // The order a replay applies them: partition after partition, each in offset order.
    let mut next_offset = vec![0i64; partitions];
    let mut rows: Vec<Row> = records
        .into_iter()
        .take(if keep { usize::MAX } else { 0 })
        .map(|r| {
            let partition = day::partition_for(&r.key, partitions as i32);
            let raw = r.payload();
            let offset = next_offset[partition as usize];
            next_offset[partition as usize] += 1;
            Row {
                event: EventRecord::decode(&raw).expect("a generated event decodes"),
                raw,
                partition,
                offset,
                timestamp: r.timestamp_ms,
            }
        })
        .collect();
    rows.sort_by_key(|r| (r.partition, r.offset));
    let delivery: Vec<&Row> = rows.iter().collect();
    let mut by_key: Vec<&Row> = rows.iter().collect();
    by_key.sort_by(|x, y| x.event.event_id.cmp(&y.event.event_id));
    let events: Vec<Vec<u8>> = rows.iter().map(|r| r.raw.clone()).collect();
    let total: i64 = (0..partitions as i32)
        .map(|p| broker.watermarks(TOPIC, p).map(|(l, h)| h - l).unwrap_or(0))
        .sum();
    assert!(
        total as usize >= n,
        "the broker kept {total} of {n} records: spread them over more partitions"
    );
    println!(
        "{n} events of ~{avg} bytes in {partitions} partitions of {} ({total} records); produced at {:.0} events/s; window 2026-09-21 to 2026-09-24 (all); target table: {} ({} columns)",
        kind.name(),
        rate(n as u64, produced),
        table.name(),
        table.columns()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let one_day = (!skip("p")).then(|| plan_one_day(&servers, dir.path()));
    if let Some(p) = &one_day {
        eprintln!("(p) {}", p.line(kind));
    }

    // Enough whole partitions for (c) to replay about `batch1` events.
    let per_partition = (total as usize / partitions).max(1);
    let c_parts = (batch1 / per_partition).clamp(1, partitions);
    let c_list: Vec<String> = (0..c_parts).map(|p| p.to_string()).collect();
    let c_list = c_list.join(",");

    let (a, a_all) = if skip("a") {
        (None, None)
    } else {
        let (consumed, wall) = consume_only(&broker, partitions as i32);
        let a = rate(consumed, wall);
        eprintln!("(a) consume-only: {a:.0} events/s");
        let (consumed, wall) = consume_all_at_once(&broker, partitions as i32);
        let a_all = rate(consumed, wall);
        eprintln!("(a*) consume-only, every partition at once: {a_all:.0} events/s");
        (Some(a), Some(a_all))
    };

    let mut figures = Vec::new();
    let mut backends: Vec<(&'static str, String)> = vec![("sqlite", String::new())];
    match &postgres {
        Some(url) => backends.push(("postgres", url.clone())),
        None => println!("PostgreSQL skipped: set LESSONPROBE_BENCH_POSTGRES (or LESSONPROBE_TEST_POSTGRES) to a postgres:// URL"),
    }
    for (backend, url) in backends {
        let (i_delivery, i_key, b, db_c, db_d) = match backend {
            "sqlite" => {
                let i_delivery = (!skip("i")).then(|| {
                    rate(
                        n as u64,
                        independent_sqlite(&dir.path().join("i-delivery.db"), table, &delivery),
                    )
                });
                let i_key = (!skip("i")).then(|| {
                    rate(
                        n as u64,
                        independent_sqlite(&dir.path().join("i-key.db"), table, &by_key),
                    )
                });
                for f in ["i-delivery.db", "i-key.db"] {
                    let _ = std::fs::remove_file(dir.path().join(f));
                }
                let b = (!skip("b")).then(|| {
                    table.before_replay_sqlite(&dir.path().join("insert.db"));
                    let insert = AuditDb::Sqlite(dir.path().join("insert.db"));
                    let b = rate(n as u64, insert_only(&insert, &events));
                    let _ = std::fs::remove_file(dir.path().join("insert.db"));
                    b
                });
                for f in ["c.db", "d.db"] {
                    table.before_replay_sqlite(&dir.path().join(f));
                }
                let c = format!("sqlite:{}", dir.path().join("c.db").display());
                let d = format!("sqlite:{}", dir.path().join("d.db").display());
                (i_delivery, i_key, b, c, d)
            }
            _ => {
                let i_delivery = (!skip("i")).then(|| {
                    rate(
                        n as u64,
                        independent_postgres(&url, "lessonprobe_bench_copy", table, &delivery),
                    )
                });
                let i_key = (!skip("i")).then(|| {
                    rate(
                        n as u64,
                        independent_postgres(&url, "lessonprobe_bench_copy", table, &by_key),
                    )
                });
                let mut client =
                    postgres::Client::connect(&url, postgres::NoTls).expect("postgres");
                let b = (!skip("b")).then(|| {
                    let schema = "lessonprobe_bench_insert";
                    table.fresh_postgres_schema(&mut client, schema);
                    let insert = AuditDb::Postgres(in_schema(&url, schema));
                    let b = rate(n as u64, insert_only(&insert, &events));
                    let _ = client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
                    b
                });
                // (c) and (d) replay into schemas of their own, made fresh.
                for run in ["c", "d"] {
                    table.fresh_postgres_schema(&mut client, &format!("lessonprobe_bench_{run}"));
                }
                (
                    i_delivery,
                    i_key,
                    b,
                    in_schema(&url, "lessonprobe_bench_c"),
                    in_schema(&url, "lessonprobe_bench_d"),
                )
            }
        };
        eprintln!(
            "{backend} (i) delivery order {}/s, key order {}/s; (b) {}/s",
            opt(i_delivery),
            opt(i_key),
            opt(b)
        );
        let c_run = (!skip("c")).then(|| {
            run_measured(&replay_args(
                &servers,
                &db_c,
                &format!("bench-c-{backend}"),
                Some(&c_list),
                1,
                Some(1),
            ))
        });
        let d_run = run_measured(&replay_args(
            &servers,
            &db_d,
            &format!("bench-d-{backend}"),
            None,
            DEFAULT_BATCH,
            jobs,
        ));
        eprintln!(
            "{backend} (d) {:.0}/s whole, {:.0}/s execution, planning {:.2} s, {} partition(s) at once, CPU {:.2} s, RSS {:.1} MiB",
            rate(replayed(&d_run.stdout), d_run.wall),
            d_run.execute_rate,
            d_run.planning,
            d_run.lanes,
            d_run.cpu,
            d_run.peak_rss_mib
        );
        let paired = i_delivery.filter(|_| rounds > 1);
        if let Some(i) = paired {
            paired_rounds(
                &Paired {
                    backend,
                    url: &url,
                    dir: dir.path(),
                    table,
                    rows: &delivery,
                    servers: &servers,
                    jobs,
                    baseline: baseline.as_deref(),
                },
                rounds,
                (
                    i,
                    d_run.execute_rate,
                    rate(replayed(&d_run.stdout), d_run.wall),
                ),
            );
        }
        if let Some(baseline) = baseline.as_ref().filter(|_| paired.is_none()) {
            if backend == "postgres" {
                let mut client =
                    postgres::Client::connect(&url, postgres::NoTls).expect("postgres");
                table.fresh_postgres_schema(&mut client, "lessonprobe_bench_base");
            } else {
                table.before_replay_sqlite(&dir.path().join("base.db"));
            }
            let db = match backend {
                "sqlite" => format!("sqlite:{}", dir.path().join("base.db").display()),
                _ => in_schema(&url, "lessonprobe_bench_base"),
            };
            let run = run_measured_with(
                baseline,
                &replay_args(
                    &servers,
                    &db,
                    &format!("bench-base-{backend}"),
                    None,
                    DEFAULT_BATCH,
                    jobs,
                ),
            );
            eprintln!(
                "{backend} (d) of the baseline binary: {:.0}/s whole, {:.0}/s execution, planning {:.2} s, CPU {:.2} s (this binary's (d): {:.2} s), RSS {:.1} MiB",
                rate(replayed(&run.stdout), run.wall),
                run.execute_rate,
                run.planning,
                run.cpu,
                d_run.cpu,
                run.peak_rss_mib
            );
            let _ = std::fs::remove_file(dir.path().join("base.db"));
        }
        // (d) wrote the columns the table has, no more: on the lesson's table, six.
        let columns: i64 = match backend {
            "sqlite" => rusqlite::Connection::open(dir.path().join("d.db"))
                .and_then(|c| {
                    c.query_row(
                        "SELECT COUNT(*) FROM pragma_table_info('audit_events')",
                        [],
                        |r| r.get(0),
                    )
                })
                .expect("columns of (d)'s audit_events"),
            _ => postgres::Client::connect(&url, postgres::NoTls)
                .and_then(|mut c| {
                    c.query_one(
                        "SELECT COUNT(*) FROM information_schema.columns
                         WHERE table_schema = 'lessonprobe_bench_d' AND table_name = 'audit_events'",
                        &[],
                    )
                })
                .expect("columns of (d)'s audit_events")
                .get(0),
        };
        assert_eq!(
            columns,
            table.columns() as i64,
            "(d)'s audit_events has {columns} columns"
        );
        let d_records = replayed(&d_run.stdout);
        assert_eq!(
            d_records as i64, total,
            "(d) replayed {d_records} of {total}"
        );
        // A clean window exits 0, which run_measured asserts.
        // As it chooses, then looking each event_id up.
        let e: Vec<Verified> = if skip("e") {
            &[][..]
        } else {
            &["auto", "lookup"][..]
        }
        .iter()
        .map(|compare| {
            let mut args = verify_args(&servers, &db_d);
            args.extend(["--compare".to_owned(), compare.to_string()]);
            let e_run = run_measured(&args);
            Verified {
                outside: e_run.wall.as_secs_f64() - e_run.reported,
                seconds: e_run.wall.as_secs_f64(),
                whole: rate(total as u64, e_run.wall),
                cpu: e_run.cpu,
                exec: e_run.execute_rate,
                rss: e_run.peak_rss_mib,
                compared: if e_run.stderr.contains("the table scanned whole") {
                    "scan"
                } else {
                    "lookup"
                },
            }
        })
        .collect();
        let by_hand_run = (backend == "sqlite" && !skip("h") && !e.is_empty())
            .then(|| by_hand(&servers, &dir.path().join("d.db"), dir.path()))
            .flatten();
        // (h) and (e) as --compare auto chooses, paired round after round: one pair alone
        // says little on a machine whose speed drifts from minute to minute.
        if let (Some((h1, _)), Some(e1)) = (by_hand_run, e.first().filter(|_| rounds > 1)) {
            let mut pairs = vec![(h1, e1.seconds)];
            // With a baseline binary, its verify too, each round, and the CPU of both.
            let mut cpus = Vec::new();
            for round in 1..=rounds {
                if let Some(baseline) = &baseline {
                    let mut args = verify_args(&servers, &db_d);
                    args.extend(["--compare".to_owned(), "auto".to_owned()]);
                    let ours = run_measured(&args);
                    let theirs = run_measured_with(baseline, &args);
                    eprintln!(
                        "{backend} round {round}: (e) verify {:.2} s, CPU {:.2} s; the baseline's {:.2} s, CPU {:.2} s",
                        ours.wall.as_secs_f64(),
                        ours.cpu,
                        theirs.wall.as_secs_f64(),
                        theirs.cpu
                    );
                    cpus.push((ours.cpu, theirs.cpu));
                }
                if round == 1 {
                    continue;
                }
                let Some((h, _)) = by_hand(&servers, &dir.path().join("d.db"), dir.path()) else {
                    break;
                };
                let mut args = verify_args(&servers, &db_d);
                args.extend(["--compare".to_owned(), "auto".to_owned()]);
                let v = run_measured(&args);
                let secs = v.wall.as_secs_f64();
                eprintln!(
                    "{backend} round {round}: (h) by hand {h:.2} s, (e) verify {secs:.2} s (CPU {:.2} s): by hand / verify = {:.2}",
                    v.cpu,
                    h / secs
                );
                pairs.push((h, secs));
            }
            println!(
                "{backend}: by hand (h) / verify (e, --compare auto) over {} paired rounds (round 1 is the table's): median {:.2}; each round's: {}",
                pairs.len(),
                median(pairs.iter().map(|(h, v)| h / v).collect()),
                pairs
                    .iter()
                    .map(|(h, v)| format!("{h:.2}/{v:.2} s = {:.2}", h / v))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !cpus.is_empty() {
                println!(
                    "{backend}: CPU (user + system) of verify (e, --compare auto), this binary / the baseline, over {} rounds: median {:.2}; this binary {} s, the baseline {} s",
                    cpus.len(),
                    median(cpus.iter().map(|(a, b)| a / b).collect()),
                    cpus.iter().map(|c| format!("{:.2}", c.0)).collect::<Vec<_>>().join(", "),
                    cpus.iter().map(|c| format!("{:.2}", c.1)).collect::<Vec<_>>().join(", "),
                );
            }
        }
        figures.push(Figures {
            backend,
            i_delivery,
            i_key,
            b,
            c: c_run.as_ref().map(|c| rate(replayed(&c.stdout), c.wall)),
            d: rate(d_records, d_run.wall),
            d_exec: d_run.execute_rate,
            planning: d_run.planning,
            rss_c: c_run.as_ref().map(|c| c.peak_rss_mib),
            rss_d: d_run.peak_rss_mib,
            by_hand: by_hand_run,
            e,
        });
    }

    println!();
    println!(
        "{:<9} {:>10} {:>11} {:>11} {:>10} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>7} {:>7}",
        "backend",
        "(a) cons/s",
        "(i) deliv/s",
        "(i) key/s",
        "(b) own/s",
        "(c) b1/s",
        "(d) all/s",
        "(d) exec/s",
        "plan s",
        "exec/i_d",
        "all/i_d",
        "RSS c",
        "RSS d"
    );
    for f in &figures {
        println!(
            "{:<9} {:>10} {:>11} {:>11} {:>10} {:>9} {:>10.0} {:>10.0} {:>8.2} {:>9} {:>9} {:>7} {:>7.1}",
            f.backend,
            opt(a),
            opt(f.i_delivery),
            opt(f.i_key),
            opt(f.b),
            opt(f.c),
            f.d,
            f.d_exec,
            f.planning,
            ratio(Some(f.d_exec), f.i_delivery),
            ratio(Some(f.d), f.i_delivery),
            f.rss_c.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}")),
            f.rss_d
        );
    }
    println!("(i) one transaction into the same table definition as (d), no replay code: SQLite one prepared INSERT (WAL, synchronous=FULL), PostgreSQL binary COPY; deliv = replay order, key = event_id order");
    println!("(d) all/s is the whole process (start-up, planning, execution, read-back); exec/s its execution phase; plan s its planning; RSS in MiB");
    for f in &figures {
        println!(
            "{}: (d)/(i) = {} (execution phase), {} (whole process), both writing the {} table ({} columns); (d) planned in {:.2} s",
            f.backend,
            ratio(Some(f.d_exec), f.i_delivery),
            ratio(Some(f.d), f.i_delivery),
            table.name(),
            table.columns(),
            f.planning
        );
    }
    println!("(c) replays partitions {c_list} (~{} events); (d) every partition, --batch {DEFAULT_BATCH} {}", c_parts * per_partition, jobs.map_or_else(|| "with the replay's default lanes".to_owned(), |j| format!("--jobs {j}")));
    if a.is_none() && figures.iter().all(|f| f.e.is_empty()) {
        println!("(a) and (e) left out");
    } else {
        print_verify(&figures, a, a_all);
    }

    if let Ok(list) = std::env::var("LESSONPROBE_BENCH_BATCHES") {
        println!();
        println!("{:>8} {:>13} {:>10}", "batch", "sqlite (d)/s", "RSS MiB");
        for batch in list
            .split(',')
            .filter_map(|b| b.trim().parse::<usize>().ok())
        {
            let file = dir.path().join(format!("sweep-{batch}.db"));
            table.before_replay_sqlite(&file);
            let db = format!("sqlite:{}", file.display());
            let run = run_measured(&replay_args(
                &servers,
                &db,
                &format!("bench-sweep-{batch}"),
                None,
                batch,
                jobs,
            ));
            println!(
                "{batch:>8} {:>13.0} {:>10.1}",
                rate(replayed(&run.stdout), run.wall),
                run.peak_rss_mib
            );
        }
    }
    if let Some(p) = &one_day {
        println!();
        println!("(p) {}", p.line(kind));
    }
}

/// (p): wall times of whole dry-run processes planning one day of the window.
struct OneDay {
    runs: Vec<f64>,
    /// What the plan covers, as its CSV said (records in the window).
    records: u64,
}

impl OneDay {
    fn line(&self, kind: BrokerKind) -> String {
        let mut sorted = self.runs.clone();
        sorted.sort_by(f64::total_cmp);
        let runs: Vec<String> = self.runs.iter().map(|s| format!("{s:.3}")).collect();
        format!(
            "planning a one-day window (--since 2026-09-22T00:00:00Z --until 2026-09-23T00:00:00Z, dry run, {} records) as a whole process on {}: {} s (median {:.3} s, best {:.3} s)",
            self.records,
            kind.name(),
            runs.join(", "),
            sorted[sorted.len() / 2],
            sorted[0]
        )
    }
}

/// Runs `replay` without --execute on the day 2026-09-22 three times, into a SQLite file that
/// does not exist (a dry run does not create it), and times each whole process.
fn plan_one_day(servers: &str, dir: &Path) -> OneDay {
    let db = format!("sqlite:{}", dir.join("plan-only.db").display());
    let args: Vec<String> = [
        "replay",
        "--kafka",
        servers,
        "--topic",
        TOPIC,
        "--since",
        "2026-09-22T00:00:00Z",
        "--until",
        "2026-09-23T00:00:00Z",
        "--db",
        &db,
        "--deadline",
        "1h",
        "--live-group",
        "bench-live",
        "--replay-group",
        "bench-plan",
        "--format",
        "csv",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut runs = Vec::new();
    let mut records = 0;
    for _ in 0..3 {
        let run = run_measured(&args);
        records = planned_records(&run.stdout);
        runs.push(run.wall.as_secs_f64());
    }
    assert!(
        !dir.join("plan-only.db").exists(),
        "a dry run created its target"
    );
    OneDay { runs, records }
}

/// (h) what an operator would do by hand instead of `replay verify`: the window dumped with
/// kcat (its offsets by time from the broker), each record's event_id taken with jq (records
/// that are not JSON skipped), and an anti-join against `audit_events` in the sqlite3 shell.
/// Seconds as a whole pipeline, and the count of missing ids (0 on (d)'s complete table).
/// `None`, saying why, when kcat, jq or sqlite3 is not installed.
fn by_hand(servers: &str, db: &std::path::Path, dir: &std::path::Path) -> Option<(f64, u64)> {
    for tool in ["kcat", "jq", "sqlite3"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            println!("(h) by hand skipped: {tool} is not installed");
            return None;
        }
    }
    let ids = dir.join("by-hand-ids.csv");
    let script = format!(
        "kcat -b {servers} -C -q -e -t {TOPIC} -o s@{since} -o e@{until} -f '%s\n' \
           | jq -R -r 'fromjson? | .event_id // empty' > {ids} \
         && sqlite3 {db} '.mode csv' 'CREATE TEMP TABLE w(event_id TEXT)' '.import {ids} w' \
              'SELECT COUNT(*) FROM w WHERE NOT EXISTS (SELECT 1 FROM audit_events a WHERE a.event_id = w.event_id)'",
        // window_args's: 2026-09-21T00:00:00Z to 2026-09-25T00:00:00Z.
        since = 1_789_948_800_000i64,
        until = 1_789_948_800_000i64 + 4 * 86_400_000,
        ids = ids.display(),
        db = db.display(),
    );
    let started = Instant::now();
    let out = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("run the by-hand check");
    let wall = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the by-hand check failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let missing = stdout.trim().parse().expect("a count");
    eprintln!("(h) by hand: {wall:.2} s, {missing} missing");
    Some((wall, missing))
}

/// The table of (e) against (a) and (a*).
fn print_verify(figures: &[Figures], a: Option<f64>, a_all: Option<f64>) {
    println!();
    println!(
        "{:<9} {:>7} {:>13} {:>13} {:>13} {:>13} {:>7} {:>7} {:>10} {:>9} {:>7}",
        "backend",
        "(e) by",
        "(a) consume/s",
        "(a*) all/s",
        "(e) verify/s",
        "(e) exec/s",
        "e/a",
        "e/a*",
        "RSS e MiB",
        "outside s",
        "CPU s"
    );
    for f in figures {
        for e in &f.e {
            println!(
                "{:<9} {:>7} {:>13} {:>13} {:>13} {:>13} {:>7} {:>7} {:>10.1} {:>9.2} {:>7.2}",
                f.backend,
                e.compared,
                opt(a),
                opt(a_all),
                opt(Some(e.whole)),
                opt(Some(e.exec)),
                ratio(Some(e.whole), a),
                ratio(Some(e.whole), a_all),
                e.rss,
                e.outside,
                e.cpu
            );
        }
    }
    for f in figures {
        if let Some((wall, missing)) = f.by_hand {
            let verify = f.e.iter().map(|e| e.seconds).fold(f64::INFINITY, f64::min);
            println!(
                "{} (h) by hand (kcat | jq, sqlite3 anti-join): {wall:.2} s, {missing} missing; the fastest (e) took {verify:.2} s: by hand / verify = {:.2}",
                f.backend,
                wall / verify
            );
        }
    }
    println!("(e) verify/s is the whole `replay verify` process (start-up, planning, reading, comparing, sorted runs); exec/s its reading and comparing; e/a and e/a* use the whole process; by: as --compare auto chose (scan: the table read whole and merged), then --compare lookup; outside s: seconds of the whole process outside its reading and comparing (start-up, planning, closing; the command prints no planning time of its own)");
}

/// A rate, or "-" for a part left out.
fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

/// `x / y`, or "-" where either was left out.
fn ratio(x: Option<f64>, y: Option<f64>) -> String {
    x.zip(y)
        .map_or_else(|| "-".to_owned(), |(x, y)| format!("{:.2}", x / y))
}
