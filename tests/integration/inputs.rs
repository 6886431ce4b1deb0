//! Inputs the runner refuses or handles, against the built binary: the same probe id in two
//! lessons, a fixed run id run twice, logs that are not a terminal, editor leftovers and bytes
//! that are not UTF-8 in the manifest folder, very large manifests, and what `list` shows.

use std::time::Duration;

use lessonprobe_testkit::*;

/// The repository's manifests plus a copy of lesson 30's as lesson 31, in `dir/checkpoints`.
fn with_lesson_31(dir: &Dir) {
    copy_manifests(dir);
    let text = dir.read("checkpoints/30-replay-audit.toml");
    dir.write(
        "checkpoints/31-replay-copy.toml",
        text.replace("lesson = 30", "lesson = 31"),
    );
}

#[test]
fn the_same_probe_id_in_two_lessons_shares_no_database_or_schema() {
    let dir = Dir::new();
    with_lesson_31(&dir);
    let db = dir.join("dbs");
    let mut dbs = vec![format!("sqlite:{}", db.display())];
    if let Some(url) = services::postgres() {
        dbs.push(url);
    }
    for target in &dbs {
        dir.lessonprobe()
            .args(["--jobs", "4", "--run-id", "twins", "--no-junit"])
            .arg(format!("--db={target}"))
            .stdout_has("lesson 31 EX-30-01")
            .stdout_lacks("FAIL")
            .success();
    }
    for lesson in [30, 31] {
        let file = db.join(format!("lp-twins.{lesson}.ex-30-01-sqlite.db"));
        assert_eq!(
            sqlite::count(&file, "SELECT COUNT(*) FROM audit_events"),
            1,
            "{}",
            file.display()
        );
    }
}

#[test]
fn a_fixed_run_id_with_a_sqlite_folder_starts_from_fresh_files() {
    let dir = Dir::new();
    for attempt in 1..=2 {
        eprintln!("run {attempt}");
        lessonprobe()
            .in_repo()
            .args([
                "--lesson", "30", "--select", "EX-30-01", "--select", "L30-01",
            ])
            .args(["--run-id", "fixed", "--no-junit"])
            .arg(format!("--db=sqlite:{}", dir.display()))
            .success();
    }
}

/// `lessonprobe` with the embedded Kafka client logging at trace level, JSON on stdout (no
/// status line), on a terminal: what the terminal showed.
fn logging_on_a_terminal() -> Test {
    on_a_terminal("--lesson 30 --select EX-30-02 --no-junit --format json")
        .in_repo()
        .env("RUST_LOG", "rdkafka=trace")
}

#[test]
fn logs_are_coloured_only_on_a_terminal_and_never_with_no_color() {
    let ran = lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--select", "EX-30-02", "--no-junit"])
        .env("RUST_LOG", "rdkafka=trace")
        // No colour in a pipe.
        .stderr_lacks("\u{1b}")
        .success();
    assert!(ran.stderr.lines().count() > 10, "{}", ran.stderr);

    if !tool("script") {
        return;
    }
    logging_on_a_terminal()
        .stdout_has("TRACE")
        .stdout_has("\u{1b}")
        .success();
    logging_on_a_terminal()
        .env("NO_COLOR", "1")
        .stdout_has("TRACE")
        .stdout_lacks("\u{1b}")
        .success();
}

#[test]
fn lock_files_hidden_files_dead_links_and_other_files_in_the_manifest_folder_are_ignored() {
    let dir = Dir::new();
    let manifests = copy_manifests(&dir);
    std::os::unix::fs::symlink(
        "someone@host.1234:1700000000",
        manifests.join(".#30-replay-audit.toml"),
    )
    .unwrap();
    std::os::unix::fs::symlink("gone.toml", manifests.join("32-dead-link.toml")).unwrap();
    dir.write("checkpoints/.hidden.toml", "not = [a manifest");
    dir.write("checkpoints/README.md", "# notes");
    dir.write("checkpoints/30-replay-audit.toml~", "backup");
    dir.lessonprobe()
        .arg("list")
        .stdout_has("lesson 29: ")
        .stdout_has("lesson 30: ")
        .stderr_has("32-dead-link.toml: a link that leads nowhere")
        .success();
}

#[test]
fn a_manifest_that_is_not_utf8_names_the_line_and_column_of_the_byte() {
    let dir = Dir::new();
    copy_manifests(&dir);
    dir.write(
        "checkpoints/31-latin1.toml",
        b"[checkpoint]\nlesson = 31\ntitle = \"caf\xe9\"\n",
    );
    dir.lessonprobe()
        .arg("list")
        .stderr_has("31-latin1.toml:3:13: not valid UTF-8 (byte 0xe9 at offset 37)")
        .status(2);
}

#[test]
fn a_manifest_of_20000_probes_lists_in_under_a_second() {
    let dir = Dir::new();
    dir.write("checkpoints/40-large.toml", large_manifest(20_000));
    // The processor time of the process itself, which other work on a shared machine does not
    // stretch as it does wall time (benches/catalog.rs measures wall time, 0.7 s for 20,000
    // probes on a loaded 2-core machine), where the quadratic load took 12 s.
    let ran = dir.lessonprobe().arg("list").success();
    assert_eq!(ran.stdout_lines_starting("  P-"), 20_000);
    assert!(
        ran.cpu < Duration::from_secs(1),
        "took {:?} of processor time",
        ran.cpu
    );
}

/// `lessonprobe list` with its standard output given as `stdout`: its exit code and stderr.
fn list_into(stdout: std::process::Stdio, close_the_pipe: bool) -> (Option<i32>, String) {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(bin())
        .current_dir(repo())
        .args(["list", "--format", "json"])
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if close_the_pipe {
        drop(child.stdout.take());
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (child.wait().unwrap().code(), stderr)
}

/// `lessonprobe list | head -1`: the reader gone is no error (the listing ended with a panic,
/// exit 101); a listing that cannot be written (a full disk) is one, exit 3, naming why.
#[test]
fn a_listing_nobody_reads_ends_quietly_and_one_that_cannot_be_written_exits_3() {
    let (code, stderr) = list_into(std::process::Stdio::piped(), true);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (code, stderr) = list_into(full.into(), false);
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        stderr,
        "lessonprobe: standard output: No space left on device (os error 28)\n"
    );
}

#[test]
fn list_shows_each_probes_claim_kind_builtin_and_expected_output_and_writes_json() {
    let mut list = lessonprobe().in_repo().args(["list", "--lesson", "30"]);
    for line in [
        "  EX-30-01 audit-sql-duplicate-probe",
        "      builtin apply_once_twice on sqlite, postgres (checkpoints/30-replay-audit.toml:",
        "      claim:  In-memory SQLite: apply_once() of the same event twice returns True, False and audit_events has one row.",
        "      expect: True False 1",
        "      remote tests/integration/test_kafka_remote.py::test_bounded_replay_preserves_live_offsets_and_business_effect_counts (",
    ] {
        list = list.stdout_has(line);
    }
    list.success();

    let doc = lessonprobe()
        .in_repo()
        .args(["list", "--lesson", "30", "--format", "json"])
        .success()
        .json();
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
