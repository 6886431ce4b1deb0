//! Reports that agree with the exit code, read back from the built binary: a failing command's
//! output in every format, a report path checked before anything runs, a closing line that
//! says what failed and how long it took, and the exit codes in `--help`.

mod common;

use std::path::Path;

use common::*;

/// Lesson 91: a command that prints and fails, one that outlives its deadline, one that passes.
const FAILING: &str = r#"
[checkpoint]
lesson = 91
title = "failing commands"

[[probe]]
id = "R-FAIL"
name = "prints-then-fails"
claim = "c"
kind = "command"
argv = ["sh", "-c", "touch ran; echo out-line-1; echo out-line-2; echo err-line-1 >&2; echo err-line-2 >&2; exit 4"]
expect = "never"

[[probe]]
id = "R-SLOW"
name = "outlives-its-deadline"
claim = "c"
kind = "command"
argv = ["sh", "-c", "echo started; sleep 30"]
timeout = "1s"

[[probe]]
id = "R-PASS"
name = "passes"
claim = "c"
kind = "command"
argv = ["echo", "ok"]
expect = "ok"
"#;

fn course(dir: &Path) {
    std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
    std::fs::write(dir.join("checkpoints/91-failing.toml"), FAILING).unwrap();
}

#[test]
fn a_failing_command_keeps_its_stdout_and_stderr_in_every_report() {
    let dir = tempfile::tempdir().unwrap();
    course(dir.path());
    let xml = dir.path().join("r.xml");
    let out = lessonprobe(dir.path())
        .args([
            "--lesson",
            "91",
            "--select",
            "R-FAIL",
            "--verbose",
            "--junit",
        ])
        .arg(&xml)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("exited with status 4; stderr: err-line-1 | err-line-2"),
        "{stdout}"
    );
    for line in [
        "| out-line-1",
        "| out-line-2",
        "| --- stderr ---",
        "| err-line-2",
    ] {
        assert!(stdout.contains(line), "--verbose shows {line:?}: {stdout}");
    }
    validate_junit(&xml);
    // Read from the XML itself: quick-junit's reader trims the text of system-out.
    let raw = std::fs::read_to_string(&xml).unwrap();
    assert!(
        raw.contains(
            "<system-out>out-line-1\nout-line-2\n--- stderr ---\nerr-line-1\nerr-line-2\n</system-out>"
        ),
        "{raw}"
    );
    let case = &parse_junit(&xml).test_suites[0].test_cases[0];
    assert!(matches!(
        case.status,
        quick_junit::TestCaseStatus::NonSuccess {
            kind: quick_junit::NonSuccessKind::Failure,
            ..
        }
    ));

    let json = lessonprobe(dir.path())
        .args([
            "--lesson",
            "91",
            "--select",
            "R-FAIL",
            "--format",
            "json",
            "--no-junit",
        ])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let outcome = &doc["outcomes"][0];
    assert_eq!(outcome["verdict"], "FAIL");
    assert_eq!(
        outcome["output"],
        "out-line-1\nout-line-2\n--- stderr ---\nerr-line-1\nerr-line-2\n"
    );
}

#[test]
fn a_report_path_that_is_a_folder_exits_3_before_any_probe_runs() {
    let dir = tempfile::tempdir().unwrap();
    course(dir.path());
    std::fs::create_dir(dir.path().join("reports")).unwrap();
    for format in ["human", "json"] {
        let out = lessonprobe(dir.path())
            .args(["--lesson", "91", "--select", "R-FAIL", "--junit", "reports"])
            .args(["--format", format])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("reports: is a folder; give --junit the path of a file"),
            "{stderr}"
        );
        assert!(!dir.path().join("ran").exists(), "no probe ran");
    }
}

/// Lesson 92: a probe that makes a folder of the report's path while the run goes on.
const TAKES_THE_REPORT_PATH: &str = r#"
[checkpoint]
lesson = 92
title = "report path taken"

[[probe]]
id = "W-1"
name = "takes-the-report-path"
claim = "c"
kind = "command"
argv = ["sh", "-c", "mkdir -p out/r.xml; echo ok"]
expect = "ok"
"#;

#[test]
fn a_report_that_cannot_be_written_after_the_run_still_prints_every_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    std::fs::write(
        dir.path().join("checkpoints/92-taken.toml"),
        TAKES_THE_REPORT_PATH,
    )
    .unwrap();
    let run = |format: &str| {
        let _ = std::fs::remove_dir_all(dir.path().join("out"));
        let out = lessonprobe(dir.path())
            .args(["--lesson", "92", "--junit", "out/r.xml", "--format", format])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
        assert!(
            stderr.contains("out/r.xml: cannot write JUnit report: "),
            "{stderr}"
        );
        assert!(
            dir.path().join("out/r.xml").is_dir(),
            "the probe's folder is left as it made it"
        );
        stdout
    };

    let doc: serde_json::Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(doc["outcomes"][0]["id"], "W-1");
    assert_eq!(doc["outcomes"][0]["verdict"], "PASS");

    let human = run("human");
    let lines: Vec<&str> = human.lines().collect();
    assert!(
        lines[0].starts_with("PASS ") && lines[0].ends_with("lesson 92 W-1 takes-the-report-path"),
        "{human}"
    );
    assert_eq!(lines[1], "JUnit report not written: out/r.xml", "{human}");
    assert!(
        lines[2].starts_with("1 passed, 0 failed, 0 errors, 0 skipped, 0 pending in "),
        "{human}"
    );
}

#[test]
fn the_closing_line_gives_the_wall_time_and_what_failed() {
    let dir = tempfile::tempdir().unwrap();
    course(dir.path());
    let out = lessonprobe(dir.path())
        .args(["--lesson", "91", "--no-junit"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let closing = stdout.lines().last().unwrap();
    let wall = regex::Regex::new(
        r"^1 passed, 1 failed, 1 errors, 0 skipped, 0 pending in ([0-9]+\.[0-9]{2})s; FAIL: R-FAIL; ERROR: R-SLOW$",
    )
    .unwrap();
    let seconds: f64 = wall
        .captures(closing)
        .unwrap_or_else(|| panic!("{closing}"))[1]
        .parse()
        .unwrap();
    assert!(
        seconds >= 1.0,
        "the deadline of 1s passed within the run: {closing}"
    );
    assert!(
        stdout.contains("deadline of 1s exceeded; process group killed"),
        "{stdout}"
    );
}

#[test]
fn help_lists_the_exit_codes() {
    let out = lessonprobe(&repo()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for line in [
        "Exit codes:",
        "  0    every selected probe passed",
        "  1    a probe failed or errored, or was PENDING under --strict",
        "  2    a usage or manifest error",
        "  3    a file could not be read or written",
        "  4    an operational command",
        "  5    a replay completed with findings",
        "  6    replay verify found events missing from the audit table",
        "  130  interrupted with Ctrl-C (SIGINT); 143: stopped with SIGTERM",
    ] {
        assert!(help.contains(line), "{line:?} in {help}");
    }
}
