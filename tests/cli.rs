//! The CLI end to end: verdicts, exit codes and JUnit read back from the built binary.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn schema_copies_match_the_shared_contracts() {
    for schema in ["junit-10.xsd", "junit-10-xunit1.xsd"] {
        let shared = repo().join("../shared/schemas").join(schema);
        if shared.exists() {
            assert_eq!(
                std::fs::read_to_string(&shared).unwrap(),
                std::fs::read_to_string(repo().join("tests/schemas").join(schema)).unwrap(),
                "tests/schemas/{schema} differs from ../shared/schemas/{schema}"
            );
        }
    }
}

#[test]
fn lesson_30_passes_locally_and_its_junit_validates_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = lessonprobe(&repo())
        .args(["--lesson", "30", "--junit"])
        .arg(dir.path().join("r/l30.xml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let closing = stdout.lines().last().unwrap();
    assert!(
        closing.contains("0 failed, 0 errors, 1 skipped, 1 pending in ") && closing.ends_with('s'),
        "the counts and the wall time: {closing}"
    );

    let xml = dir.path().join("r/l30.xml");
    validate_junit(&xml);
    let report = parse_junit(&xml);
    assert_eq!(report.test_suites.len(), 1);
    let suite = &report.test_suites[0];
    let cases = verdicts(&report);
    assert_eq!(suite.tests, cases.len());
    let count = |v: &str| cases.iter().filter(|(_, x)| x == v).count();
    assert_eq!(count("SKIP") + count("PENDING"), suite.skipped);
    assert_eq!(count("FAIL") + count("ERROR"), 0, "{cases:?}");
    assert!(cases.contains(&(
        "L30-10 remote-bounded-replay-preserves-live-offsets".into(),
        "PENDING".into()
    )));
    assert!(cases.contains(&(
        "EX-30-02 earliest-does-not-rewind [sqlite]".into(),
        "PASS".into()
    )));
    assert!(cases.contains(&(
        "L30-12 bounded-replay-preserves-live-offsets-and-business-effect-counts [sqlite]".into(),
        "PASS".into()
    )));
    assert!(
        cases
            .iter()
            .any(|(n, v)| n.starts_with("L30-11") && v == "SKIP"),
        "{cases:?}"
    );
    assert!(cases.contains(&(
        "EX-30-01 audit-sql-duplicate-probe [sqlite]".into(),
        "PASS".into()
    )));
    for case in &suite.test_cases {
        assert!(case.time.is_some() && case.classname.is_some(), "{case:?}");
    }
    assert!(suite.timestamp.is_some() && suite.extra.contains_key("hostname"));
    assert_eq!(
        suite.extra.get("file").map(|f| f.as_str()),
        Some("checkpoints/30-replay-audit.toml"),
        "the suite names its manifest"
    );
    assert!(
        suite
            .test_cases
            .iter()
            .all(|c| !c.extra.contains_key("file")),
        "xunit2 cases carry no file"
    );
    let sql = suite
        .test_cases
        .iter()
        .find(|c| c.name.starts_with("L30-01"))
        .unwrap();
    assert_eq!(
        sql.system_out.as_deref(),
        Some("audit rows=1; offsets=42,43")
    );
}

#[test]
fn every_checkpoint_runs_when_no_lesson_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("all.xml");
    let out = lessonprobe(&repo())
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let names: Vec<&str> = report.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names[0].starts_with("lesson 29") && names[1].starts_with("lesson 30"),
        "{names:?}"
    );
    assert!(verdicts(&report).contains(&(
        "EX-29-01 failure-leaves-offset-uncommitted".into(),
        "PASS".into()
    )));
}

#[test]
fn strict_turns_pending_into_exit_1_and_a_failure_in_every_report() {
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("s.xml");
    let out = lessonprobe(&repo())
        .args([
            "--lesson", "30", "--strict", "--select", "L30-10", "--junit",
        ])
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let closing = stdout.lines().last().unwrap();
    assert!(
        closing.contains("1 pending in ") && closing.ends_with("; PENDING under --strict: L30-10"),
        "the closing line says why the run failed: {closing}"
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    assert_eq!(
        verdicts(&report),
        vec![(
            "L30-10 remote-bounded-replay-preserves-live-offsets".to_owned(),
            "FAIL".to_owned()
        )]
    );
    let suite = &report.test_suites[0];
    assert_eq!((suite.failures, suite.errors, suite.skipped), (1, 0, 0));
    match &suite.test_cases[0].status {
        quick_junit::TestCaseStatus::NonSuccess { message, .. } => assert!(
            message
                .as_deref()
                .unwrap_or("")
                .starts_with("PENDING under --strict: TICKETFLOW_REMOTE_TESTS is not set"),
            "{message:?}"
        ),
        other => panic!("{other:?}"),
    }

    let json = lessonprobe(&repo())
        .args([
            "--lesson",
            "30",
            "--strict",
            "--select",
            "L30-10",
            "--no-junit",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        (doc["succeeded"].as_bool(), doc["strict"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(doc["outcomes"][0]["verdict"], "PENDING");
}

#[test]
fn an_altered_expected_output_fails_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = copy_manifests(dir.path());
    let path = manifests.join("30-replay-audit.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("expect = \"True False 1\"", "expect = \"True True 1\""),
    )
    .unwrap();
    let xml = dir.path().join("f.xml");
    let out = lessonprobe(dir.path())
        .args(["--lesson", "30", "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL    ")
            && stdout.contains("-True True 1")
            && stdout.contains("+True False 1"),
        "{stdout}"
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let failed = report.test_suites[0]
        .test_cases
        .iter()
        .find(|c| c.name.starts_with("EX-30-01"))
        .unwrap();
    match &failed.status {
        quick_junit::TestCaseStatus::NonSuccess {
            kind: quick_junit::NonSuccessKind::Failure,
            description,
            ..
        } => {
            assert!(description
                .as_deref()
                .unwrap_or("")
                .contains("+True False 1"));
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(report.test_suites[0].failures, 1);
}

#[test]
fn a_malformed_manifest_exits_2_naming_file_and_line_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = copy_manifests(dir.path());
    let path = manifests.join("30-replay-audit.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("timeout = \"10s\"", "timeout = \"ten\"", 1),
    )
    .unwrap();
    let line = text.lines().position(|l| l == "timeout = \"10s\"").unwrap() + 1;
    let xml = dir.path().join("never.xml");
    let out = lessonprobe(dir.path())
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "30-replay-audit.toml:{line}:11: timeout \"ten\" is not a duration"
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty() && !xml.exists());
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["--lesson", "30", "--select", "no-such-probe"],
        vec!["--lesson", "99"],
        vec!["--db", "oracle://x"],
        vec!["--timeout", "0s"],
        vec!["--jobs", "0"],
    ] {
        let out = lessonprobe(dir.path()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = lessonprobe(dir.path())
        .args(["--lesson", "30", "--select", "nope"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--select \"nope\" matches no probe of lesson 30"));
}

#[test]
fn select_and_json_format_report_the_chosen_probes() {
    let dir = tempfile::tempdir().unwrap();
    let out = lessonprobe(&repo())
        .args([
            "--lesson",
            "30",
            "--select",
            "sql-audit",
            "--select",
            "EX-30-*",
            "--format",
            "json",
            "--junit",
        ])
        .arg(dir.path().join("j.xml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let ids: Vec<&str> = doc["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["EX-30-01", "L30-01", "EX-30-02"]);
    assert_eq!(doc["counts"]["passed"], 3);
    assert_eq!(doc["outcomes"][2]["verdict"], "PASS");
}

const SLEEPER: &str = r#"[checkpoint]
lesson = 77
title = "deadlines"

[[probe]]
id = "sleeper"
name = "sleeps-past-deadline"
claim = "a probe that outlives its deadline is killed with its whole process group"
kind = "command"
argv = ["sh", "-c", "sleep 60 & echo $! > grandchild.pid; sleep 60"]
timeout = 1
"#;

#[test]
fn a_command_past_its_deadline_is_error_and_its_process_group_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    std::fs::write(dir.path().join("checkpoints/77-deadline.toml"), SLEEPER).unwrap();
    let started = Instant::now();
    let out = lessonprobe(dir.path())
        .args(["--lesson", "77"])
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("ERROR")
            && stdout.contains("deadline of 1s exceeded; process group killed"),
        "{stdout}"
    );
    assert!(
        process_gone(&dir.path().join("grandchild.pid")),
        "the grandchild outlived its probe"
    );
    let report = parse_junit(&dir.path().join("reports/lesson-77.xml"));
    assert_eq!(
        verdicts(&report),
        vec![(
            "sleeper sleeps-past-deadline".to_owned(),
            "ERROR".to_owned()
        )]
    );
}

#[test]
fn list_shows_every_probe_with_kind() {
    let out = lessonprobe(&repo())
        .args(["list", "--lesson", "29"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout.contains("EX-29-01")
            && stdout.contains("EX-29-02")
            && stdout.contains("sqlite, postgres, kafka"),
        "{stdout}"
    );
}

#[test]
fn unreadable_inputs_and_unwritable_reports_exit_3_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder");
    let out = lessonprobe(dir.path())
        .arg("--checkpoints")
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&missing.display().to_string())
            && stderr.contains("cannot read checkpoint folder"),
        "{stderr}"
    );

    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let report = blocker.join("r.xml"); // a folder that is a file
    let out = lessonprobe(&repo())
        .args(["--lesson", "29", "--select", "EX-29-01", "--junit"])
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&blocker.display().to_string()), "{stderr}");

    let out = lessonprobe(&repo())
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .args(["--lesson", "30", "--select", "L30-10", "--hosts"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const NOISY: &str = r#"[checkpoint]
lesson = 78
title = "noisy output"

[[probe]]
id = "noisy"
name = "prints-escapes"
claim = "terminal escapes and control characters never reach the JUnit report"
kind = "command"
argv = ["printf", "\\033[31mred\\033[0m\\001\\002 done\\n"]
"#;

#[test]
fn ansi_escapes_and_control_characters_are_stripped_from_junit_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    std::fs::write(dir.path().join("checkpoints/78-noisy.toml"), NOISY).unwrap();
    let out = lessonprobe(dir.path())
        .args(["--lesson", "78"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let xml_path = dir.path().join("reports/lesson-78.xml");
    validate_junit(&xml_path);
    let xml = std::fs::read_to_string(&xml_path).unwrap();
    assert!(
        !xml.contains('\u{1b}') && !xml.contains('\u{1}') && !xml.contains("&#"),
        "{xml}"
    );
    let report = parse_junit(&xml_path);
    assert_eq!(
        report.test_suites[0].test_cases[0].system_out.as_deref(),
        Some("red done")
    );
}

#[test]
fn verbose_shows_claims_and_answer_keys() {
    let out = lessonprobe(&repo())
        .args(["--lesson", "29", "--verbose", "--no-junit"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("claim: A store whose apply_once raises"),
        "{stdout}"
    );
    assert!(
        stdout.contains("answer key: Both carry the key tenant_id:ticket_id"),
        "{stdout}"
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no colour when stdout is not a terminal"
    );
}

const NAPPER: &str = r#"[checkpoint]
lesson = 79
title = "status line"

[[probe]]
id = "napper"
name = "sleeps-a-second"
claim = "a case that runs a while is named on the status line while it runs"
kind = "command"
argv = ["sleep", "1"]
"#;

#[test]
fn a_terminal_gets_a_status_line_of_running_cases_and_a_pipe_does_not() {
    if !tool("script") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
    std::fs::write(dir.path().join("checkpoints/79-status.toml"), NAPPER).unwrap();

    let tty = on_a_terminal(dir.path(), "--lesson 79 --no-junit", &[], false);
    assert!(
        tty.contains("0/1 running: napper sleeps-a-second"),
        "{tty:?}"
    );
    assert!(
        tty.contains("\u{1b}[32mPASS"),
        "colour on a terminal: {tty:?}"
    );
    assert!(tty.contains("1 passed, 0 failed"), "{tty:?}");

    let no_color = on_a_terminal(dir.path(), "--lesson 79 --no-junit", &[], true);
    assert!(
        no_color.contains("running: napper sleeps-a-second"),
        "{no_color:?}"
    );
    assert!(
        !no_color.contains("\u{1b}[32m") && no_color.contains("PASS    ["),
        "no colour with NO_COLOR: {no_color:?}"
    );

    let piped = lessonprobe(dir.path())
        .args(["--lesson", "79", "--no-junit"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&piped.stdout);
    assert!(
        !stdout.contains("running:") && !stdout.contains('\u{1b}'),
        "{stdout:?}"
    );
    assert_eq!(
        stdout.lines().count(),
        2,
        "a line for the case and the counts: {stdout:?}"
    );
}
