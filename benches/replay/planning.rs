//! (p): planning a one-day window as a whole process.

use std::path::Path;

use super::broker::BrokerKind;
use super::command::planned_records;
use super::process::run_measured;
use super::TOPIC;

/// (p): wall times of whole dry-run processes planning one day of the window.
pub struct OneDay {
    pub runs: Vec<f64>,
    /// What the plan covers, as its CSV said (records in the window).
    pub records: u64,
}

impl OneDay {
    pub fn line(&self, kind: BrokerKind) -> String {
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
pub fn plan_one_day(servers: &str, dir: &Path) -> OneDay {
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
