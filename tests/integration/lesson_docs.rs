//! Lesson documents as probes, end to end: the sample course run with a real Python and
//! SQLAlchemy, failures with diffs and file:line, bless, deadlines and process groups, lint,
//! git revisions, and the author's mistakes refused before anything runs.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

/// The interpreter with SQLAlchemy that `scripts/test.sh` prepares.
fn python() -> Option<String> {
    service(
        "LESSONPROBE_TEST_PYTHON",
        "a Python interpreter with SQLAlchemy (scripts/test.sh makes a virtual environment)",
    )
}

fn sample() -> PathBuf {
    repo().join("examples/ticketflow-course")
}

/// A copy of a folder tree, for a test to alter.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A copy of the sample course in `dir/course`, and its lesson 30 file with its text.
fn sample_copy(dir: &Path) -> (PathBuf, PathBuf, String) {
    let course = dir.join("course");
    copy_dir(&sample(), &course);
    let lesson = course.join("lessons/30-replay-audit.md");
    let text = std::fs::read_to_string(&lesson).unwrap();
    (course, lesson, text)
}

/// `lessonprobe ARGS --course COURSE --python PYTHON`, run from the repository.
fn with_course(args: &[&str], course: &Path, python: &str) -> Command {
    let mut cmd = lessonprobe(&repo());
    cmd.args(args)
        .arg("--course")
        .arg(course)
        .args(["--python", python]);
    cmd
}

/// Every file under `dir` with its bytes: what a run must leave unchanged.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// A small course of shell-only lessons (no Python needed): `lessons` are (file name, text).
fn mini_course(dir: &Path, config: &str, lessons: &[(&str, &str)]) -> PathBuf {
    let course = dir.join("course");
    std::fs::create_dir_all(course.join("lessons")).unwrap();
    std::fs::create_dir_all(course.join("project")).unwrap();
    std::fs::write(course.join("project/data.txt"), "from the project\n").unwrap();
    std::fs::write(course.join("lessonprobe.toml"), config).unwrap();
    for (name, text) in lessons {
        std::fs::write(course.join("lessons").join(name), text).unwrap();
    }
    course
}

fn run(cwd: &Path, args: &[&str]) -> Output {
    lessonprobe(cwd).args(args).output().unwrap()
}

/// stdout and stderr of a run whose exit code must be `code`.
fn status(out: &Output, code: i32) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(code), "{stdout}{stderr}");
    (stdout, stderr)
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// 1-based line of the first line of `haystack` equal to `line`, after `after`.
fn line_of(haystack: &str, line: &str, after: usize) -> usize {
    haystack
        .lines()
        .enumerate()
        .skip(after)
        .find(|(_, l)| *l == line)
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("{line:?} not in the lesson"))
}

fn case<'a>(report: &'a quick_junit::Report, name: &str) -> &'a quick_junit::TestCase {
    report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no test case {name:?}"))
}

fn message(case: &quick_junit::TestCase) -> String {
    match &case.status {
        quick_junit::TestCaseStatus::NonSuccess { message, .. }
        | quick_junit::TestCaseStatus::Skipped { message, .. } => {
            message.as_deref().unwrap_or("").to_owned()
        }
        quick_junit::TestCaseStatus::Success { .. } => String::new(),
    }
}

fn description(case: &quick_junit::TestCase) -> String {
    match &case.status {
        quick_junit::TestCaseStatus::NonSuccess { description, .. } => {
            description.as_deref().unwrap_or("").to_owned()
        }
        _ => String::new(),
    }
}

#[test]
fn every_sample_exercise_and_snippet_passes_and_the_checkout_is_untouched() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let before = snapshot(&sample());
    let xml = dir.path().join("course.xml");
    let out = lessonprobe(&repo())
        .args([
            "--course",
            "examples/ticketflow-course",
            "--python",
            &python,
        ])
        .args(["--junit-family", "xunit1", "--jobs", "2", "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    let (_, stderr) = status(&out, 0);
    assert!(!stderr.contains("not collected"), "{stderr}");
    validate_against(&xml, "junit-10-xunit1.xsd");
    let report = parse_junit(&xml);
    let cases = verdicts(&report);
    for (name, verdict) in [
        ("sample_event.py snippet", "PASS"),
        ("commit_order_probe.py snippet", "PASS"),
        ("EX-29-01 audit_fail_probe.py", "PASS"),
        ("EX-29-02 exercise", "SKIP"),
        ("sql_audit_probe.py snippet", "PASS"),
        ("integrity_error_probe.py snippet", "PASS"),
        ("replay_plan_probe.py snippet", "PASS"),
        ("EX-30-01 audit_sql_duplicate_probe.py", "PASS"),
        ("EX-30-02 exercise", "SKIP"),
        ("L30-11 verify-executable-revisions", "PASS"),
    ] {
        assert!(
            cases.contains(&(name.to_owned(), verdict.to_owned())),
            "{name} is not {verdict}: {cases:?}"
        );
    }
    // No SKIP for executable content: only the two prose exercises are skipped.
    let skipped: Vec<_> = cases.iter().filter(|(_, v)| v == "SKIP").collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");

    let sql = case(&report, "sql_audit_probe.py snippet");
    assert_eq!(
        sql.system_out.as_deref(),
        Some("audit rows=1; offsets=42,43")
    );
    let lesson30 = std::fs::read_to_string(sample().join("lessons/30-replay-audit.md")).unwrap();
    let ex = case(&report, "EX-30-01 audit_sql_duplicate_probe.py");
    assert_eq!(
        ex.extra.get("file").map(|f| f.as_str()),
        Some("examples/ticketflow-course/lessons/30-replay-audit.md")
    );
    let heading = line_of(&lesson30, "### Answer EX-30-01 [code]", 0);
    assert_eq!(
        ex.extra.get("line").map(|l| l.as_str()),
        Some(heading.to_string().as_str())
    );
    let builtin = case(&report, "EX-30-01 audit-sql-duplicate-probe [sqlite]");
    assert_eq!(
        builtin.extra.get("file").map(|f| f.as_str()),
        Some("checkpoints/30-replay-audit.toml")
    );
    let l3011 = case(&report, "L30-11 verify-executable-revisions");
    assert!(
        l3011
            .system_out
            .as_deref()
            .unwrap_or("")
            .contains("PASS EX-30-01 (examples/ticketflow-course/lessons/30-replay-audit.md:"),
        "{l3011:?}"
    );
    assert_eq!(
        snapshot(&sample()),
        before,
        "the course checkout was written to"
    );
}

#[test]
fn a_changed_expected_output_fails_with_the_diff_and_line_and_bless_fixes_exactly_that_block() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (course, lesson, original) = sample_copy(dir.path());
    // The expected-output block's line is its opening fence's.
    let expected_line = line_of(
        &original,
        "True False 1",
        line_of(&original, "### Answer EX-30-01 [code]", 0),
    ) - 1;
    let altered = original.replace("\nTrue False 1\n", "\nTrue True 1\n");
    assert_eq!(altered.matches("True True 1").count(), 1);
    std::fs::write(&lesson, &altered).unwrap();

    let xml = dir.path().join("f.xml");
    let out = with_course(
        &["--lesson", "30", "--select", "EX-30-01"],
        &course,
        &python,
    )
    .arg("--junit")
    .arg(&xml)
    .output()
    .unwrap();
    let (stdout, _) = status(&out, 1);
    let at = format!("{}:{expected_line}", lesson.display());
    assert!(
        stdout.contains(&format!("{at}: output differs from the expected output")),
        "{stdout}"
    );
    assert!(
        stdout.contains("-True True 1") && stdout.contains("+True False 1"),
        "{stdout}"
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let doc_case = case(&report, "EX-30-01 audit_sql_duplicate_probe.py");
    assert!(message(doc_case).starts_with(&at), "{doc_case:?}");
    assert!(
        description(doc_case).contains("+True False 1"),
        "{doc_case:?}"
    );
    // The builtin mirroring EX-30-01 now disagrees with the document: drift.
    let builtin = case(&report, "EX-30-01 audit-sql-duplicate-probe [sqlite]");
    assert!(
        message(builtin).contains(&format!(
            "manifest expects \"True False 1\" but {at} says \"True True 1\""
        )),
        "{builtin:?}"
    );
    assert_eq!(
        verdicts(&report)
            .iter()
            .filter(|(_, v)| v == "FAIL")
            .count(),
        2
    );

    let bless = ["bless", "--lesson", "30"];
    let out = with_course(&bless, &course, &python).output().unwrap();
    let (stdout, _) = status(&out, 0);
    assert!(stdout.contains("-True True 1\n+True False 1\n"), "{stdout}");
    assert!(
        stdout.contains("blessed 1 expected-output block"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&lesson).unwrap(),
        original,
        "bless touched other bytes"
    );

    let out = with_course(&bless, &course, &python)
        .args(["--select", "EX-30-01"])
        .output()
        .unwrap();
    let (stdout, _) = status(&out, 0);
    assert!(stdout.contains("nothing to bless"), "{stdout}");
}

#[test]
fn code_that_raises_fails_with_the_traceback_tail_and_a_missing_interpreter_is_an_error() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (course, lesson, text0) = sample_copy(dir.path());
    std::fs::write(
        &lesson,
        text0.replacen(
            "print(first, second, store.count())",
            "raise RuntimeError(\"the store is gone\")",
            1,
        ),
    )
    .unwrap();
    let xml = dir.path().join("r.xml");
    let select = ["--lesson", "30", "--select", "audit_sql_duplicate_probe.py"];
    let out = with_course(&select, &course, &python)
        .arg("--junit")
        .arg(&xml)
        .output()
        .unwrap();
    status(&out, 1);
    let report = parse_junit(&xml);
    let c = case(&report, "EX-30-01 audit_sql_duplicate_probe.py");
    assert!(matches!(
        c.status,
        quick_junit::TestCaseStatus::NonSuccess {
            kind: quick_junit::NonSuccessKind::Failure,
            ..
        }
    ));
    assert!(
        message(c).contains("exited with status 1: RuntimeError: the store is gone"),
        "{}",
        message(c)
    );
    let details = description(c);
    assert!(
        details.contains("Traceback (most recent call last)")
            && details.contains("audit_sql_duplicate_probe.py"),
        "{details}"
    );

    let select = [
        "--lesson",
        "30",
        "--select",
        "sql_audit_probe.py",
        "--no-junit",
    ];
    let out = with_course(&select, &course, "python3.99-missing")
        .output()
        .unwrap();
    let (stdout, _) = status(&out, 1);
    assert!(
        stdout.contains("ERROR")
            && stdout.contains("python interpreter \"python3.99-missing\" not found"),
        "{stdout}"
    );
}

const DEADLINES: &str = "# Deadlines

### Answer EX-31-01 [code]

Run:

```sh
sleep 60 & echo $! > {dir}/sleeper.pid; sleep 60
```

### Answer EX-31-02 [code]

Run:

```sh
sleep 60 & echo $! > {dir}/forked.pid; cat data.txt
```

Expected output:

```text
from the project
```

### Answer EX-31-03 [code]

Run:

```sh
yes 0123456789 | head -c 5000000
```

Expected output:

```text
0123456789
...
```
";

#[test]
fn deadlines_background_children_and_megabytes_leave_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let lesson = DEADLINES.replace("{dir}", dir.path().to_str().unwrap());
    let course = mini_course(
        dir.path(),
        "timeout = \"1s\"\n",
        &[("31-deadlines.md", &lesson)],
    );
    let before = snapshot(&course);
    let started = Instant::now();
    // Lesson 31 has no manifest: its document is a checkpoint of its own.
    let out = run(
        dir.path(),
        &[
            "--lesson",
            "31",
            "--course",
            course.to_str().unwrap(),
            "--jobs",
            "3",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    status(&out, 1);
    let report = parse_junit(&dir.path().join("reports/lesson-31.xml"));
    validate_junit(&dir.path().join("reports/lesson-31.xml"));
    assert_eq!(report.test_suites[0].name.as_str(), "lesson 31: Deadlines");
    let sleeper = case(&report, "EX-31-01 exercise");
    assert!(
        matches!(
            sleeper.status,
            quick_junit::TestCaseStatus::NonSuccess {
                kind: quick_junit::NonSuccessKind::Error,
                ..
            }
        ),
        "{sleeper:?}"
    );
    assert!(
        message(sleeper)
            .contains("lessons/31-deadlines.md:7: deadline of 1s exceeded; process group killed"),
        "{}",
        message(sleeper)
    );
    assert!(
        process_gone(&dir.path().join("sleeper.pid")),
        "the sleeping block's child survived"
    );
    assert_eq!(verdicts(&report)[1].1, "PASS", "{:?}", verdicts(&report));
    assert!(
        process_gone(&dir.path().join("forked.pid")),
        "the forked background child survived"
    );
    let noisy = case(&report, "EX-31-03 exercise");
    assert!(
        message(noisy).contains("stdout was 5000000 bytes; only its last 65536 were kept"),
        "{}",
        message(noisy)
    );
    assert_eq!(snapshot(&course), before);

    // Without --lesson, the document-only lesson is included.
    let out = run(
        dir.path(),
        &[
            "--course",
            course.to_str().unwrap(),
            "--select",
            "EX-31-02",
            "--no-junit",
        ],
    );
    let (stdout, _) = status(&out, 0);
    assert!(
        stdout.contains("PASS") && stdout.contains("lesson 31 EX-31-02 exercise"),
        "{stdout}"
    );
}

const UNCOLLECTED: &str = "# Lint

Save as `hello.sh`, run from `project/`:

```sh
echo hello
```

Run:

```sh
sh hello.sh
```

Expected output:

```text
hello
```

A block no label binds:

```python
print('who runs me?')
```

```python no-run
print('nobody, on purpose')
```
";

#[test]
fn an_uncollected_block_is_a_warning_and_fails_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let course = mini_course(dir.path(), "", &[("32-lint.md", UNCOLLECTED)]);
    let course_arg = course.to_str().unwrap();
    let out = run(
        dir.path(),
        &["--lesson", "32", "--course", course_arg, "--no-junit"],
    );
    let (stdout, stderr) = status(&out, 0);
    assert!(
        stdout.contains("PASS") && stdout.contains("hello.sh snippet"),
        "{stdout}"
    );
    let at = format!("{}/lessons/32-lint.md:23", course.display());
    assert!(
        stderr.contains(&format!("warning: not collected: {at}")),
        "{stderr}"
    );

    let out = run(
        dir.path(),
        &[
            "--lesson",
            "32",
            "--course",
            course_arg,
            "--strict",
            "--no-junit",
        ],
    );
    let (stdout, _) = status(&out, 1);
    assert!(
        stdout.contains("FAIL") && stdout.contains(&format!("not collected: {at} ")),
        "{stdout}"
    );
    assert!(
        !stdout.contains(":27"),
        "the no-run block is not reported: {stdout}"
    );

    let out = run(dir.path(), &["list", "--course", course_arg]);
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("lesson 32: Lint")
            && stdout.contains(&format!("{}/lessons/32-lint.md:3", course.display())),
        "{stdout}"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn echo_lesson(title: &str, expected: &str) -> String {
    format!(
        "# {title}\n\nSave as `show.sh`, run from `project/`:\n\n```sh\ncat data.txt\n```\n\nRun:\n\n```sh\nsh show.sh\n```\n\nExpected output:\n\n```text\n{expected}\n```\n"
    )
}

#[test]
fn rev_verifies_each_revision_and_changed_since_only_the_changed_lessons() {
    if !tool("git") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wrong = echo_lesson("Revisions", "from the old project");
    let course = mini_course(
        dir.path(),
        "",
        &[
            ("33-rev.md", &wrong),
            ("34-other.md", &echo_lesson("Other", "from the project")),
        ],
    );
    // The course is a folder inside its repository, as examples/ticketflow-course is here.
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "course"]);
    git(dir.path(), &["commit", "-q", "-m", "first"]);
    let right = echo_lesson("Revisions", "from the project");
    std::fs::write(course.join("lessons/33-rev.md"), &right).unwrap();
    git(dir.path(), &["commit", "-q", "-am", "fix"]);
    let course_arg = course.to_str().unwrap();
    let before = snapshot(&course);

    let at_rev = |rev: &str| {
        let args = [
            "--lesson",
            "33",
            "--course",
            course_arg,
            "--rev",
            rev,
            "--no-junit",
        ];
        run(dir.path(), &args)
    };
    let out = at_rev("HEAD~1");
    let (stdout, _) = status(&out, 1);
    assert!(
        stdout.contains(&format!(
            "{}/lessons/33-rev.md:17: output differs",
            course.display()
        )),
        "{stdout}"
    );
    let out = at_rev("HEAD");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).0);
    assert_eq!(snapshot(&course), before, "--rev touched the checkout");
    let out = run(
        dir.path(),
        &["--course", course_arg, "--rev", "no-such-rev"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
    assert!(
        text(&out).1.contains("\"no-such-rev\" is not a revision"),
        "{}",
        text(&out).1
    );

    // Only lesson 34 changes: only lesson 34 runs.
    std::fs::write(
        course.join("lessons/34-other.md"),
        echo_lesson("Other, revised", "from the project"),
    )
    .unwrap();
    let xml = dir.path().join("changed.xml");
    let out = lessonprobe(dir.path())
        .args(["--course", course_arg, "--changed-since", "HEAD", "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).0);
    let suites: Vec<String> = parse_junit(&xml)
        .test_suites
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(suites, vec!["lesson 34: Other, revised".to_owned()]);
    // A project file changes: every lesson that runs from it.
    std::fs::write(course.join("project/data.txt"), "changed\n").unwrap();
    let out = lessonprobe(dir.path())
        .args(["--course", course_arg, "--changed-since", "HEAD", "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out).0);
    assert_eq!(parse_junit(&xml).test_suites.len(), 2);
    git(&course, &["checkout", "-q", "--", "."]);
    let out = run(
        dir.path(),
        &["--course", course_arg, "--changed-since", "HEAD"],
    );
    let (stdout, _) = status(&out, 0);
    assert!(
        stdout.contains("nothing to verify: no lesson file or project file changed since HEAD"),
        "{stdout}"
    );
}

#[test]
fn authoring_mistakes_and_a_missing_course_exit_2_naming_file_and_line_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/course");
    let out = run(
        dir.path(),
        &["--course", missing.to_str().unwrap(), "--strict"],
    );
    let (_, stderr) = status(&out, 2);
    assert!(
        stderr.contains(&format!(
            "course folder {} does not exist",
            missing.display()
        )),
        "{stderr}"
    );

    let cases: &[(&str, &[u8], &str)] = &[
        ("unterminated", b"# L\n\ntext\n\n```python\nprint(1)\n", ":5: unterminated fence"),
        (
            "duplicate",
            b"### Answer EX-35-01 [prose]\n\nA.\n\n### Answer EX-35-01 [prose]\n\nB.\n",
            ":5: duplicate id EX-35-01 (first on line 1)",
        ),
        (
            "escape",
            b"### Answer EX-35-01 [code]\n\nSave as `../../x.py`, run from `project/`:\n\n```python\nx\n```\n",
            ":3: save label: file name \"../../x.py\" escapes the run-from folder",
        ),
        (
            "absolute",
            b"### Answer EX-35-01 [code]\n\nSave as `/tmp/x.py`, run from `project/`:\n\n```python\nx\n```\n",
            ":3: save label: file name \"/tmp/x.py\" escapes",
        ),
        (
            "run-from",
            b"### Answer EX-35-01 [code]\n\nSave as `x.py`, run from `nowhere/`:\n\n```python\nx\n```\n",
            ":3: save label: run-from folder \"nowhere/\" does not exist",
        ),
        ("dangling", b"### Answer EX-35-01 [code]\n\nRun:\n", ":3: run label binds no fenced block"),
        (
            "expected-first",
            b"### Answer EX-35-01 [code]\n\nExpected output:\n\n```text\nx\n```\n",
            ":3: expected-output label before any run command",
        ),
        ("not-utf8", b"# L\n\n\xff\xfe\n", ":3: not valid UTF-8"),
    ];
    for (name, lesson, wanted) in cases {
        let sub = dir.path().join(name);
        let course = mini_course(&sub, "", &[]);
        std::fs::write(course.join("lessons/35-bad.md"), lesson).unwrap();
        let xml = sub.join("never.xml");
        let out = lessonprobe(&sub)
            .args(["--course", course.to_str().unwrap(), "--junit"])
            .arg(&xml)
            .output()
            .unwrap();
        let (stdout, stderr) = status(&out, 2);
        let at = format!("{}/lessons/35-bad.md{wanted}", course.display());
        assert!(stderr.contains(&at), "{name}: wanted {at:?} in {stderr}");
        assert!(
            !stderr.contains("panicked") && stdout.is_empty() && !xml.exists(),
            "{name}"
        );
    }
    let course = mini_course(&dir.path().join("config"), "run_from = \"app\"\n", &[]);
    let out = run(dir.path(), &["--course", course.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out)
            .1
            .contains("lessonprobe.toml:1:12: run_from folder \"app\" does not exist"),
        "{}",
        text(&out).1
    );
}
