//! Replay throughput: (a) consume-only, (b) insert-only, (c) `replay --batch 1`, (d) `replay`
//! with the default batch, and (e) `replay verify` of (d)'s window against (d)'s table, on
//! SQLite (a file in WAL mode) and PostgreSQL, against `lessonprobe broker` in another process.
//! Prints events/s, the ratios d/min(a,b), d/c and e/a, and each process's peak RSS.
//! `cargo bench --bench replay`.
//!
//! LESSONPROBE_BENCH_EVENTS (default 1,000,000), LESSONPROBE_BENCH_PARTITIONS (100: the mock
//! keeps only ~5 MiB per partition), LESSONPROBE_BENCH_BATCH1_EVENTS (20,000: the part (c)
//! replays), LESSONPROBE_BENCH_POSTGRES or LESSONPROBE_TEST_POSTGRES (a PostgreSQL URL; without
//! one the PostgreSQL rows are skipped, saying so), LESSONPROBE_BENCH_BATCHES (a list such as
//! 100,500,2000,10000 for a sweep of (d) on SQLite).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ticketflow::day::{self, DaySpec};
use ticketflow::event::EventRecord;
use ticketflow::kafka::{Broker, KafkaReplayConsumer};
use ticketflow::replay::{ReplayConsumer, ReplayGroup};
use ticketflow::store::{
    AuditDb, Batch, Counters, Entry, PartitionProgress, PlanScope, PlanStatus, PlanWindow,
    RecordedPlan, Timeouts,
};
use ticketflow::KafkaTarget;

const TOPIC: &str = "bench.audit";
const DEFAULT_BATCH: usize = 10_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

struct Finished {
    wall: Duration,
    peak_rss_mib: f64,
    stdout: String,
    /// Records/s of the execution phase, as the command reported it.
    execute_rate: f64,
}

/// Runs `lessonprobe ARGS`, sampling its peak RSS (VmHWM of /proc/PID/status) until it exits.
/// (wait4's ru_maxrss would count the memory of this process at fork time as well.)
fn run_measured(args: &[String]) -> Finished {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
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
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    assert!(status.success(), "lessonprobe {args:?} failed:\n{out}{err}");
    // "… N records in X s (R records/s) after planning in Y s": the execution phase alone.
    let execute_rate = err
        .lines()
        .find_map(|l| {
            l.split(" s (")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    Finished {
        wall: started.elapsed(),
        peak_rss_mib: peak_kib as f64 / 1024.0,
        stdout: out,
        execute_rate,
    }
}

fn start_broker(partitions: usize) -> (Child, String) {
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
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("bootstrap line");
    (child, line.trim().to_owned())
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
    for chunk in records.chunks(DEFAULT_BATCH) {
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
    started.elapsed()
}

/// `url` with its search path set to `schema`.
fn in_schema(url: &str, schema: &str) -> String {
    let glue = if url.contains('?') { '&' } else { '?' };
    format!("{url}{glue}options=-csearch_path%3D{schema}")
}

fn replay_args(
    servers: &str,
    db: &str,
    group: &str,
    partitions: Option<&str>,
    batch: usize,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "replay",
        "--kafka",
        servers,
        "--topic",
        TOPIC,
        "--live-group",
        "bench-live",
        "--replay-group",
        group,
        "--since",
        "2026-09-21T00:00:00Z",
        "--until",
        "2026-09-25T00:00:00Z",
        "--execute",
        "--format",
        "csv",
        "--db",
        db,
        "--deadline",
        "1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["--batch".into(), batch.to_string()]);
    if let Some(p) = partitions {
        args.extend(["--partitions".into(), p.to_owned()]);
    }
    args
}

/// `replay verify` of the window every (d) replays, against `db`.
fn verify_args(servers: &str, db: &str) -> Vec<String> {
    [
        "replay",
        "verify",
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

/// Records the replay reported (the csv's `records` column summed).
fn replayed(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("partition,records"))
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse::<u64>().ok())
        .sum()
}

struct Row {
    backend: &'static str,
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    /// (d)'s execution phase alone (the command's own figure), without start-up and planning.
    d_exec: f64,
    rss_c: f64,
    rss_d: f64,
    /// (e) `replay verify`: whole process, its reading-and-comparing phase, peak RSS.
    e: f64,
    e_exec: f64,
    rss_e: f64,
}

fn main() {
    let n = env("LESSONPROBE_BENCH_EVENTS", 1_000_000);
    let partitions = env("LESSONPROBE_BENCH_PARTITIONS", 100);
    let batch1 = env("LESSONPROBE_BENCH_BATCH1_EVENTS", 20_000);
    let postgres = std::env::var("LESSONPROBE_BENCH_POSTGRES")
        .or_else(|_| std::env::var("LESSONPROBE_TEST_POSTGRES"))
        .ok();

    let (mut broker_process, servers) = start_broker(partitions);
    let target = KafkaTarget::Bootstrap {
        servers: servers.clone(),
        properties: Vec::new(),
    };
    let broker = Broker::for_target(&target, Duration::from_secs(10)).expect("broker");
    let records = day::generate(&DaySpec {
        // Not the broker's own sample day's seed: its one preloaded event would share an
        // event_id with other content (a conflict, exit 5).
        seed: 3030,
        events: n,
        tickets: 50_000,
        tenants: 20,
        redelivery_per_mille: 0,
        padding: 100,
        ..DaySpec::default()
    });
    let avg = records
        .iter()
        .take(1000)
        .map(|r| r.payload().len())
        .sum::<usize>()
        / records.len().clamp(1, 1000);
    let started = Instant::now();
    broker
        .produce_day(TOPIC, partitions as i32, &records)
        .expect("produce");
    let produced = started.elapsed();
    // (b) inserts in the order a replay applies them: partition after partition.
    let mut events: Vec<(i32, Vec<u8>)> = records
        .into_iter()
        .map(|r| (day::partition_for(&r.key, partitions as i32), r.payload()))
        .collect();
    events.sort_by_key(|(p, _)| *p);
    let events: Vec<Vec<u8>> = events.into_iter().map(|(_, e)| e).collect();
    let total: i64 = (0..partitions as i32)
        .map(|p| broker.watermarks(TOPIC, p).map(|(l, h)| h - l).unwrap_or(0))
        .sum();
    assert!(
        total as usize > n,
        "the broker kept {total} of {n} records: spread them over more partitions"
    );
    println!(
        "{n} events of ~{avg} bytes in {partitions} partitions; produced at {:.0} events/s; window 2026-09-21 to 2026-09-24 (all)",
        rate(n as u64, produced)
    );

    // Enough whole partitions for (c) to replay about `batch1` events.
    let per_partition = (total as usize / partitions).max(1);
    let c_parts = (batch1 / per_partition).clamp(1, partitions);
    let c_list: Vec<String> = (0..c_parts).map(|p| p.to_string()).collect();
    let c_list = c_list.join(",");

    let (consumed, wall) = consume_only(&broker, partitions as i32);
    let a = rate(consumed, wall);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = Vec::new();
    let mut backends: Vec<(&'static str, String)> = vec![("sqlite", String::new())];
    match &postgres {
        Some(url) => backends.push(("postgres", url.clone())),
        None => println!("PostgreSQL skipped: set LESSONPROBE_BENCH_POSTGRES (or LESSONPROBE_TEST_POSTGRES) to a postgres:// URL"),
    }
    for (backend, url) in backends {
        let (b, db_c, db_d) = match backend {
            "sqlite" => {
                let insert = AuditDb::Sqlite(dir.path().join("insert.db"));
                let b = rate(n as u64, insert_only(&insert, &events));
                let c = format!("sqlite:{}", dir.path().join("c.db").display());
                let d = format!("sqlite:{}", dir.path().join("d.db").display());
                (b, c, d)
            }
            _ => {
                let mut client =
                    postgres::Client::connect(&url, postgres::NoTls).expect("postgres");
                let schema = "lessonprobe_bench_insert";
                client
                    .batch_execute(&format!(
                        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
                    ))
                    .expect("create the bench schema");
                let insert = AuditDb::Postgres(in_schema(&url, schema));
                let b = rate(n as u64, insert_only(&insert, &events));
                let _ = client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
                // (c) and (d) replay into schemas of their own, made fresh.
                for run in ["c", "d"] {
                    let _ = client.batch_execute(&format!(
                        "DROP SCHEMA IF EXISTS lessonprobe_bench_{run} CASCADE; CREATE SCHEMA lessonprobe_bench_{run}"
                    ));
                }
                (
                    b,
                    in_schema(&url, "lessonprobe_bench_c"),
                    in_schema(&url, "lessonprobe_bench_d"),
                )
            }
        };
        let c_run = run_measured(&replay_args(
            &servers,
            &db_c,
            &format!("bench-c-{backend}"),
            Some(&c_list),
            1,
        ));
        let c = rate(replayed(&c_run.stdout), c_run.wall);
        let d_run = run_measured(&replay_args(
            &servers,
            &db_d,
            &format!("bench-d-{backend}"),
            None,
            DEFAULT_BATCH,
        ));
        let d_records = replayed(&d_run.stdout);
        assert_eq!(
            d_records as i64, total,
            "(d) replayed {d_records} of {total}"
        );
        let d = rate(d_records, d_run.wall);
        // A clean window exits 0, which run_measured asserts.
        let e_run = run_measured(&verify_args(&servers, &db_d));
        rows.push(Row {
            backend,
            a,
            b,
            c,
            d,
            d_exec: d_run.execute_rate,
            rss_c: c_run.peak_rss_mib,
            rss_d: d_run.peak_rss_mib,
            e: rate(total as u64, e_run.wall),
            e_exec: e_run.execute_rate,
            rss_e: e_run.peak_rss_mib,
        });
    }

    println!();
    println!(
        "{:<9} {:>13} {:>13} {:>13} {:>13} {:>13} {:>11} {:>7} {:>10} {:>10}",
        "backend",
        "(a) consume/s",
        "(b) insert/s",
        "(c) batch1/s",
        "(d) batch/s",
        "(d) exec/s",
        "d/min(a,b)",
        "d/c",
        "RSS c MiB",
        "RSS d MiB"
    );
    for r in &rows {
        println!(
            "{:<9} {:>13.0} {:>13.0} {:>13.0} {:>13.0} {:>13.0} {:>11.2} {:>7.1} {:>10.1} {:>10.1}",
            r.backend,
            r.a,
            r.b,
            r.c,
            r.d,
            r.d_exec,
            r.d / r.a.min(r.b),
            r.d / r.c,
            r.rss_c,
            r.rss_d
        );
    }
    println!("(d) batch/s is the whole process (start-up, planning, execution, read-back); (d) exec/s its execution phase; ratios use the whole process");
    println!();
    println!(
        "{:<9} {:>13} {:>13} {:>13} {:>7} {:>10}",
        "backend", "(a) consume/s", "(e) verify/s", "(e) exec/s", "e/a", "RSS e MiB"
    );
    for r in &rows {
        println!(
            "{:<9} {:>13.0} {:>13.0} {:>13.0} {:>7.2} {:>10.1}",
            r.backend,
            r.a,
            r.e,
            r.e_exec,
            r.e / r.a,
            r.rss_e
        );
    }
    println!("(e) verify/s is the whole `replay verify` process (start-up, planning, reading, comparing, sorted runs); (e) exec/s its reading and comparing; e/a uses the whole process");
    println!("(c) replays partitions {c_list} (~{} events); (d) every partition, --batch {DEFAULT_BATCH}; whole processes, planning included", c_parts * per_partition);

    if let Ok(list) = std::env::var("LESSONPROBE_BENCH_BATCHES") {
        println!();
        println!("{:>8} {:>13} {:>10}", "batch", "sqlite (d)/s", "RSS MiB");
        for batch in list
            .split(',')
            .filter_map(|b| b.trim().parse::<usize>().ok())
        {
            let db = format!(
                "sqlite:{}",
                dir.path().join(format!("sweep-{batch}.db")).display()
            );
            let run = run_measured(&replay_args(
                &servers,
                &db,
                &format!("bench-sweep-{batch}"),
                None,
                batch,
            ));
            println!(
                "{batch:>8} {:>13.0} {:>10.1}",
                rate(replayed(&run.stdout), run.wall),
                run.peak_rss_mib
            );
        }
    }
    let _ = broker_process.kill();
    let _ = broker_process.wait();
}
