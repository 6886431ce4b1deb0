//! Wall time of `lessonprobe --lesson 30` and of every checkpoint, on embedded defaults, as a
//! whole process (warm: after one unmeasured run). `cargo bench --bench probes`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn time(args: &[&str], runs: usize) -> Vec<Duration> {
    let bin = env!("CARGO_BIN_EXE_lessonprobe");
    let run = || {
        let started = Instant::now();
        let status = Command::new(bin)
            .args(args)
            .args(["--no-junit"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .status()
            .expect("run lessonprobe");
        assert!(status.success(), "lessonprobe {args:?} failed");
        started.elapsed()
    };
    run(); // warm-up
    let mut times: Vec<Duration> = (0..runs).map(|_| run()).collect();
    times.sort();
    times
}

fn main() {
    let runs = std::env::var("LESSONPROBE_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    println!(
        "{:<28} {:>8} {:>8} {:>8}",
        "command", "min s", "median s", "max s"
    );
    for (label, args) in [
        ("lessonprobe --lesson 30", vec!["--lesson", "30"]),
        ("lessonprobe (all)", vec![]),
    ] {
        let t = time(&args, runs);
        println!(
            "{label:<28} {:>8.2} {:>8.2} {:>8.2}",
            t[0].as_secs_f64(),
            t[t.len() / 2].as_secs_f64(),
            t[t.len() - 1].as_secs_f64()
        );
    }
}
