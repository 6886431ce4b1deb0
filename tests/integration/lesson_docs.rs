//! Lesson documents as probes, end to end: the sample course run with a real Python and
//! SQLAlchemy, failures with diffs and file:line, bless, deadlines and process groups, lint,
//! git revisions, and the author's mistakes refused before anything runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;

use crate::sample_course::{refused_without_a_report, LESSON_29, LESSON_30};

fn sample() -> PathBuf {
    repo().join("examples/ticketflow-course")
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
fn with_course(args: &[&str], course: &Path, python: &str) -> Test {
    lessonprobe()
        .in_repo()
        .args(args)
        .arg("--course")
        .arg(course)
        .args(["--python", python])
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

#[test]
fn every_sample_exercise_and_snippet_passes_and_the_checkout_is_untouched() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let before = snapshot(&sample());
    let xml = dir.join("course.xml");
    lessonprobe()
        .in_repo()
        .args([
            "--course",
            "examples/ticketflow-course",
            "--python",
            &python,
        ])
        .args(["--junit-family", "xunit1", "--jobs", "2", "--junit"])
        .arg(&xml)
        .stderr_lacks("not collected")
        .success();
    validate_against(&xml, "junit-10-xunit1.xsd");
    let report = parse_junit(&xml);
    let cases = verdicts(&report);
    for (name, verdict) in LESSON_29.into_iter().chain(LESSON_30) {
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
        attribute(ex, "file"),
        Some("examples/ticketflow-course/lessons/30-replay-audit.md")
    );
    let heading = line_of(&lesson30, "### Answer EX-30-01 [code]");
    assert_eq!(attribute(ex, "line"), Some(heading.to_string().as_str()));
    let builtin = case(&report, "EX-30-01 audit-sql-duplicate-probe [sqlite]");
    assert_eq!(
        attribute(builtin, "file"),
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
    let dir = Dir::new();
    let (course, lesson, original) = sample_copy(&dir);
    // The expected-output block's line is its opening fence's.
    let expected_line = line_of_from(
        &original,
        "True False 1",
        line_of(&original, "### Answer EX-30-01 [code]") + 1,
    ) - 1;
    let altered = original.replace("\nTrue False 1\n", "\nTrue True 1\n");
    assert_eq!(altered.matches("True True 1").count(), 1);
    std::fs::write(&lesson, &altered).unwrap();

    let xml = dir.join("f.xml");
    let at = format!("{}:{expected_line}", lesson.display());
    with_course(
        &["--lesson", "30", "--select", "EX-30-01"],
        &course,
        &python,
    )
    .arg("--junit")
    .arg(&xml)
    .stdout_has(format!("{at}: output differs from the expected output"))
    .stdout_has("-True True 1")
    .stdout_has("+True False 1")
    .failure();
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
    with_course(&bless, &course, &python)
        .stdout_has("-True True 1\n+True False 1\n")
        .stdout_has("blessed 1 expected-output block")
        .success();
    assert_eq!(
        std::fs::read_to_string(&lesson).unwrap(),
        original,
        "bless touched other bytes"
    );

    with_course(&bless, &course, &python)
        .args(["--select", "EX-30-01"])
        .stdout_has("nothing to bless")
        .success();
}

#[test]
fn code_that_raises_fails_with_the_traceback_tail_and_a_missing_interpreter_is_an_error() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let (course, lesson, text0) = sample_copy(&dir);
    std::fs::write(
        &lesson,
        text0.replacen(
            "print(first, second, store.count())",
            "raise RuntimeError(\"the store is gone\")",
            1,
        ),
    )
    .unwrap();
    let xml = dir.join("r.xml");
    let select = ["--lesson", "30", "--select", "audit_sql_duplicate_probe.py"];
    with_course(&select, &course, &python)
        .arg("--junit")
        .arg(&xml)
        .failure();
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
    with_course(&select, &course, "python3.99-missing")
        .stdout_has("ERROR")
        .stdout_has("python interpreter \"python3.99-missing\" not found")
        .failure();
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
    let dir = Dir::new();
    let lesson = DEADLINES.replace("{dir}", dir.to_str().unwrap());
    let course = mini_course(&dir, "timeout = \"1s\"\n", &[("31-deadlines.md", &lesson)]);
    let before = snapshot(&course);
    // Lesson 31 has no manifest: its document is a checkpoint of its own.
    dir.lessonprobe()
        .args([
            "--lesson",
            "31",
            "--course",
            course.to_str().unwrap(),
            "--jobs",
            "3",
        ])
        .within(Duration::from_secs(20))
        .failure();
    let report = parse_junit(&dir.join("reports/lesson-31.xml"));
    validate_junit(&dir.join("reports/lesson-31.xml"));
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
        process::process_gone(&dir.join("sleeper.pid")),
        "the sleeping block's child survived"
    );
    assert_eq!(verdicts(&report)[1].1, "PASS", "{:?}", verdicts(&report));
    assert!(
        process::process_gone(&dir.join("forked.pid")),
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
    dir.lessonprobe()
        .args(["--course", course.to_str().unwrap()])
        .args(["--select", "EX-31-02", "--no-junit"])
        .stdout_has("PASS")
        .stdout_has("lesson 31 EX-31-02 exercise")
        .success();
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
    let dir = Dir::new();
    let course = mini_course(&dir, "", &[("32-lint.md", UNCOLLECTED)]);
    let course_arg = course.to_str().unwrap();
    let lint = || {
        dir.lessonprobe()
            .args(["--lesson", "32", "--course", course_arg, "--no-junit"])
    };
    let at = format!("{}/lessons/32-lint.md:23", course.display());
    lint()
        .stdout_has("PASS")
        .stdout_has("hello.sh snippet")
        .stderr_has(format!("warning: not collected: {at}"))
        .success();

    lint()
        .arg("--strict")
        .stdout_has("FAIL")
        .stdout_has(format!("not collected: {at} "))
        // The no-run block is not reported.
        .stdout_lacks(":27")
        .failure();

    dir.lessonprobe()
        .args(["list", "--course", course_arg])
        .stdout_has("lesson 32: Lint")
        .stdout_has(format!("{}/lessons/32-lint.md:3", course.display()))
        .success();
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
    let dir = Dir::new();
    let wrong = echo_lesson("Revisions", "from the old project");
    let course = mini_course(
        &dir,
        "",
        &[
            ("33-rev.md", &wrong),
            ("34-other.md", &echo_lesson("Other", "from the project")),
        ],
    );
    // The course is a folder inside its repository, as examples/ticketflow-course is here.
    git_first_commit(&dir, "course");
    let right = echo_lesson("Revisions", "from the project");
    std::fs::write(course.join("lessons/33-rev.md"), &right).unwrap();
    git(&dir, &["commit", "-q", "-am", "fix"]);
    let course_arg = course.to_str().unwrap();
    let before = snapshot(&course);

    let at_rev = |rev: &str| {
        dir.lessonprobe().args([
            "--lesson",
            "33",
            "--course",
            course_arg,
            "--rev",
            rev,
            "--no-junit",
        ])
    };
    at_rev("HEAD~1")
        .stdout_has(format!(
            "{}/lessons/33-rev.md:17: output differs",
            course.display()
        ))
        .failure();
    at_rev("HEAD").success();
    assert_eq!(snapshot(&course), before, "--rev touched the checkout");
    dir.lessonprobe()
        .args(["--course", course_arg, "--rev", "no-such-rev"])
        .stderr_has("\"no-such-rev\" is not a revision")
        .status(2);

    // Only lesson 34 changes: only lesson 34 runs.
    std::fs::write(
        course.join("lessons/34-other.md"),
        echo_lesson("Other, revised", "from the project"),
    )
    .unwrap();
    let xml = dir.join("changed.xml");
    let changed_since_head = || {
        dir.lessonprobe()
            .args(["--course", course_arg, "--changed-since", "HEAD"])
    };
    changed_since_head().arg("--junit").arg(&xml).success();
    let suites: Vec<String> = parse_junit(&xml)
        .test_suites
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(suites, vec!["lesson 34: Other, revised".to_owned()]);
    // A project file changes: every lesson that runs from it.
    std::fs::write(course.join("project/data.txt"), "changed\n").unwrap();
    changed_since_head().arg("--junit").arg(&xml).failure();
    assert_eq!(parse_junit(&xml).test_suites.len(), 2);
    git(&course, &["checkout", "-q", "--", "."]);
    changed_since_head()
        .stdout_has("nothing to verify: no lesson file or project file changed since HEAD")
        .success();
}

#[test]
fn authoring_mistakes_and_a_missing_course_exit_2_naming_file_and_line_before_anything_runs() {
    let dir = Dir::new();
    let missing = dir.join("no/such/course");
    dir.lessonprobe()
        .arg("--course")
        .arg(&missing)
        .arg("--strict")
        .stderr_has(format!(
            "course folder {} does not exist",
            missing.display()
        ))
        .status(2);

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
        let sub = dir.join(name);
        let course = mini_course(&sub, "", &[]);
        std::fs::write(course.join("lessons/35-bad.md"), lesson).unwrap();
        let error = format!("{}/lessons/35-bad.md{wanted}", course.display());
        refused_without_a_report(&sub, &course, error);
    }
    let course = mini_course(&dir.join("config"), "run_from = \"app\"\n", &[]);
    dir.lessonprobe()
        .arg("--course")
        .arg(&course)
        .stderr_has("lessonprobe.toml:1:12: run_from folder \"app\" does not exist")
        .status(2);
}
