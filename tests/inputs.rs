//! Inputs the runner refuses or handles, against the built binary: the same probe id in two
//! lessons, a fixed run id run twice, logs that are not a terminal, editor leftovers and bytes
//! that are not UTF-8 in the manifest folder, very large manifests, and what `list` shows.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// The repository's manifests plus a copy of lesson 30's as lesson 31, in `dir/checkpoints`.
fn with_lesson_31(dir: &Path) {
    let manifests = copy_manifests(dir);
    let text = std::fs::read_to_string(manifests.join("30-replay-audit.toml")).unwrap();
    std::fs::write(
        manifests.join("31-replay-copy.toml"),
        text.replace("lesson = 30", "lesson = 31"),
    )
    .unwrap();
}

#[test]
fn the_same_probe_id_in_two_lessons_shares_no_database_or_schema() {
    let dir = tempfile::tempdir().unwrap();
    with_lesson_31(dir.path());
    let db = dir.path().join("dbs");
    let mut dbs = vec![format!("sqlite:{}", db.display())];
    if let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") {
        dbs.push(url);
    }
    for target in &dbs {
        let out = lessonprobe(dir.path())
            .args(["--jobs", "4", "--run-id", "twins", "--no-junit"])
            .arg(format!("--db={target}"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "--db {target}: {stdout}");
        assert!(
            stdout.contains("lesson 31 EX-30-01") && !stdout.contains("FAIL"),
            "{stdout}"
        );
    }
    for lesson in [30, 31] {
        let file = db.join(format!("lp-twins.{lesson}.ex-30-01-sqlite.db"));
        let conn = rusqlite::Connection::open(&file).unwrap();
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM audit_events", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1, "{}", file.display());
    }
}

#[test]
fn a_fixed_run_id_with_a_sqlite_folder_starts_from_fresh_files() {
    let dir = tempfile::tempdir().unwrap();
    for attempt in 1..=2 {
        let out = lessonprobe(&repo())
            .args([
                "--lesson", "30", "--select", "EX-30-01", "--select", "L30-01",
            ])
            .args(["--run-id", "fixed", "--no-junit"])
            .arg(format!("--db=sqlite:{}", dir.path().display()))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "run {attempt}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// `lessonprobe` with the embedded Kafka client logging at trace level, JSON on stdout (no
/// status line), on a terminal.
fn logging_on_a_terminal(no_color: bool) -> String {
    on_a_terminal(
        &repo(),
        "--lesson 30 --select EX-30-02 --no-junit --format json",
        &[("RUST_LOG", "rdkafka=trace")],
        no_color,
    )
}

#[test]
fn logs_are_coloured_only_on_a_terminal_and_never_with_no_color() {
    let out = lessonprobe(&repo())
        .args(["--lesson", "30", "--select", "EX-30-02", "--no-junit"])
        .env("RUST_LOG", "rdkafka=trace")
        .output()
        .unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.lines().count() > 10, "{logs}");
    assert!(!logs.contains('\u{1b}'), "no colour in a pipe: {logs}");

    if !tool("script") {
        return;
    }
    let coloured = logging_on_a_terminal(false);
    assert!(
        coloured.contains("TRACE") && coloured.contains('\u{1b}'),
        "{coloured}"
    );
    let plain = logging_on_a_terminal(true);
    assert!(
        plain.contains("TRACE") && !plain.contains('\u{1b}'),
        "{plain}"
    );
}

#[test]
fn lock_files_hidden_files_dead_links_and_other_files_in_the_manifest_folder_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = copy_manifests(dir.path());
    std::os::unix::fs::symlink(
        "someone@host.1234:1700000000",
        manifests.join(".#30-replay-audit.toml"),
    )
    .unwrap();
    std::os::unix::fs::symlink("gone.toml", manifests.join("32-dead-link.toml")).unwrap();
    std::fs::write(manifests.join(".hidden.toml"), "not = [a manifest").unwrap();
    std::fs::write(manifests.join("README.md"), "# notes").unwrap();
    std::fs::write(manifests.join("30-replay-audit.toml~"), "backup").unwrap();
    let out = lessonprobe(dir.path()).arg("list").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("lesson 29: ") && stdout.contains("lesson 30: "),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("32-dead-link.toml: a link that leads nowhere"),
        "{stderr}"
    );
}

#[test]
fn a_manifest_that_is_not_utf8_names_the_line_and_column_of_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = copy_manifests(dir.path());
    std::fs::write(
        manifests.join("31-latin1.toml"),
        b"[checkpoint]\nlesson = 31\ntitle = \"caf\xe9\"\n",
    )
    .unwrap();
    let out = lessonprobe(dir.path()).arg("list").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("31-latin1.toml:3:13: not valid UTF-8 (byte 0xe9 at offset 37)"),
        "{stderr}"
    );
}

/// A manifest of lesson 40 with `n` command probes.
fn large_manifest(n: usize) -> String {
    let mut text = String::from("[checkpoint]\nlesson = 40\ntitle = \"large\"\n");
    for i in 0..n {
        text.push_str(&format!(
            "\n[[probe]]\nid = \"P-{i:05}\"\nname = \"probe-{i}\"\nclaim = \"claim {i}\"\nkind = \"command\"\nargv = [\"echo\", \"{i}\"]\nexpect = \"{i}\"\ntimeout = \"5s\"\n"
        ));
    }
    text
}

#[test]
fn a_manifest_of_20000_probes_lists_in_under_a_second() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    std::fs::write(
        dir.path().join("checkpoints/40-large.toml"),
        large_manifest(20_000),
    )
    .unwrap();
    // The processor time of the process itself, which other work on a shared machine does not
    // stretch as it does wall time (benches/catalog.rs measures wall time, 0.7 s for 20,000
    // probes on a loaded 2-core machine), where the quadratic load took 12 s.
    let mut child = lessonprobe(dir.path())
        .arg("list")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let (status, cpu) = wait_with_cpu_time(&child);
    assert_eq!(status, 0);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("  P-")).count(),
        20_000
    );
    assert!(
        cpu < Duration::from_secs(1),
        "took {cpu:?} of processor time"
    );
}

/// Waits for `child`: its exit code and the user and system time it used.
fn wait_with_cpu_time(child: &std::process::Child) -> (i32, Duration) {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into the two locals above.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    (
        libc::WEXITSTATUS(status),
        time(usage.ru_utime) + time(usage.ru_stime),
    )
}

#[test]
fn list_shows_each_probes_claim_kind_builtin_and_expected_output_and_writes_json() {
    let out = lessonprobe(&repo())
        .args(["list", "--lesson", "30"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for line in [
        "  EX-30-01 audit-sql-duplicate-probe",
        "      builtin apply_once_twice on sqlite, postgres (checkpoints/30-replay-audit.toml:",
        "      claim:  In-memory SQLite: apply_once() of the same event twice returns True, False and audit_events has one row.",
        "      expect: True False 1",
        "      remote tests/integration/test_kafka_remote.py::test_bounded_replay_preserves_live_offsets_and_business_effect_counts (",
    ] {
        assert!(stdout.contains(line), "{line:?} in {stdout}");
    }

    let json = lessonprobe(&repo())
        .args(["list", "--lesson", "30", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let checkpoint = &doc["checkpoints"][0];
    assert_eq!(checkpoint["lesson"], 30);
    let probe = checkpoint["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "EX-30-01")
        .unwrap();
    assert_eq!(probe["kind"], "builtin");
    assert_eq!(probe["builtin"], "apply_once_twice");
    assert_eq!(probe["expect"], "True False 1");
    assert_eq!(probe["runs_on"], serde_json::json!(["sqlite", "postgres"]));
    assert_eq!(probe["file"], "checkpoints/30-replay-audit.toml");
    assert!(probe["claim"]
        .as_str()
        .unwrap()
        .starts_with("In-memory SQLite"));
}
