//! (e) `replay verify`, (k) kcat reading the same window (the read limit) and (h) what an
//! operator would do by hand instead.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::command::verify_args;
use super::process::{run_measured, run_measured_with};
use super::{median, opt, rate, ratio, Figures, Settings, TOPIC};

/// One `replay verify` run of (e).
pub struct Verified {
    /// Records/s of the whole process and of its reading and comparing.
    pub whole: f64,
    /// CPU seconds (user + system) of the process.
    pub cpu: f64,
    pub exec: f64,
    /// Peak RSS, MiB.
    pub rss: f64,
    /// Seconds of the whole process outside its reading and comparing: start-up, planning
    /// (which the command does not print) and closing.
    pub outside: f64,
    /// How it compared the table: "scan" or "lookup".
    pub compared: &'static str,
    /// Seconds of the whole process.
    pub seconds: f64,
}

/// kcat dumping the window every (d) replays, one payload a line: its offsets by time from the
/// broker (window_args's 2026-09-21T00:00:00Z to 2026-09-25T00:00:00Z), every partition at once.
fn kcat_window(servers: &str) -> String {
    let since = 1_789_948_800_000i64;
    let until = since + 4 * 86_400_000;
    format!("kcat -b {servers} -C -q -e -t {TOPIC} -o s@{since} -o e@{until} -f '%s\n'")
}

/// Whether `tool` is on the PATH; when not, says that `part` is skipped for it.
fn installed(tool: &str, part: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("{part} skipped: {tool} is not installed");
    }
    found
}

/// (k) the read limit: kcat reading the window into /dev/null, seconds; `None` when kcat is
/// not installed.
pub fn kcat_read(servers: &str) -> Option<f64> {
    if !installed("kcat", "(k) kcat's read") {
        return None;
    }
    let started = Instant::now();
    let out = Command::new("sh")
        .args(["-c", &format!("{} > /dev/null", kcat_window(servers))])
        .output()
        .expect("run kcat");
    let wall = started.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "kcat failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("(k) kcat read the window in {wall:.2} s");
    Some(wall)
}

/// (k) and (e) as --compare auto chooses, one right after the other in each of the settings'
/// rounds: `replay verify` against the time kcat takes to read the same window.
pub fn kcat_rounds(settings: &Settings, servers: &str, backend: &str, db_d: &str) {
    let auto = verify_compare(servers, db_d, "auto");
    let mut pairs = Vec::new();
    for round in 1..=settings.rounds.max(1) {
        let Some(k) = kcat_read(servers) else {
            return;
        };
        let v = run_measured(&auto);
        let secs = v.wall.as_secs_f64();
        eprintln!(
            "{backend} round {round}: (k) kcat {k:.2} s, (e) verify {secs:.2} s (CPU {:.2} s): verify / kcat = {:.2}",
            v.cpu,
            secs / k
        );
        pairs.push((k, secs));
    }
    println!(
        "{backend}: verify (e, --compare auto) / kcat's read (k) over {} paired rounds: median {:.2}; each round's: {}",
        pairs.len(),
        median(pairs.iter().map(|(k, v)| v / k).collect()),
        pairs
            .iter()
            .map(|(k, v)| format!("{v:.2}/{k:.2} s = {:.2}", v / k))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// (h) what an operator would do by hand instead of `replay verify`: the window dumped with
/// kcat (its offsets by time from the broker), each record's event_id taken with jq (records
/// that are not JSON skipped), and an anti-join against `audit_events` in the sqlite3 shell.
/// Seconds as a whole pipeline, and the count of missing ids (0 on (d)'s complete table).
/// `None`, saying why, when kcat, jq or sqlite3 is not installed.
pub fn by_hand(servers: &str, db: &Path, dir: &Path) -> Option<(f64, u64)> {
    if !["kcat", "jq", "sqlite3"]
        .iter()
        .all(|tool| installed(tool, "(h) by hand"))
    {
        return None;
    }
    let ids = dir.join("by-hand-ids.csv");
    let script = format!(
        "{} | jq -R -r 'fromjson? | .event_id // empty' > {ids} \
         && sqlite3 {db} '.mode csv' 'CREATE TEMP TABLE w(event_id TEXT)' '.import {ids} w' \
              'SELECT COUNT(*) FROM w WHERE NOT EXISTS (SELECT 1 FROM audit_events a WHERE a.event_id = w.event_id)'",
        kcat_window(servers),
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
pub fn print_verify(figures: &[Figures], a: Option<f64>, a_all: Option<f64>) {
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

/// (e): `replay verify` of (d)'s window of `total` records against `db_d`, as `--compare
/// auto` chooses, then looking each event_id up; none when (e) is left out.
pub fn verify_runs(settings: &Settings, servers: &str, db_d: &str, total: i64) -> Vec<Verified> {
    let compares: &[&str] = if settings.skip("e") {
        &[]
    } else {
        &["auto", "lookup"]
    };
    compares
        .iter()
        .map(|compare| {
            let e_run = run_measured(&verify_compare(servers, db_d, compare));
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
        .collect()
}

/// `replay verify --compare COMPARE` of the window against `db`.
fn verify_compare(servers: &str, db: &str, compare: &str) -> Vec<String> {
    let mut args = verify_args(servers, db);
    args.extend(["--compare".to_owned(), compare.to_owned()]);
    args
}

/// (h) and (e) as --compare auto chooses, paired round after round (`first` is round 1's
/// seconds of each): one pair alone says little on a machine whose speed drifts from minute
/// to minute. With a baseline binary, its verify too, each round, and the CPU of both.
pub fn by_hand_rounds(
    settings: &Settings,
    (servers, dir): (&str, &Path),
    backend: &str,
    db_d: &str,
    first: (f64, f64),
) {
    let auto = verify_compare(servers, db_d, "auto");
    let mut pairs = vec![first];
    let mut cpus = Vec::new();
    for round in 1..=settings.rounds {
        if let Some(baseline) = &settings.baseline {
            let ours = run_measured(&auto);
            let theirs = run_measured_with(baseline, &auto);
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
        let Some((h, _)) = by_hand(servers, &dir.join("d.db"), dir) else {
            break;
        };
        let v = run_measured(&auto);
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
