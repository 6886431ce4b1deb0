//! SIGTERM and Ctrl-C in the middle of a run, against a real PostgreSQL and real process
//! groups: nothing is left running, no schema of the run stays, the report is the interrupted
//! run's (never an earlier one's), and a rerun with the same id works.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::process::group_gone;
use lessonprobe_testkit::*;

/// The repository's manifests in `dir`, lesson 30 with the sleeper as its first probe, so it
/// runs beside the SQL probes rather than after them.
fn manifests_with_sleeper(dir: &Path) -> PathBuf {
    let manifests = copy_manifests(dir);
    let path = manifests.join("30-replay-audit.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    // A command probe that records its process group and sleeps far past any test.
    let sleeper = Probe::script("L30-SLEEP", "echo $$ > sleeper.pid; sleep 87")
        .name("sleeps")
        .claim("a command that runs until it is stopped")
        .timeout("120s");
    let first = text.find("[[probe]]").unwrap();
    std::fs::write(
        &path,
        format!("{}{sleeper}\n{}", &text[..first], &text[first..]),
    )
    .unwrap();
    manifests
}

/// Schemas whose name carries the key of a case of run `run`.
fn schemas_of(url: &str, run: &str) -> Vec<String> {
    let mut client = postgres::connect(url);
    let pattern = format!("lp\\_%\\_lp\\_{}\\_%", run.replace('-', "\\_"));
    client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1",
            &[&pattern],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Interrupts lesson 30 on PostgreSQL with `sig` while the sleeper and the SQL probes run, and
/// checks what the run leaves: exit `code`, no process, no schema, an interrupted report; then
/// a rerun with the same id.
fn interrupted_by(sig: i32, name: &str, code: i32, run: &str) {
    let Some(url) = services::postgres() else {
        return;
    };
    let dir = Dir::new();
    manifests_with_sleeper(&dir);
    let xml = dir.write("reports/l30.xml", "<stale/>");
    let mut running = dir
        .lessonprobe()
        .args([
            "--lesson", "30", "--jobs", "2", "--db", &url, "--run-id", run,
        ])
        .arg("--junit")
        .arg(&xml)
        .spawn();
    let pid_file = dir.join("sleeper.pid");
    wait_for(&pid_file, Duration::from_secs(60));
    let pgid: i32 = dir.read("sleeper.pid").trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    running.signal(sig);
    let ran = running.within(Duration::from_secs(30)).status(code);

    assert!(
        group_gone(pgid),
        "the sleeper's process group outlived the run"
    );
    assert_eq!(
        schemas_of(&url, run),
        Vec::<String>::new(),
        "{}",
        ran.stderr
    );

    let closing = ran.stdout.lines().last().unwrap_or_default();
    assert!(
        closing.contains(&format!("; interrupted ({name})")) && closing.contains("L30-SLEEP"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(&format!("INTERRUPTED ({name})")),
        "{}",
        ran.stdout
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let cases = verdicts(&report);
    assert!(
        cases.len() > 10,
        "every planned case is in the report: {cases:?}"
    );
    let messages: Vec<(String, String)> = report.test_suites[0]
        .test_cases
        .iter()
        .filter_map(|c| match &c.status {
            quick_junit::TestCaseStatus::NonSuccess { message, .. } => Some((
                c.name.to_string(),
                message.as_deref().unwrap_or("").to_owned(),
            )),
            _ => None,
        })
        .collect();
    assert!(
        messages.contains(&(
            "L30-SLEEP sleeps".to_owned(),
            format!("interrupted ({name}) while it ran")
        )),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|(_, m)| m.starts_with(&format!("interrupted ({name})"))),
        "only interrupted cases fail: {messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|(_, m)| m.ends_with("before it started")),
        "some cases never started: {messages:?}"
    );

    // A rerun with the same id.
    dir.lessonprobe()
        .args(["--lesson", "30", "--select", "EX-30-01"])
        .args(["--select", "L30-0*", "--select", "L30-1*"])
        .args(["--db", &url, "--run-id", run, "--no-junit"])
        .success();
    assert_eq!(schemas_of(&url, run), Vec::<String>::new());
}

#[test]
fn sigterm_mid_run_stops_everything_and_writes_an_interrupted_report() {
    interrupted_by(libc::SIGTERM, "SIGTERM", 143, "it-term");
}

#[test]
fn ctrl_c_mid_run_stops_everything_and_writes_an_interrupted_report() {
    interrupted_by(libc::SIGINT, "SIGINT", 130, "it-int");
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    // A server that accepts connections and never answers holds a SQL probe in its connect,
    // so the first Ctrl-C has a probe to wait for.
    let silent = SilentListener::start();
    let mut running = lessonprobe()
        .args(["--lesson", "30", "--select", "L30-01", "--no-junit", "--db"])
        .arg(format!("postgres://nobody@127.0.0.1:{}/audit", silent.port))
        .stderr_has("interrupted again: exiting now")
        .spawn();
    silent.wait_for_connection(Duration::from_secs(30));
    running.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(2)).status(130);
}
