//! The further rounds of (i) and (d), paired one right after the other.

use super::command::{replay_args, replayed};
use super::inserts::{independent_postgres, independent_sqlite};
use super::process::{run_measured, run_measured_with, Finished};
use super::table::in_schema;
use super::{median, rate, Bench};

/// Where the further rounds of (i) and (d) run: `bench`'s day on `backend` (PostgreSQL at
/// `url`), with its settings' --jobs and baseline binary (whose (d) with --jobs 1 runs beside
/// this one's, each round).
pub struct Paired<'a> {
    pub bench: &'a Bench<'a>,
    pub backend: &'a str,
    pub url: &'a str,
}

impl Paired<'_> {
    fn jobs(&self) -> Option<usize> {
        self.bench.settings.jobs
    }

    fn baseline(&self) -> Option<&str> {
        self.bench.settings.baseline.as_deref()
    }
}

/// A fresh target for one more replay of a round: `name`'s SQLite file or PostgreSQL schema.
pub fn fresh_target(at: &Paired<'_>, name: &str) -> String {
    match at.backend {
        "sqlite" => {
            let path = at.bench.dir.join(format!("{name}.db"));
            let _ = std::fs::remove_file(&path);
            at.bench.table.before_replay_sqlite(&path);
            format!("sqlite:{}", path.display())
        }
        _ => {
            let schema = format!("lessonprobe_bench_{name}");
            let mut client = postgres::Client::connect(at.url, postgres::NoTls).expect("postgres");
            at.bench.table.fresh_postgres_schema(&mut client, &schema);
            in_schema(at.url, &schema)
        }
    }
}

/// (d) of `binary` (this one's when `None`) into a fresh target `name`, round `round`.
fn replay_d(
    at: &Paired<'_>,
    name: &str,
    round: usize,
    jobs: Option<usize>,
    binary: Option<&str>,
) -> Finished {
    let db = fresh_target(at, name);
    let args = replay_args(
        at.bench.servers,
        &db,
        &format!("bench-{name}{round}-{}", at.backend),
        None,
        None,
        jobs,
    );
    match binary {
        Some(binary) => run_measured_with(binary, &args),
        None => run_measured(&args),
    }
}

/// Round `round`'s (i) in delivery order and (d): their rates, (d)'s execution and whole.
fn round_of_i_and_d(at: &Paired<'_>, round: usize) -> (f64, f64, f64) {
    let Bench {
        dir,
        table,
        delivery: rows,
        ..
    } = at.bench;
    let n = rows.len() as u64;
    let i = match at.backend {
        "sqlite" => {
            let i = rate(n, independent_sqlite(&dir.join("i-round.db"), *table, rows));
            let _ = std::fs::remove_file(dir.join("i-round.db"));
            i
        }
        _ => rate(
            n,
            independent_postgres(at.url, "lessonprobe_bench_copy", *table, rows),
        ),
    };
    let d = replay_d(at, "round", round, at.jobs(), None);
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
}

/// What the rounds measured: (i) and (d) of each, (d) with --jobs 1 beside them, and the CPU
/// of this binary's and the baseline's (d) with --jobs 1.
#[derive(Default)]
struct Rounds {
    /// (i), (d)'s execution rate and whole rate.
    seen: Vec<(f64, f64, f64)>,
    /// (i), (d --jobs 1)'s execution rate and whole rate.
    single: Vec<(f64, f64, f64)>,
    /// CPU of this binary's and the baseline's (d --jobs 1), and their whole rates.
    cpus: Vec<(f64, f64, f64, f64)>,
}

/// Rounds 1..=`rounds` of (i) in delivery order and (d), one right after the other, each into
/// a fresh table (`first` is round 1's (i), (d) execution and (d) whole rates, measured
/// before): the shared machine's speed drifts from minute to minute, so the ratio is given per
/// round and as the median of the rounds. On PostgreSQL, with the replay's default lanes, each
/// round also runs (d) with --jobs 1 (the single-lane figure); with a baseline binary, that
/// binary's (d) with --jobs 1 right after, and the CPU of both processes.
pub fn paired_rounds(at: &Paired<'_>, rounds: usize, first: (f64, f64, f64)) {
    let mut measured = Rounds::default();
    let postgres = at.backend == "postgres";
    for round in 1..=rounds {
        let (i, exec, whole) = if round == 1 {
            first
        } else {
            round_of_i_and_d(at, round)
        };
        measured.seen.push((i, exec, whole));
        if !postgres || (at.jobs().is_some() && at.baseline().is_none()) {
            continue;
        }
        // One lane, this binary: beside the default's figure, and the CPU it took.
        let d1 = replay_d(at, "single", round, Some(1), None);
        let whole1 = rate(replayed(&d1.stdout), d1.wall);
        eprintln!(
            "{} round {round}: (d) --jobs 1 {whole1:.0}/s whole, {:.0}/s execution, CPU {:.2} s; (d --jobs 1)/(i) = {:.2} (execution), {:.2} (whole)",
            at.backend,
            d1.execute_rate,
            d1.cpu,
            d1.execute_rate / i,
            whole1 / i
        );
        measured.single.push((i, d1.execute_rate, whole1));
        if let Some(baseline) = at.baseline() {
            let b = replay_d(at, "base", round, Some(1), Some(baseline));
            let whole_b = rate(replayed(&b.stdout), b.wall);
            eprintln!(
                "{} round {round}: the baseline's (d) --jobs 1 {whole_b:.0}/s whole, {:.0}/s execution, CPU {:.2} s; this binary's CPU / the baseline's = {:.2}",
                at.backend,
                b.execute_rate,
                b.cpu,
                d1.cpu / b.cpu
            );
            measured.cpus.push((d1.cpu, b.cpu, whole1, whole_b));
        }
    }
    print_rounds(at, &measured);
}

/// The medians of the rounds' ratios, and each round's.
fn print_rounds(at: &Paired<'_>, measured: &Rounds) {
    let Rounds { seen, single, cpus } = measured;
    let low = seen
        .iter()
        .map(|(i, e, _)| e / i)
        .fold(f64::INFINITY, f64::min);
    let high = seen.iter().map(|(i, e, _)| e / i).fold(0.0, f64::max);
    println!(
        "{}: (d)/(i) over {} paired rounds (round 1 is the table's), {}: median {:.2} (execution), {:.2} (whole process); execution ratios from {low:.2} to {high:.2}",
        at.backend,
        seen.len(),
        at.jobs()
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
