//! Reports that agree with the exit code, read back from the built binary: a failing command's
//! output in every format, a report path checked before anything runs, a closing line that
//! says what failed and how long it took, and the exit codes in `--help`.

use lessonprobe_testkit::*;

/// Lesson 91: a command that prints and fails, one that outlives its deadline, one that passes.
fn course() -> Dir {
    let prints_then_fails = "touch ran; echo out-line-1; echo out-line-2; echo err-line-1 >&2; echo err-line-2 >&2; exit 4";
    Manifest::lesson(91, "failing commands")
        .probe(
            Probe::script("R-FAIL", prints_then_fails)
                .name("prints-then-fails")
                .expect("never"),
        )
        .probe(
            Probe::script("R-SLOW", "echo started; sleep 30")
                .name("outlives-its-deadline")
                .timeout("1s"),
        )
        .probe(
            Probe::command("R-PASS", ["echo", "ok"])
                .name("passes")
                .expect("ok"),
        )
        .in_new_dir("91-failing.toml")
}

#[test]
fn a_failing_command_keeps_its_stdout_and_stderr_in_every_report() {
    let dir = course();
    let xml = dir.join("r.xml");
    let mut run = dir
        .lessonprobe()
        .args([
            "--lesson",
            "91",
            "--select",
            "R-FAIL",
            "--verbose",
            "--junit",
        ])
        .arg(&xml)
        .stdout_has("exited with status 4; stderr: err-line-1 | err-line-2");
    // --verbose shows the output.
    for line in [
        "| out-line-1",
        "| out-line-2",
        "| --- stderr ---",
        "| err-line-2",
    ] {
        run = run.stdout_has(line);
    }
    run.failure();
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
    assert_eq!(verdict(case), "FAIL");

    let doc = dir
        .lessonprobe()
        .args(["--lesson", "91", "--select", "R-FAIL"])
        .args(["--format", "json", "--no-junit"])
        .failure()
        .json();
    let outcome = &doc["outcomes"][0];
    assert_eq!(outcome["verdict"], "FAIL");
    assert_eq!(
        outcome["output"],
        "out-line-1\nout-line-2\n--- stderr ---\nerr-line-1\nerr-line-2\n"
    );
}

#[test]
fn a_report_path_that_is_a_folder_exits_3_before_any_probe_runs() {
    let dir = course();
    std::fs::create_dir(dir.join("reports")).unwrap();
    for format in ["human", "json"] {
        dir.lessonprobe()
            .args(["--lesson", "91", "--select", "R-FAIL", "--junit", "reports"])
            .args(["--format", format])
            .stderr_has("reports: is a folder; give --junit the path of a file")
            .status(3);
        assert!(!dir.join("ran").exists(), "no probe ran");
    }
}

/// Lesson 92: a probe that makes a folder of the report's path while the run goes on.
fn report_path_taken() -> Dir {
    Manifest::lesson(92, "report path taken")
        .probe(
            Probe::script("W-1", "mkdir -p out/r.xml; echo ok")
                .name("takes-the-report-path")
                .expect("ok"),
        )
        .in_new_dir("92-taken.toml")
}

#[test]
fn a_report_that_cannot_be_written_after_the_run_still_prints_every_result() {
    let dir = report_path_taken();
    let run = |format: &str| {
        let _ = std::fs::remove_dir_all(dir.join("out"));
        let ran = dir
            .lessonprobe()
            .args(["--lesson", "92", "--junit", "out/r.xml", "--format", format])
            .stderr_has("out/r.xml: cannot write JUnit report: ")
            .status(3);
        assert!(
            dir.join("out/r.xml").is_dir(),
            "the probe's folder is left as it made it"
        );
        ran
    };

    let doc = run("json").json();
    assert_eq!(doc["outcomes"][0]["id"], "W-1");
    assert_eq!(doc["outcomes"][0]["verdict"], "PASS");

    let human = run("human").stdout;
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

/// The JUnit report is written first; when it cannot be, the run exits 3, and the reports
/// written after it (the HTML page, the GitHub step summary, the JSON and NDJSON verdicts) say
/// the run failed and why, never "passed".
#[test]
fn a_junit_report_that_cannot_be_written_leaves_no_report_saying_passed() {
    let dir = report_path_taken();
    let summary = dir.join("step-summary.md");
    let ran = dir
        .lessonprobe()
        .args([
            "--lesson",
            "92",
            "--junit",
            "out/r.xml",
            "--html",
            "page.html",
        ])
        .args(["--format", "ndjson"])
        .in_github_actions(&summary)
        .stderr_has("out/r.xml: cannot write JUnit report: ")
        .status(3);
    let page = dir.read("page.html");
    assert!(
        page.contains("<h1 id=\"verdict\" class=\"failed\">")
            && !page.contains("lessonprobe: passed")
            && page.contains("cannot write JUnit report"),
        "{page}"
    );
    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(
        step.contains("## lessonprobe: failed") && !step.contains("passed ✅"),
        "{step}"
    );
    assert!(step.contains("cannot write JUnit report"), "{step}");
    let last: serde_json::Value = ran
        .stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    assert_eq!(last["event"], "run_finished", "{}", ran.stdout);
    assert_eq!(last["succeeded"], false, "{last}");
    assert_eq!(last["exit_code"], 3, "{last}");
    assert!(
        last["report_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot write JUnit report")),
        "{last}"
    );

    let _ = std::fs::remove_dir_all(dir.join("out"));
    let doc = dir
        .lessonprobe()
        .args(["--lesson", "92", "--junit", "out/r.xml", "--format", "json"])
        .status(3)
        .json();
    assert_eq!(doc["succeeded"], false, "{doc}");
    assert!(
        doc["report_error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot write JUnit report")),
        "{doc}"
    );
}

#[test]
fn the_closing_line_gives_the_wall_time_and_what_failed() {
    let dir = course();
    let ran = dir
        .lessonprobe()
        .args(["--lesson", "91", "--no-junit"])
        .stdout_has("deadline of 1s exceeded; process group killed")
        .failure();
    let closing = ran.stdout.lines().last().unwrap();
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
}

#[test]
fn help_lists_the_exit_codes() {
    let mut help = lessonprobe().arg("--help");
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
        help = help.stdout_has(line);
    }
    help.success();
}

/// Lesson 93: one probe that passes.
fn passing() -> Dir {
    Manifest::lesson(93, "one pass")
        .probe(
            Probe::command("P-1", ["echo", "ok"])
                .name("passes")
                .expect("ok"),
        )
        .in_new_dir("93-pass.toml")
}

#[test]
fn a_report_through_a_symlink_writes_its_target_and_keeps_the_link() {
    let dir = passing();
    std::fs::create_dir(dir.join("out")).unwrap();
    std::os::unix::fs::symlink("out/real.xml", dir.join("link.xml")).unwrap();
    std::os::unix::fs::symlink("out/real.html", dir.join("link.html")).unwrap();
    dir.lessonprobe()
        .args([
            "--lesson",
            "93",
            "--junit",
            "link.xml",
            "--html",
            "link.html",
        ])
        .stdout_has("JUnit report: link.xml")
        .success();
    for link in ["link.xml", "link.html"] {
        let meta = std::fs::symlink_metadata(dir.join(link)).unwrap();
        assert!(meta.file_type().is_symlink(), "{link} is still a link");
    }
    validate_junit(&dir.join("out/real.xml"));
    assert_eq!(parse_junit(&dir.join("out/real.xml")).tests, 1);
    let page = std::fs::read_to_string(dir.join("out/real.html")).unwrap();
    assert!(page.contains("P-1"), "{page}");
}

#[test]
fn a_fifos_reader_gets_the_whole_report_and_the_fifo_stays() {
    let dir = passing();
    let fifo = dir.join("pipe.xml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    dir.lessonprobe()
        .args(["--lesson", "93", "--junit", "pipe.xml"])
        .stdout_has("JUnit report: pipe.xml")
        .within(std::time::Duration::from_secs(30))
        .success();
    // Before joining: a FIFO replaced by a file would leave the reader waiting for ever.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    let xml = reader.join().unwrap();
    assert!(xml.trim_end().ends_with("</testsuites>"), "{xml}");
    let copy = dir.join("copy.xml");
    std::fs::write(&copy, &xml).unwrap();
    validate_junit(&copy);
}

#[test]
fn junit_dash_prints_the_report_and_the_lines_go_to_stderr() {
    let dir = passing();
    let ran = dir
        .lessonprobe()
        .args(["--lesson", "93", "--junit", "-"])
        .stderr_has("lesson 93 P-1 passes")
        .stderr_has("1 passed, 0 failed")
        .stdout_lacks("PASS ")
        .success();
    let copy = dir.join("copy.xml");
    std::fs::write(&copy, &ran.stdout).unwrap();
    validate_junit(&copy);
    assert_eq!(parse_junit(&copy).tests, 1);
    dir.lessonprobe()
        .args(["--lesson", "93", "--junit", "-", "--format", "json"])
        .stderr_has("--junit - and --format json both write to standard output")
        .status(2);
}

/// A character device made in the test's folder, never the machine's own /dev.
fn device(dir: &Dir, name: &str, minor: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let made = std::process::Command::new("mknod")
        .arg(&path)
        .args(["c", "1", minor])
        .status()
        .unwrap();
    assert!(made.success(), "mknod needs root");
    path
}

fn is_char_device(path: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_char_device()
}

#[test]
fn a_character_device_stays_one_and_a_full_one_exits_3_naming_it() {
    let dir = passing();
    let null = device(&dir, "null", "3");
    let full = device(&dir, "full", "7");
    dir.lessonprobe()
        .args(["--lesson", "93", "--junit", "null", "--html", "null"])
        .success();
    assert!(is_char_device(&null));
    dir.lessonprobe()
        .args(["--lesson", "93", "--junit", "full"])
        .stderr_has("full: cannot write JUnit report: No space left on device")
        .stdout_has("JUnit report not written: full")
        .status(3);
    assert!(is_char_device(&full));
    dir.lessonprobe()
        .args(["--lesson", "93", "--no-junit", "--html", "full"])
        .stderr_has("full: cannot write the HTML report: No space left on device")
        .status(3);
    assert!(is_char_device(&full));
}
