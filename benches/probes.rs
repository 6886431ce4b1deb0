//! Wall time of `lessonprobe --lesson 30` and of every checkpoint, on embedded defaults, as a
//! whole process (warm: after one unmeasured run), and of lesson 30 with the sample course's
//! document probes, with the share of those that is Python start-up. `cargo bench --bench
//! probes`; the course's interpreter is LESSONPROBE_BENCH_PYTHON (a Python with SQLAlchemy),
//! else LESSONPROBE_TEST_PYTHON, else python3.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_testkit::bench::setting;

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

/// The sample course's interpreter.
fn python() -> String {
    ["LESSONPROBE_BENCH_PYTHON", "LESSONPROBE_TEST_PYTHON"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()))
        .unwrap_or_else(|| "python3".into())
}

/// Median wall time of `python ARGS` in `cwd`.
fn interpreter(python: &str, args: &[&str], cwd: &Path, runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let status = Command::new(python)
                .args(args)
                .current_dir(cwd)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .status()
                .expect("run python");
            assert!(status.success(), "{python} {args:?} failed");
            started.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Lesson 30 with the sample course: wall time, the document probes' summed time, and what
/// Python start-up (with the course's imports) accounts for in it.
fn course_lesson_30(runs: usize) {
    let python = python();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let args = [
        "--lesson",
        "30",
        "--course",
        "examples/ticketflow-course",
        "--python",
        python.as_str(),
    ];
    let walls = time(&args, runs);
    let out = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
        .args(args)
        .args(["--no-junit", "--format", "json"])
        .current_dir(root)
        .output()
        .expect("run lessonprobe");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let documents: Vec<f64> = doc["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .filter(|o| o["kind"] == "document" && o["verdict"] == "PASS")
        .map(|o| o["duration"].as_f64().unwrap_or(0.0))
        .collect();
    let project = root.join("examples/ticketflow-course/project");
    let bare = interpreter(&python, &["-c", "pass"], &project, runs);
    let imports = interpreter(
        &python,
        &[
            "-c",
            "import ticketflow.messaging.kafka_audit, ticketflow.messaging.replay",
        ],
        &project,
        runs,
    );
    let summed: f64 = documents.iter().sum();
    let startup = imports.as_secs_f64() * documents.len() as f64;
    println!(
        "{:<28} {:>8.2} {:>8.2} {:>8.2}",
        "--lesson 30 --course sample",
        walls[0].as_secs_f64(),
        walls[walls.len() / 2].as_secs_f64(),
        walls[walls.len() - 1].as_secs_f64()
    );
    println!(
        "  {} document probes: {summed:.2} s summed; python start-up {:.3} s bare, {:.3} s with the course's imports: {:.0}% of the document probes' time",
        documents.len(),
        bare.as_secs_f64(),
        imports.as_secs_f64(),
        100.0 * startup / summed.max(f64::EPSILON)
    );
}

fn main() {
    let runs = setting("LESSONPROBE_BENCH_RUNS", 5);
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
    course_lesson_30(runs);
}
