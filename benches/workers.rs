//! Several replay workers on one plan: 1, 2 and 4 `lessonprobe replay --execute --worker`
//! processes started at once on the same window of `lessonprobe broker` (in another process)
//! into a fresh PostgreSQL database each time, timed from their start to the last one's exit.
//! Prints, per worker count, the wall time (group joins and planning included), records/s over
//! the whole window, the audit rows, and each worker's share of the records with its own rate
//! (its execution phase, as it reports it). Figures only: nothing is asserted.
//! `cargo bench --bench workers`.
//!
//! LESSONPROBE_BENCH_POSTGRES (or LESSONPROBE_TEST_POSTGRES): a PostgreSQL URL whose role may
//! create databases (required: without one the benchmark says so and does nothing);
//! LESSONPROBE_BENCH_EVENTS (default 300,000), LESSONPROBE_BENCH_PARTITIONS (60: the mock keeps
//! only ~5 MiB per partition), LESSONPROBE_BENCH_WORKERS (the counts, default 1,2,4).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_testkit::bench::setting;
use lessonprobe_testkit::postgres::{count, OwnDatabase};
use lessonprobe_testkit::replay::{replay_args, SAMPLE_DAYS};
use lessonprobe_testkit::BrokerProcess;

const TOPIC: &str = "bench.workers";

/// One worker process of the plan into `db` as replay group `group`.
fn worker(servers: &str, db: &str, group: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
        .args(replay_args(servers, TOPIC, "bench-live", group, db))
        .args(SAMPLE_DAYS)
        .args([
            "--execute",
            "--worker",
            "--allow-quarantine",
            "--deadline",
            "30m",
            "--format",
            "csv",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a worker")
}

/// `(records, records/s)` from the line the command prints on stderr.
fn reported(stderr: &str) -> Option<(u64, f64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("lessonprobe replay: ") && l.contains(" records in "))?;
    let mut words = line.split_whitespace().skip(2);
    let records = words.next()?.parse().ok()?;
    let rate = line
        .split('(')
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((records, rate))
}

fn main() {
    let Some(admin) = std::env::var("LESSONPROBE_BENCH_POSTGRES")
        .or_else(|_| std::env::var("LESSONPROBE_TEST_POSTGRES"))
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("workers benchmark: set LESSONPROBE_BENCH_POSTGRES to a PostgreSQL URL; nothing measured");
        return;
    };
    let events = setting("LESSONPROBE_BENCH_EVENTS", 300_000);
    let partitions = i32::try_from(setting("LESSONPROBE_BENCH_PARTITIONS", 60))
        .expect("LESSONPROBE_BENCH_PARTITIONS fits a Kafka partition count");
    let counts: Vec<usize> = std::env::var("LESSONPROBE_BENCH_WORKERS")
        .unwrap_or_else(|_| "1,2,4".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!(
        "workers benchmark: {events} events over {partitions} partitions, {cores} cores; loading lessonprobe broker"
    );
    let broker = BrokerProcess::sample_day(TOPIC, events, partitions);
    println!("| workers | wall | records/s | rows | per worker: records (own rate/s) |");
    println!("|---|---|---|---|---|");
    for (run, &n) in counts.iter().enumerate() {
        let db = OwnDatabase::create(&admin, &format!("bench_workers_{run}"));
        let group = format!("bench-workers-{run}-{n}");
        let started = Instant::now();
        let mut children: Vec<Child> = (0..n)
            .map(|_| worker(&broker.servers, &db.url(), &group))
            .collect();
        let mut shares = Vec::new();
        let mut records = 0;
        for child in &mut children {
            let stderr = child.stderr.take().expect("stderr");
            let text = std::io::read_to_string(stderr).unwrap_or_default();
            let status = child.wait().expect("wait for a worker");
            match (status.code(), reported(&text)) {
                (Some(0), Some((mine, rate))) => {
                    records += mine;
                    shares.push(format!("{mine} ({rate:.0})"));
                }
                _ => {
                    eprintln!("a worker failed ({status}):\n{text}");
                    shares.push("failed".into());
                }
            }
        }
        let wall = started.elapsed();
        let rows = count(&db.url(), "SELECT COUNT(*) FROM audit_events");
        let rate = records as f64 / wall.as_secs_f64().max(1e-9);
        let line = format!(
            "| {n} | {:.1} s | {rate:.0} | {rows} | {} |",
            wall.as_secs_f64(),
            shares.join(", ")
        );
        eprintln!("{line}");
        println!("{line}");
        // Let the broker forget the group's members before the next count starts.
        std::thread::sleep(Duration::from_secs(1));
    }
}
