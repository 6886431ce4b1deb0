//! The lesson language beyond one command and its stdout, end to end through the binary on small
//! course folders: expected exit codes and stderr, steps that continue each other (under
//! `--jobs`, broken, selected alone), named redactions and unordered blocks, hidden setup, the
//! pinned environment, bless of each, every malformed form refused with FILE:LINE and exit 2,
//! and the sample course's lesson 31 next to its unchanged lessons 29 and 30.

use std::path::{Path, PathBuf};

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;
use quick_junit::{NonSuccessKind, TestCaseStatus};

use crate::sample_course::{refused_without_a_report, LESSON_29, LESSON_30};

/// A course in `dir/course` with `config` as its lessonprobe.toml and one lesson file; the
/// lesson's path.
fn course_with(dir: &Path, config: &str, name: &str, lesson: &str) -> (PathBuf, PathBuf) {
    let course = dir.join("course");
    std::fs::create_dir_all(course.join("lessons")).unwrap();
    std::fs::create_dir_all(course.join("project")).unwrap();
    std::fs::write(course.join("project/data.txt"), "from the project\n").unwrap();
    std::fs::write(course.join("lessonprobe.toml"), config).unwrap();
    let file = course.join("lessons").join(name);
    std::fs::write(&file, lesson).unwrap();
    (course, file)
}

/// `lessonprobe --course COURSE --lesson N --junit XML ARGS`, run in `dir`.
fn run(dir: &Path, course: &Path, lesson: &str, xml: &Path) -> Test {
    lessonprobe()
        .current_dir(dir)
        .arg("--course")
        .arg(course)
        .args(["--lesson", lesson, "--junit"])
        .arg(xml)
}

/// `lessonprobe bless --lesson N --course COURSE`, run in `dir`.
fn bless(dir: &Path, course: &Path, lesson: &str) -> Test {
    lessonprobe()
        .current_dir(dir)
        .args(["bless", "--lesson", lesson, "--course"])
        .arg(course)
}

fn kind(case: &quick_junit::TestCase) -> Option<NonSuccessKind> {
    match &case.status {
        TestCaseStatus::NonSuccess { kind, .. } => Some(*kind),
        _ => None,
    }
}

/// The case `name` of `report` is an error whose message contains `says`.
#[track_caller]
fn assert_error(report: &quick_junit::Report, name: &str, says: &str) {
    let c = case(report, name);
    assert_eq!(kind(c), Some(NonSuccessKind::Error), "{c:?}");
    assert!(message(c).contains(says), "{}", message(c));
}

const FAILURES: &str = "# Failure paths

### Answer EX-41-01 [code]

Run:

```sh
echo stored; echo \"store failed: database unavailable\" >&2; exit 3
```

Expected exit code: 3

Expected output:

```text
stored
```

Expected stderr:

```text
store failed: [..]
```

### 答案 EX-41-02 [code]

运行命令：

```sh
echo \"存储失败\" >&2; exit 3
```

预期退出码：3

预期错误输出：

```text
存储失败
```

### Answer EX-41-03 [code]

Without an expected stderr, stderr is not compared.

Run:

```sh
echo noise >&2; echo \"$LANG $LC_ALL $TZ $PYTHONHASHSEED $COLUMNS $NO_COLOR\"
```

Expected output:

```text
C.UTF-8 C.UTF-8 UTC 0 80 1
```
";

#[test]
fn exit_codes_and_stderr_pass_fail_with_file_line_and_bless_rewrites_only_them() {
    let dir = Dir::new();
    let (course, lesson) = course_with(&dir, "", "41-failures.md", FAILURES);
    let xml = dir.join("41.xml");
    run(&dir, &course, "41", &xml).success();
    let report = parse_junit(&xml);
    assert_eq!(
        verdicts(&report),
        [
            ("EX-41-01 exercise".to_owned(), "PASS".to_owned()),
            ("EX-41-02 exercise".to_owned(), "PASS".to_owned()),
            ("EX-41-03 exercise".to_owned(), "PASS".to_owned()),
        ]
    );

    // The command now exits 4 and says something else on stderr.
    let changed = FAILURES.replacen(
        "echo \"store failed: database unavailable\" >&2; exit 3",
        "echo \"store gone\" >&2; exit 4",
        1,
    );
    std::fs::write(&lesson, &changed).unwrap();
    let exit_line = line_of(&changed, "Expected exit code: 3");
    let stderr_line = line_of_from(&changed, "```text", line_of(&changed, "Expected stderr:"));
    let shown = lesson.display();
    run(&dir, &course, "41", &xml)
        .stdout_has(format!(
            "{shown}:{exit_line}: `echo stored; echo \"store gone\" >&2; exit 4` exited with status 4, not the expected exit code 3"
        ))
        .failure();
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let c = case(&report, "EX-41-01 exercise");
    assert_eq!(kind(c), Some(NonSuccessKind::Failure), "{c:?}");
    let details = description(c);
    assert!(
        details.contains(&format!("--- expected {shown}:{exit_line}\n"))
            && details.contains("-exit code 3\n+exit code 4\n"),
        "{details}"
    );
    assert!(
        details.contains(&format!("--- expected {shown}:{stderr_line}\n"))
            && details.contains("-store failed: [..]\n+store gone"),
        "{details}"
    );

    // Without an exit-code paragraph a non-zero exit stays FAIL, and bless leaves it alone.
    let no_code = FAILURES.replacen("Expected exit code: 3\n\n", "", 1);
    std::fs::write(&lesson, &no_code).unwrap();
    run(&dir, &course, "41", &xml)
        .args(["--select", "EX-41-01"])
        .stdout_has("exited with status 3: store failed: database unavailable")
        .failure();
    bless(&dir, &course, "41")
        .args(["--select", "EX-41-01"])
        .stdout_has("not blessed: EX-41-01")
        .failure();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), no_code);

    // bless writes the new status and stderr, and no other byte.
    std::fs::write(&lesson, &changed).unwrap();
    bless(&dir, &course, "41")
        .stdout_has("-Expected exit code: 3\n+Expected exit code: 4\n")
        .stdout_has("-store failed: [..]\n+store gone\n")
        .success();
    let blessed = changed
        .replacen("Expected exit code: 3", "Expected exit code: 4", 1)
        .replacen("store failed: [..]", "store gone", 1);
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), blessed);
    run(&dir, &course, "41", &xml).success();
    bless(&dir, &course, "41")
        .stdout_has("nothing to bless")
        .success();
}

const CHAIN: &str = "# Steps

### Answer EX-42-01 [code]

Run:

```sh
sleep 1; echo one > step.txt
```

## The second step, a snippet

接续：EX-42-01

Save as `two.sh`, run from `project/`:

```sh
cat step.txt; echo two >> step.txt
```

Run:

```sh
sh two.sh
```

Expected output:

```text
one
```

### Answer EX-42-03 [code]

Continues: two.sh

Run:

```sh
cat step.txt data.txt
```

Expected output:

```text
one
two
from the project
```

### Answer EX-42-04 [code]

Run:

```sh
test ! -e step.txt && test ! -e two.sh && echo fresh
```

Expected output:

```text
fresh
```
";

#[test]
fn steps_continue_in_order_under_jobs_a_broken_chain_is_error_and_select_brings_predecessors() {
    let dir = Dir::new();
    let (course, lesson) = course_with(&dir, "", "42-steps.md", CHAIN);
    let before = snapshot(&course);
    let xml = dir.join("42.xml");
    run(&dir, &course, "42", &xml)
        .args(["--jobs", "4"])
        .success();
    let names: Vec<(String, String)> = verdicts(&parse_junit(&xml));
    assert_eq!(
        names,
        [
            ("EX-42-01 exercise".to_owned(), "PASS".to_owned()),
            ("two.sh snippet".to_owned(), "PASS".to_owned()),
            ("EX-42-03 exercise".to_owned(), "PASS".to_owned()),
            ("EX-42-04 exercise".to_owned(), "PASS".to_owned()),
        ]
    );
    assert_eq!(snapshot(&course), before, "the course was written to");

    // Selecting the last step runs and reports the two it continues, first.
    let select = dir.join("select.xml");
    run(&dir, &course, "42", &select)
        .args(["--select", "EX-42-03", "--jobs", "3"])
        .success();
    assert_eq!(
        verdicts(&parse_junit(&select)),
        [
            ("EX-42-01 exercise".to_owned(), "PASS".to_owned()),
            ("two.sh snippet".to_owned(), "PASS".to_owned()),
            ("EX-42-03 exercise".to_owned(), "PASS".to_owned()),
        ]
    );

    // The first step fails: the steps after it are ERROR, never PASS, never missing.
    std::fs::write(
        &lesson,
        CHAIN.replacen("sleep 1; echo one > step.txt", "exit 1", 1),
    )
    .unwrap();
    run(&dir, &course, "42", &xml)
        .args(["--jobs", "4"])
        .failure();
    validate_junit(&xml);
    let report = parse_junit(&xml);
    assert_eq!(
        kind(case(&report, "EX-42-01 exercise")),
        Some(NonSuccessKind::Failure)
    );
    assert_error(&report, "two.sh snippet", "not run: EX-42-01 failed");
    assert_error(
        &report,
        "EX-42-03 exercise",
        "not run: two.sh was not run (EX-42-01 failed)",
    );
    assert_eq!(kind(case(&report, "EX-42-04 exercise")), None);

    // bless of a later step runs the steps before it, and rewrites that step only.
    let wrong = CHAIN.replacen(
        "one\ntwo\nfrom the project",
        "one\nthree\nfrom the project",
        1,
    );
    std::fs::write(&lesson, &wrong).unwrap();
    bless(&dir, &course, "42")
        .args(["--select", "EX-42-03"])
        .stdout_has("-three\n+two\n")
        .success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), CHAIN);
}

const VARYING: &str = "# Varying output

### Answer EX-43-01 [code]

Run:

```sh
printf 'stored id-%04d\\nworker b done\\nworker a done\\ncount=2\\n' $(( $$ % 10000 ))
```

Expected output:

```text unordered
worker a done
count=[N]
stored [ID]
worker b done
```

### Answer EX-43-02 [code]

Run:

```sh
printf 'id=id-%04d\\ncount=2\\n' $(( $$ % 10000 ))
```

Expected output:

```text
id=[ID]
count=[N]
```
";

const REDACTIONS: &str = "[redactions]\n\"[ID]\" = \"id-[0-9]{4}\"\n\"[N]\" = \"[0-9]+\"\n";

#[test]
fn redactions_and_unordered_blocks_match_fail_with_diffs_and_bless_keeps_placeholders() {
    let dir = Dir::new();
    let (course, lesson) = course_with(&dir, REDACTIONS, "43-varying.md", VARYING);
    let xml = dir.join("43.xml");
    run(&dir, &course, "43", &xml).success();

    // A placeholder that does not match, and an unordered line that is not there.
    let wrong = VARYING.replacen("stored [ID]", "stored [N]", 1).replacen(
        "count=[N]\n```",
        "count=[ID]\n```",
        1,
    );
    std::fs::write(&lesson, &wrong).unwrap();
    run(&dir, &course, "43", &xml).failure();
    let report = parse_junit(&xml);
    let unordered = case(&report, "EX-43-01 exercise");
    let at = line_of(&wrong, "```text unordered");
    assert!(
        message(unordered).contains(&format!("{}:{at}: output differs", lesson.display())),
        "{}",
        message(unordered)
    );
    let details = description(unordered);
    assert!(details.contains("-stored [N]\n"), "{details}");
    assert!(details.contains("+stored id-"), "{details}");
    assert!(
        !details.contains("+worker b done"),
        "only what differs: {details}"
    );
    let redacted = case(&report, "EX-43-02 exercise");
    assert!(
        description(redacted).contains("-count=[ID]\n+count=2"),
        "{}",
        description(redacted)
    );

    // bless keeps the placeholders that still match and writes the run's value elsewhere.
    let stale = VARYING.replacen("count=[N]\n```", "count=[N]\nextra\n```", 1);
    std::fs::write(&lesson, &stale).unwrap();
    bless(&dir, &course, "43").stdout_has("-extra\n").success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), VARYING);
}

const EVENTS: &str = "# Events

### Answer EX-46-01 [code]

Run:

```sh
printf 'event evt-%s at %s\\n' \"$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')\" \"$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)\"
printf 'stored evt-%s\\n' \"$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')\"
```

Expected output:

```text
event [EVENT_ID] at [TS]
stored [..]
```
";

const EVENT_REDACTIONS: &str = "[redactions]
\"[EVENT_ID]\" = \"evt-[0-9a-f]{8}\"
\"[TS]\" = \"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z\"
";

#[test]
fn bless_writes_the_courses_placeholders_back_not_the_runs_values() {
    let dir = Dir::new();
    let (course, lesson) = course_with(&dir, EVENT_REDACTIONS, "46-events.md", EVENTS);
    let xml = dir.join("46.xml");
    run(&dir, &course, "46", &xml).success();

    // The expected line changed as an author would change it: bless must give the placeholders
    // back, not this run's event id and time, so that the next run passes again.
    let changed = EVENTS.replacen(
        "event [EVENT_ID] at [TS]\n",
        "event [EVENT_ID] at [TS] (old)\n",
        1,
    );
    std::fs::write(&lesson, &changed).unwrap();
    run(&dir, &course, "46", &xml)
        .stdout_has("-event [EVENT_ID] at [TS] (old)\n")
        .stdout_has("+event evt-")
        .failure();
    bless(&dir, &course, "46")
        .stdout_has("-event [EVENT_ID] at [TS] (old)\n+event [EVENT_ID] at [TS]\n")
        .success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), EVENTS);
    run(&dir, &course, "46", &xml).success();

    // A line the run added is redacted too; a line that still matches keeps its `[..]`.
    let shorter = EVENTS.replacen("event [EVENT_ID] at [TS]\n", "", 1);
    std::fs::write(&lesson, &shorter).unwrap();
    bless(&dir, &course, "46").success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), EVENTS);
    run(&dir, &course, "46", &xml).success();
}

/// Sessions whose expected lines went stale: a changed line with a redacted value, a wrong
/// `? N`, a command that now prints and one that now fails (no status line), doctest examples
/// that print other output, a blank line, an exception, and an indented block.
const STALE_SESSIONS: &str = "# Sessions

- In a list:

  ```console
  $ printf 'event evt-%s\\nsame\\n' \"$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')\"
  event [EVENT_ID] (old)
  same
  $ echo one; exit_with() { return $1; }; exit_with 3
  one
  ? 2
  $ echo quiet
  $ false
  ```

```pycon
>>> print(\"a\\n\\nb\")
a
b
>>> 1 + 1
3
>>> {}[\"k\"]
>>> x = 5
>>> x
5
```

    >>> x * 2
    11
";

/// The same, as bless must leave it: the run's lines with `[EVENT_ID]` passed back, `? 3`,
/// `[1]` added, doctest's "Got" (with `<BLANKLINE>` and the traceback's header) in place.
const BLESSED_SESSIONS: &str = "# Sessions

- In a list:

  ```console
  $ printf 'event evt-%s\\nsame\\n' \"$(od -An -N4 -tx1 /dev/urandom | tr -d ' \\n')\"
  event [EVENT_ID]
  same
  $ echo one; exit_with() { return $1; }; exit_with 3
  one
  ? 3
  $ echo quiet
  quiet
  $ false
  [1]
  ```

```pycon
>>> print(\"a\\n\\nb\")
a
<BLANKLINE>
b
>>> 1 + 1
2
>>> {}[\"k\"]
Traceback (most recent call last):
  ...
KeyError: 'k'
>>> x = 5
>>> x
5
```

    >>> x * 2
    10
";

#[test]
fn bless_rewrites_a_failing_sessions_expected_lines_in_place() {
    if !tool("python3") {
        return;
    }
    let dir = Dir::new();
    let config = "[redactions]\n\"[EVENT_ID]\" = \"evt-[0-9a-f]{8}\"\n";
    let (course, lesson) = course_with(&dir, config, "47-sessions.md", STALE_SESSIONS);
    let xml = dir.join("47.xml");
    run(&dir, &course, "47", &xml).failure();
    let report = parse_junit(&xml);
    assert_eq!(
        verdicts(&report),
        [
            (
                "47-sessions.md:5 terminal session".to_owned(),
                "FAIL".to_owned()
            ),
            (
                "47-sessions.md:16 python session".to_owned(),
                "FAIL".to_owned()
            ),
            (
                "47-sessions.md:28 python session".to_owned(),
                "FAIL".to_owned()
            ),
        ]
    );
    bless(&dir, &course, "47")
        .stdout_has("-  event [EVENT_ID] (old)\n+  event [EVENT_ID]\n")
        .stdout_has("-    11\n+    10\n")
        .success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), BLESSED_SESSIONS);
    run(&dir, &course, "47", &xml).success();
    bless(&dir, &course, "47")
        .stdout_has("nothing to bless")
        .success();
    assert_eq!(std::fs::read_to_string(&lesson).unwrap(), BLESSED_SESSIONS);
}

const SETUP: &str = "# Setup

### Answer EX-44-01 [code]

Save as `show.sh`, run from `project/`:

```sh
cat seed.txt data.txt
```

<!-- lessonprobe: setup
Made before the student's command; the lesson does not show it.
```sh
echo seeded > seed.txt
```
-->

Run:

```sh
sh show.sh
```

Expected output:

```text
seeded
from the project
```
";

#[test]
fn a_hidden_setup_runs_before_the_command_shows_with_verbose_and_its_failure_is_error_at_its_line()
{
    let dir = Dir::new();
    let (course, lesson) = course_with(&dir, "", "44-setup.md", SETUP);
    let xml = dir.join("44.xml");
    let comment = line_of(SETUP, "<!-- lessonprobe: setup");
    let at = format!("{}:{comment}", lesson.display());
    // Its block is bound: --strict finds nothing uncollected.
    run(&dir, &course, "44", &xml)
        .args(["--strict", "--verbose"])
        .stdout_has(format!("--- hidden setup ({at}) ---"))
        .stdout_has("$ echo seeded > seed.txt")
        .stderr_lacks("not collected")
        .success();

    std::fs::write(
        &lesson,
        SETUP.replacen("echo seeded > seed.txt", "echo no seed >&2; exit 5", 1),
    )
    .unwrap();
    run(&dir, &course, "44", &xml).failure();
    let report = parse_junit(&xml);
    assert_error(
        &report,
        "EX-44-01 show.sh",
        &format!("{at}: hidden setup failed: exited with status 5: no seed"),
    );

    // lint still reports a block no label binds, and only that one.
    let extra = format!("{SETUP}\nAnd then:\n\n```sh\nrm -rf /\n```\n");
    std::fs::write(&lesson, &extra).unwrap();
    let stray = line_of(&extra, "And then:") + 2;
    run(&dir, &course, "44", &xml)
        .arg("--strict")
        .stdout_has(format!("not collected: {}:{stray} ", lesson.display()))
        .failure();
}

#[test]
fn every_malformed_form_exits_2_naming_file_and_line_before_anything_runs() {
    let dir = Dir::new();
    let ex = |body: &str| format!("# L\n\n### Answer EX-45-01 [code]\n\n{body}");
    let run_block = "Run:\n\n```sh\ntrue\n```\n\n";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "exit-range",
            ex(&format!("{run_block}Expected exit code: 300\n")),
            ":11: exit code \"300\" is not an integer in 0-255",
        ),
        (
            "exit-word",
            ex(&format!("{run_block}预期退出码：three\n")),
            ":11: exit code \"three\" is not an integer in 0-255",
        ),
        (
            "exit-first",
            ex("Expected exit code: 3\n\n"),
            ":5: exit-code label before any run command",
        ),
        (
            "stderr-first",
            ex("预期错误输出：\n\n```text\nx\n```\n"),
            ":5: expected-stderr label before any run command",
        ),
        (
            "continues-missing",
            ex(&format!("Continues: EX-45-09\n\n{run_block}")),
            ":5: continues EX-45-09, which is no exercise or snippet of this lesson",
        ),
        (
            "continues-later",
            ex(&format!(
                "接续：EX-45-02\n\n{run_block}### Answer EX-45-02 [code]\n\n{run_block}"
            )),
            ":5: continues EX-45-02, which comes later in the document",
        ),
        (
            "continues-cycle",
            ex(&format!("Continues: EX-45-01\n\n{run_block}")),
            ":5: EX-45-01 continues itself: a cycle",
        ),
        (
            "setup-empty",
            ex(&format!(
                "<!-- lessonprobe: setup\nnothing\n-->\n\n{run_block}"
            )),
            ":5: setup comment holds 0 fenced blocks",
        ),
        (
            "setup-two",
            ex(&format!(
                "<!-- lessonprobe: setup\n```sh\na\n```\n\n```sh\nb\n```\n-->\n\n{run_block}"
            )),
            ":5: setup comment holds 2 fenced blocks",
        ),
    ];
    for (name, lesson, wanted) in &cases {
        let sub = dir.join(name);
        let (course, file) = course_with(&sub, "", "45-bad.md", lesson);
        refused_without_a_report(&sub, &course, format!("{}{wanted}", file.display()));
    }
    for (name, config, wanted) in [
        ("bad-regex", "[redactions]\n\"[ID]\" = \"evt-(\"\n", "lessonprobe.toml:2:10: [redactions] redaction [ID]: \"evt-(\" is not a valid regular expression"),
        ("bad-placeholder", "[redactions]\n\"EVENT_ID\" = \"evt-[0-9]+\"\n", "lessonprobe.toml:2:1: [redactions] redaction placeholder \"EVENT_ID\" must be a name in square brackets"),
    ] {
        let sub = dir.join(name);
        let (course, _) = course_with(&sub, config, "45-ok.md", "# L\n");
        lessonprobe()
            .current_dir(&sub)
            .arg("--course")
            .arg(&course)
            .stderr_has(format!("{}/{wanted}", course.display()))
            .status(2);
    }
}

#[test]
fn the_sample_course_lesson_31_passes_and_lessons_29_and_30_still_do() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let course = repo().join("examples/ticketflow-course");
    let before = snapshot(&course);
    for (lesson, expected) in [
        (
            "31",
            &[
                ("EX-31-01 store_down_probe.py", "PASS"),
                ("EX-31-02 load_day.py", "PASS"),
                ("EX-31-03 replay_day.py", "PASS"),
                ("EX-31-04 count_tenants.py", "PASS"),
            ][..],
        ),
        ("29", &LESSON_29[..]),
        ("30", &LESSON_30[..]),
    ] {
        let xml = dir.join(format!("{lesson}.xml"));
        lessonprobe()
            .in_repo()
            .args(["--lesson", lesson, "--course", "examples/ticketflow-course"])
            .args(["--python", &python, "--jobs", "4", "--junit"])
            .arg(&xml)
            .stderr_lacks("not collected")
            .success();
        validate_junit(&xml);
        let cases = verdicts(&parse_junit(&xml));
        for (name, verdict) in expected {
            assert!(
                cases.contains(&((*name).to_owned(), (*verdict).to_owned())),
                "lesson {lesson}: {name} is not {verdict}: {cases:?}"
            );
        }
    }
    assert_eq!(
        snapshot(&course),
        before,
        "the course checkout was written to"
    );
}

/// `--partition K/N` keeps a chain of steps in the shard of its first step: each shard of
/// lesson 31 passes (no step is left waiting for one run elsewhere), and the shards together
/// run every probe of the lesson exactly once.
#[test]
fn shards_keep_each_chain_of_steps_together() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let run = |xml: &std::path::Path, partition: Option<String>| {
        let mut test = lessonprobe()
            .in_repo()
            .args(["--lesson", "31", "--course", "examples/ticketflow-course"])
            .args(["--python", &python, "--junit"])
            .arg(xml);
        if let Some(p) = partition {
            test = test.args(["--partition", &p]);
        }
        test.stdout_lacks("not run:").success();
        validate_junit(xml);
        verdicts(&parse_junit(xml))
    };
    let whole = run(&dir.join("all.xml"), None);
    let chain: Vec<&str> = ["EX-31-02", "EX-31-03", "EX-31-04"].to_vec();
    let mut union = Vec::new();
    for k in 1..=3 {
        let shard = run(&dir.join(format!("{k}.xml")), Some(format!("{k}/3")));
        let steps = shard
            .iter()
            .filter(|(name, _)| chain.iter().any(|id| name.starts_with(id)))
            .count();
        assert!(
            steps == 0 || steps == chain.len(),
            "shard {k} holds part of the chain: {shard:?}"
        );
        union.extend(shard);
    }
    union.sort();
    let mut whole = whole;
    whole.sort();
    assert_eq!(union, whole, "the shards together are not the whole lesson");
}
