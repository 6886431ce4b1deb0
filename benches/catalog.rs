//! Wall time and peak memory of `lessonprobe list` on generated manifests of 2,500 to 20,000
//! probes, as a whole process: loading and validating manifests must grow linearly.
//! `cargo bench --bench catalog`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_testkit::large_manifest;

/// Wall time of one `lessonprobe list` and its peak resident memory in KiB (VmHWM, sampled).
fn list(dir: &std::path::Path) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
        .arg("list")
        .current_dir(dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("run lessonprobe list");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            if let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "lessonprobe list failed");
            return (started.elapsed(), peak);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn main() {
    println!("probes   min s   median s   max s   peak RSS");
    for n in [2_500, 5_000, 10_000, 20_000] {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("checkpoints")).expect("mkdir");
        std::fs::write(
            dir.path().join("checkpoints/40-large.toml"),
            large_manifest(n),
        )
        .expect("write");
        list(dir.path()); // warm-up
        let mut runs: Vec<(Duration, u64)> = (0..5).map(|_| list(dir.path())).collect();
        runs.sort();
        let peak = runs.iter().map(|r| r.1).max().unwrap_or(0);
        println!(
            "{n:>6}   {:>5.2}   {:>8.2}   {:>5.2}   {:>5} MiB",
            runs[0].0.as_secs_f64(),
            runs[2].0.as_secs_f64(),
            runs[4].0.as_secs_f64(),
            peak / 1024
        );
    }
}
