//! The scale run (LESSONPROBE_BENCH_SCALE=F): the day and a day F times as large over F times
//! the partitions, both in one Apache Kafka, each replayed into a fresh SQLite file by (d),
//! alternately, round after round: whether a replay's rate holds as the day grows, both sides
//! measured in the same minutes. Each other binary of LESSONPROBE_BENCH_BASELINE (a comma
//! separated list here) replays both days right after this one's, in every round.

use std::path::Path;

use ticketflow::kafka::Broker;

use super::command::{on_topic, replay_args, replayed};
use super::day::Day;
use super::process::{run_measured_with, Finished};
use super::table::Table;
use super::{median, rate, Settings, TOPIC};

/// One (d) of the scale run.
struct Replayed {
    whole: f64,
    exec: f64,
    cpu: f64,
    rss: f64,
    /// Bytes of the SQLite file when the replay ended.
    db_bytes: u64,
}

/// The scale run: the bench's day (already on `TOPIC`) against one `factor` times as large.
pub fn scale_run(
    broker: &mut Broker,
    settings: &Settings,
    (servers, dir, table): (&str, &Path, Table),
    factor: usize,
) {
    let (n, partitions) = (settings.events, settings.partitions);
    let small = Day::load_on(broker, TOPIC, (n, partitions), false);
    let large_topic = format!("{TOPIC}.x{factor}");
    let have = broker
        .create_topic(&large_topic, (partitions * factor) as i32)
        .expect("create the large day's topic");
    assert_eq!(
        have as usize,
        partitions * factor,
        "partitions of {large_topic}"
    );
    broker.keep_created_topics();
    let large = Day::load_on(
        broker,
        &large_topic,
        (n * factor, partitions * factor),
        false,
    );
    println!(
        "scale run: {} records over {partitions} partitions ({TOPIC}) against {} over {} ({large_topic}), produced at {:.0} and {:.0} events/s; (d) into a fresh SQLite file each, the replay's default --batch, {} rounds",
        small.total,
        large.total,
        partitions * factor,
        rate(small.total as u64, small.produced),
        rate(large.total as u64, large.produced),
        settings.rounds
    );
    let mut binaries = vec![(
        "this binary".to_owned(),
        env!("CARGO_BIN_EXE_lessonprobe").to_owned(),
    )];
    for b in settings.baseline.iter().flat_map(|b| b.split(',')) {
        binaries.push((b.to_owned(), b.to_owned()));
    }
    // Per binary, per round: the small day's (d), then the large one's.
    let mut seen: Vec<Vec<(Replayed, Replayed)>> = binaries.iter().map(|_| Vec::new()).collect();
    for round in 1..=settings.rounds.max(1) {
        for (b, (name, binary)) in binaries.iter().enumerate() {
            let run = |topic: &str, total: i64, label: &str| {
                let group = format!("bench-scale-{label}-{round}-{b}");
                let d = replay_once(
                    binary,
                    (servers, dir, table),
                    settings,
                    (topic, label, &group),
                );
                assert_eq!(
                    replayed(&d.0.stdout) as i64,
                    total,
                    "{name} replayed {topic}"
                );
                let r = d.1;
                eprintln!(
                    "scale round {round}, {name}: {label} {:.0}/s whole, {:.0}/s execution, CPU {:.2} s, RSS {:.1} MiB, file {} MiB",
                    r.whole,
                    r.exec,
                    r.cpu,
                    r.rss,
                    r.db_bytes >> 20
                );
                r
            };
            let s = run(TOPIC, small.total, "small");
            let l = run(&large_topic, large.total, "large");
            eprintln!(
                "scale round {round}, {name}: large/small = {:.2} (execution), {:.2} (whole)",
                l.exec / s.exec,
                l.whole / s.whole
            );
            seen[b].push((s, l));
        }
    }
    for ((name, _), rounds) in binaries.iter().zip(&seen) {
        let each: Vec<String> = rounds
            .iter()
            .map(|(s, l)| format!("{:.0}/{:.0} = {:.2}", l.exec, s.exec, l.exec / s.exec))
            .collect();
        let cpu: Vec<String> = rounds
            .iter()
            .map(|(s, l)| {
                format!(
                    "{:.2}/{:.2} µs",
                    l.cpu / large.total as f64 * 1e6,
                    s.cpu / small.total as f64 * 1e6
                )
            })
            .collect();
        println!(
            "{name}: SQLite (d) rate at {factor}x / at 1x over {} rounds: median {:.2} (execution), {:.2} (whole process); execution rates, each round's: {}; CPU per record, large/small: {}",
            rounds.len(),
            median(rounds.iter().map(|(s, l)| l.exec / s.exec).collect()),
            median(rounds.iter().map(|(s, l)| l.whole / s.whole).collect()),
            each.join(", "),
            cpu.join(", ")
        );
    }
}

/// One (d) of `binary` reading `topic` with replay group `group` into a fresh SQLite file named
/// after `label`.
fn replay_once(
    binary: &str,
    (servers, dir, table): (&str, &Path, Table),
    settings: &Settings,
    (topic, label, group): (&str, &str, &str),
) -> (Finished, Replayed) {
    let file = dir.join(format!("scale-{label}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    table.before_replay_sqlite(&file);
    let args = replay_args(
        servers,
        &format!("sqlite:{}", file.display()),
        group,
        None,
        None,
        settings.jobs,
    );
    let d = run_measured_with(binary, &on_topic(args, topic));
    let size = |suffix: &str| {
        std::fs::metadata(format!("{}{suffix}", file.display())).map_or(0, |m| m.len())
    };
    let r = Replayed {
        whole: rate(replayed(&d.stdout), d.wall),
        exec: d.execute_rate,
        cpu: d.cpu,
        rss: d.peak_rss_mib,
        db_bytes: size(""),
    };
    (d, r)
}
