//! The CLI end to end: verdicts, exit codes and JUnit read back from the built binary.

use std::time::Duration;

use lessonprobe_testkit::*;

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
    let dir = Dir::new();
    let xml = dir.join("r/l30.xml");
    let ran = lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--junit"])
        .arg(&xml)
        .success();
    let closing = ran.stdout.lines().last().unwrap();
    assert!(
        closing.contains("0 failed, 0 errors, 1 skipped, 1 pending in ") && closing.ends_with('s'),
        "the counts and the wall time: {closing}"
    );

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
    let dir = Dir::new();
    let xml = dir.join("all.xml");
    lessonprobe().in_repo().arg("--junit").arg(&xml).success();
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
    let dir = Dir::new();
    let xml = dir.join("s.xml");
    let ran = lessonprobe()
        .in_repo()
        .args([
            "--lesson", "30", "--strict", "--select", "L30-10", "--junit",
        ])
        .arg(&xml)
        .failure();
    let closing = ran.stdout.lines().last().unwrap();
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
    let said = message(&suite.test_cases[0]);
    assert!(
        said.starts_with("PENDING under --strict: TICKETFLOW_REMOTE_TESTS is not set"),
        "{said:?}"
    );

    let doc = lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--strict", "--select", "L30-10"])
        .args(["--no-junit", "--format", "json"])
        .failure()
        .json();
    assert_eq!(
        (doc["succeeded"].as_bool(), doc["strict"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(doc["outcomes"][0]["verdict"], "PENDING");
}

#[test]
fn an_altered_expected_output_fails_with_a_diff() {
    let dir = Dir::new();
    copy_manifests(&dir);
    dir.edit(
        "checkpoints/30-replay-audit.toml",
        "expect = \"True False 1\"",
        "expect = \"True True 1\"",
    );
    let xml = dir.join("f.xml");
    dir.lessonprobe()
        .args(["--lesson", "30", "--junit"])
        .arg(&xml)
        .stdout_has("FAIL    ")
        .stdout_has("-True True 1")
        .stdout_has("+True False 1")
        .failure();
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
    let dir = Dir::new();
    copy_manifests(&dir);
    let text = dir.edit(
        "checkpoints/30-replay-audit.toml",
        "timeout = \"10s\"",
        "timeout = \"ten\"",
    );
    let line = line_of(&text, "timeout = \"10s\"");
    let xml = dir.join("never.xml");
    let ran = dir
        .lessonprobe()
        .arg("--junit")
        .arg(&xml)
        .stdout("")
        .stderr_has(format!(
            "30-replay-audit.toml:{line}:11: timeout \"ten\" is not a duration"
        ))
        .status(2);
    assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    assert!(!xml.exists());
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["--lesson", "30", "--select", "no-such-probe"],
        vec!["--lesson", "99"],
        vec!["--db", "oracle://x"],
        vec!["--timeout", "0s"],
        vec!["--jobs", "0"],
    ] {
        lessonprobe().args(args).stderr_lacks("panicked").status(2);
    }
    lessonprobe()
        .args(["--lesson", "30", "--select", "nope"])
        .stderr_has("--select \"nope\" matches no probe of lesson 30")
        .status(2);
}

#[test]
fn select_and_json_format_report_the_chosen_probes() {
    let dir = Dir::new();
    let doc = lessonprobe()
        .in_repo()
        .args([
            "--lesson",
            "30",
            "--select",
            "sql-audit",
            "--select",
            "EX-30-*",
        ])
        .args(["--format", "json", "--junit"])
        .arg(dir.join("j.xml"))
        .success()
        .json();
    assert_eq!(outcome_ids(&doc), vec!["EX-30-01", "L30-01", "EX-30-02"]);
    assert_eq!(doc["counts"]["passed"], 3);
    assert_eq!(doc["outcomes"][2]["verdict"], "PASS");
}

#[test]
fn a_command_past_its_deadline_is_error_and_its_process_group_is_gone() {
    let sleeper = Probe::script("sleeper", "sleep 60 & echo $! > grandchild.pid; sleep 60")
        .name("sleeps-past-deadline")
        .claim("a probe that outlives its deadline is killed with its whole process group")
        .timeout("1s");
    let dir = Manifest::lesson(77, "deadlines")
        .probe(sleeper)
        .in_new_dir("77-deadline.toml");
    dir.lessonprobe()
        .args(["--lesson", "77"])
        .within(Duration::from_secs(20))
        .stdout_has("ERROR")
        .stdout_has("deadline of 1s exceeded; process group killed")
        .failure();
    assert!(
        process::process_gone(&dir.join("grandchild.pid")),
        "the grandchild outlived its probe"
    );
    let report = parse_junit(&dir.join("reports/lesson-77.xml"));
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
    lessonprobe()
        .in_repo()
        .args(["list", "--lesson", "29"])
        .stdout_has("EX-29-01")
        .stdout_has("EX-29-02")
        .stdout_has("sqlite, postgres, kafka")
        .success();
}

#[test]
fn unreadable_inputs_and_unwritable_reports_exit_3_naming_the_path() {
    let dir = Dir::new();
    let missing = dir.join("no-such-folder");
    dir.lessonprobe()
        .arg("--checkpoints")
        .arg(&missing)
        .stderr_has(missing.display().to_string())
        .stderr_has("cannot read checkpoint folder")
        .status(3);

    let blocker = dir.write("file", "");
    let report = blocker.join("r.xml"); // a folder that is a file
    lessonprobe()
        .in_repo()
        .args(["--lesson", "29", "--select", "EX-29-01", "--junit"])
        .arg(&report)
        .stderr_has(blocker.display().to_string())
        .status(3);

    lessonprobe()
        .in_repo()
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .args(["--lesson", "30", "--select", "L30-10", "--hosts"])
        .arg(&missing)
        .status(3);
}

#[test]
fn ansi_escapes_and_control_characters_are_stripped_from_junit_output() {
    let noisy = Probe::command("noisy", ["printf", r"\033[31mred\033[0m\001\002 done\n"])
        .name("prints-escapes")
        .claim("terminal escapes and control characters never reach the JUnit report");
    let dir = Manifest::lesson(78, "noisy output")
        .probe(noisy)
        .in_new_dir("78-noisy.toml");
    dir.lessonprobe().args(["--lesson", "78"]).success();
    let xml_path = dir.join("reports/lesson-78.xml");
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
    lessonprobe()
        .in_repo()
        .args(["--lesson", "29", "--verbose", "--no-junit"])
        .stdout_has("claim: A store whose apply_once raises")
        .stdout_has("answer key: Both carry the key tenant_id:ticket_id")
        // No colour when stdout is not a terminal.
        .stdout_lacks("\u{1b}")
        .success();
}

#[test]
fn a_terminal_gets_a_status_line_of_running_cases_and_a_pipe_does_not() {
    if !tool("script") {
        return;
    }
    let napper = Probe::command("napper", ["sleep", "1"])
        .name("sleeps-a-second")
        .claim("a case that runs a while is named on the status line while it runs");
    let dir = Manifest::lesson(79, "status line")
        .probe(napper)
        .in_new_dir("79-status.toml");

    on_a_terminal("--lesson 79 --no-junit")
        .current_dir(&dir)
        .stdout_has("0/1 running: napper sleeps-a-second")
        // Colour on a terminal.
        .stdout_has("\u{1b}[32mPASS")
        .stdout_has("1 passed, 0 failed")
        .success();

    on_a_terminal("--lesson 79 --no-junit")
        .current_dir(&dir)
        .env("NO_COLOR", "1")
        .stdout_has("running: napper sleeps-a-second")
        // No colour with NO_COLOR.
        .stdout_lacks("\u{1b}[32m")
        .stdout_has("PASS    [")
        .success();

    let piped = dir
        .lessonprobe()
        .args(["--lesson", "79", "--no-junit"])
        .stdout_lacks("running:")
        .stdout_lacks("\u{1b}")
        .success();
    assert_eq!(
        piped.stdout.lines().count(),
        2,
        "a line for the case and the counts: {:?}",
        piped.stdout
    );
}
