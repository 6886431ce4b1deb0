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
//!     so the seconds outside its reading and comparing (start-up, planning, closing) are shown;
//! (k) on SQLite, the read limit of (e): kcat reading the same window into /dev/null, paired
//!     with (e) in each round.
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
//! parts among p,a,i,b,c,e,h,k to leave out of a long run: without i and b the events are not kept
//! in this process, so that a day of 10,000,000 fits in memory), LESSONPROBE_BENCH_BASELINE
//! (another lessonprobe binary whose (d) runs beside this one's, in the same run),
//! LESSONPROBE_BENCH_JOBS (--jobs of (d); unset, the replay's own default, and each round also
//! runs (d) with --jobs 1, the single-lane figure), LESSONPROBE_BENCH_ROUNDS (3: rounds of
//! (i) in delivery order and (d) run one right after the other, each pair's ratio printed and
//! the median of the rounds' ratios; with LESSONPROBE_BENCH_BASELINE, each round on PostgreSQL
//! also runs this binary's and the baseline's (d) with --jobs 1 one after the other, and
//! prints the CPU (user + system) each process used), LESSONPROBE_BENCH_SCALE (a factor F:
//! instead of every part above, the scale run of `scale.rs`, on Apache Kafka: (d) on SQLite of
//! the day and of a day F times as large, alternately, round after round). Each figure is also
//! printed to standard error as soon as it is measured.

use std::path::Path;
use std::time::Duration;

use lessonprobe_testkit::bench::setting;
use ticketflow::kafka::Broker;
use ticketflow::KafkaTarget;

use broker::{start_broker, BrokerKind};
use command::{replay_args, replayed};
use consume::{consume_all_at_once, consume_only};
use day::Day;
use inserts::Row;
use planning::plan_one_day;
use process::run_measured;
use table::Table;
use verify::{print_verify, Verified};

const TOPIC: &str = "bench.audit";
/// Events generated and produced at a time when the day is not kept.
const CHUNK_EVENTS: usize = 1_000_000;
/// (b)'s records per SQL transaction, in batches of up to `BATCH_RECORDS` of one partition
/// each: the replay's default into PostgreSQL, and its least into SQLite.
const DEFAULT_BATCH: usize = ticketflow::replay::DEFAULT_BATCH;
const BATCH_RECORDS: usize = ticketflow::replay::BATCH_RECORDS;

fn rate(events: u64, wall: Duration) -> f64 {
    events as f64 / wall.as_secs_f64()
}

/// What every backend's parts share.
struct Bench<'a> {
    settings: &'a Settings,
    servers: &'a str,
    dir: &'a Path,
    table: Table,
    /// The day in the order a replay applies it, and in event_id order.
    delivery: &'a [&'a Row],
    by_key: &'a [&'a Row],
    /// Every event's payload, in delivery order.
    events: &'a [Vec<u8>],
    /// Records the broker holds.
    total: i64,
    /// The partitions (c) replays.
    c_list: &'a str,
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

mod backend;
mod broker;
mod command;
mod consume;
mod day;
mod inserts;
mod planning;
mod process;
mod rounds;
mod scale;
mod table;
mod verify;

/// What the run is asked for, from the environment (see the top of this file).
struct Settings {
    events: usize,
    partitions: usize,
    batch1: usize,
    jobs: Option<usize>,
    baseline: Option<String>,
    rounds: usize,
    skip: String,
    postgres: Option<String>,
    /// The scale run's factor, instead of every other part.
    scale: Option<usize>,
}

impl Settings {
    fn from_env() -> Settings {
        Settings {
            events: setting("LESSONPROBE_BENCH_EVENTS", 1_000_000),
            partitions: setting("LESSONPROBE_BENCH_PARTITIONS", 100),
            batch1: setting("LESSONPROBE_BENCH_BATCH1_EVENTS", 20_000),
            jobs: std::env::var_os("LESSONPROBE_BENCH_JOBS")
                .is_some()
                .then(|| setting("LESSONPROBE_BENCH_JOBS", 1)),
            baseline: std::env::var("LESSONPROBE_BENCH_BASELINE").ok(),
            rounds: setting("LESSONPROBE_BENCH_ROUNDS", 3),
            skip: std::env::var("LESSONPROBE_BENCH_SKIP").unwrap_or_default(),
            postgres: std::env::var("LESSONPROBE_BENCH_POSTGRES")
                .or_else(|_| std::env::var("LESSONPROBE_TEST_POSTGRES"))
                .ok(),
            scale: std::env::var_os("LESSONPROBE_BENCH_SCALE")
                .is_some()
                .then(|| setting("LESSONPROBE_BENCH_SCALE", 3)),
        }
    }

    /// Whether `part` (p, a, i, b, c, e, h, k) is left out.
    fn skip(&self, part: &str) -> bool {
        self.skip.split(',').any(|s| s.trim() == part)
    }
}

fn main() {
    let settings = Settings::from_env();
    let (n, partitions) = (settings.events, settings.partitions);
    let kind = BrokerKind::from_env();
    let table = Table::from_env();
    // Dropped last (after the Broker handle below): stops the broker, a panic included.
    let (_broker_guard, servers) = start_broker(kind, partitions);
    let target = KafkaTarget::Bootstrap {
        servers: servers.clone(),
        properties: Vec::new(),
    };
    let mut broker = Broker::for_target(&target, Duration::from_secs(10)).expect("broker");
    if let Some(factor) = settings.scale {
        assert!(
            kind == BrokerKind::ApacheKafka,
            "LESSONPROBE_BENCH_SCALE needs LESSONPROBE_BENCH_BROKER=apache-kafka: the mock's fetch is quadratic per partition"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        scale::scale_run(
            &mut broker,
            &settings,
            (&servers, dir.path(), table),
            factor,
        );
        return;
    }
    let day = Day::load(&broker, &settings);
    let delivery: Vec<&Row> = day.rows.iter().collect();
    let mut by_key: Vec<&Row> = day.rows.iter().collect();
    by_key.sort_by(|x, y| x.event.event_id.cmp(&y.event.event_id));
    let events: Vec<Vec<u8>> = day.rows.iter().map(|r| r.raw.clone()).collect();
    let total = day.total;
    println!(
        "{n} events of ~{} bytes in {partitions} partitions of {} ({total} records); produced at {:.0} events/s; window 2026-09-21 to 2026-09-24 (all); target table: {} ({} columns)",
        day.average_bytes,
        kind.name(),
        rate(n as u64, day.produced),
        table.name(),
        table.columns()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let one_day = (!settings.skip("p")).then(|| plan_one_day(&servers, dir.path()));
    if let Some(p) = &one_day {
        eprintln!("(p) {}", p.line(kind));
    }

    // Enough whole partitions for (c) to replay about `batch1` events.
    let per_partition = (total as usize / partitions).max(1);
    let c_parts = (settings.batch1 / per_partition).clamp(1, partitions);
    let c_list: Vec<String> = (0..c_parts).map(|p| p.to_string()).collect();
    let c_list = c_list.join(",");

    let (a, a_all) = if settings.skip("a") {
        (None, None)
    } else {
        consume(&broker, partitions as i32)
    };

    let mut backends: Vec<(&'static str, String)> = vec![("sqlite", String::new())];
    match &settings.postgres {
        Some(url) => backends.push(("postgres", url.clone())),
        None => println!("PostgreSQL skipped: set LESSONPROBE_BENCH_POSTGRES (or LESSONPROBE_TEST_POSTGRES) to a postgres:// URL"),
    }
    let bench = Bench {
        settings: &settings,
        servers: &servers,
        dir: dir.path(),
        table,
        delivery: &delivery,
        by_key: &by_key,
        events: &events,
        total,
        c_list: &c_list,
    };
    let figures: Vec<Figures> = backends
        .iter()
        .map(|(backend, url)| bench.measure(backend, url))
        .collect();

    print_figures(&figures, a, table);
    println!("(c) replays partitions {c_list} (~{} events); (d) every partition, the replay's default --batch, {}", c_parts * per_partition, settings.jobs.map_or_else(|| "with the replay's default lanes".to_owned(), |j| format!("--jobs {j}")));
    if a.is_none() && figures.iter().all(|f| f.e.is_empty()) {
        println!("(a) and (e) left out");
    } else {
        print_verify(&figures, a, a_all);
    }

    if let Ok(list) = std::env::var("LESSONPROBE_BENCH_BATCHES") {
        sweep(&bench, &list);
    }
    if let Some(p) = &one_day {
        println!();
        println!("(p) {}", p.line(kind));
    }
}

/// (a) and (a*), each printed to standard error as it is measured.
fn consume(broker: &Broker, partitions: i32) -> (Option<f64>, Option<f64>) {
    let (consumed, wall) = consume_only(broker, partitions);
    let a = rate(consumed, wall);
    eprintln!("(a) consume-only: {a:.0} events/s");
    let (consumed, wall) = consume_all_at_once(broker, partitions);
    let a_all = rate(consumed, wall);
    eprintln!("(a*) consume-only, every partition at once: {a_all:.0} events/s");
    (Some(a), Some(a_all))
}

/// The table of every backend's figures, and what they are.
fn print_figures(figures: &[Figures], a: Option<f64>, table: Table) {
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
    for f in figures {
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
    for f in figures {
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
}

/// A sweep of (d) on SQLite over the batch sizes of `list` (LESSONPROBE_BENCH_BATCHES).
fn sweep(bench: &Bench<'_>, list: &str) {
    println!();
    println!("{:>8} {:>13} {:>10}", "batch", "sqlite (d)/s", "RSS MiB");
    for batch in list
        .split(',')
        .filter_map(|b| b.trim().parse::<usize>().ok())
    {
        let file = bench.dir.join(format!("sweep-{batch}.db"));
        bench.table.before_replay_sqlite(&file);
        let db = format!("sqlite:{}", file.display());
        let run = run_measured(&replay_args(
            bench.servers,
            &db,
            &format!("bench-sweep-{batch}"),
            None,
            Some(batch),
            bench.settings.jobs,
        ));
        println!(
            "{batch:>8} {:>13.0} {:>10.1}",
            rate(replayed(&run.stdout), run.wall),
            run.peak_rss_mib
        );
    }
}

/// The value `var` names among `choices` (name, value), the first when it is unset or empty;
/// another name stops the bench saying which there are.
fn choice<T: Copy>(var: &str, choices: &[(&str, T)]) -> T {
    let name = std::env::var(var).unwrap_or_default();
    if name.is_empty() {
        return choices[0].1;
    }
    match choices.iter().find(|(n, _)| *n == name) {
        Some((_, value)) => *value,
        None => {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            panic!("{var}={name}: {}", names.join(" or "))
        }
    }
}

/// Of an even number of values, the mean of the two middle ones.
pub fn median(mut v: Vec<f64>) -> f64 {
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

/// A rate, or "-" for a part left out.
fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

/// `x / y`, or "-" where either was left out.
fn ratio(x: Option<f64>, y: Option<f64>) -> String {
    x.zip(y)
        .map_or_else(|| "-".to_owned(), |(x, y)| format!("{:.2}", x / y))
}
