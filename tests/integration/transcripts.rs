//! Session transcripts end to end through the binary: terminal sessions (```` ```console ````
//! and its three other names) and Python sessions (pycon, doctest, `>>>` blocks) in
//! `lessonprobe doc` and in English and Chinese lessons; state carried from block to block,
//! failures at the failing command's or example's line, JSON `file`/`line`, `--select` of one
//! block, the folder `doc` runs in, bad input, and the sample course's session lessons.

use std::path::Path;

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;

/// (id, verdict, file, line, message) of every outcome of a `--format json` run.
fn outcomes(ran: &Ran) -> Vec<(String, String, String, u64, String)> {
    ran.json()["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap_or("").to_owned(),
                o["verdict"].as_str().unwrap_or("").to_owned(),
                o["file"].as_str().unwrap_or("").to_owned(),
                o["line"].as_u64().unwrap_or(0),
                o["message"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The verdict of outcome `id`.
#[track_caller]
fn verdict_of(all: &[(String, String, String, u64, String)], id: &str) -> (String, String) {
    let o = all
        .iter()
        .find(|o| o.0 == id)
        .unwrap_or_else(|| panic!("no outcome {id} in {all:?}"));
    (o.1.clone(), o.4.clone())
}

/// The outcome `id` of `all` has `verdict` and a message that contains `says`; the message.
#[track_caller]
fn assert_outcome(
    all: &[(String, String, String, u64, String)],
    id: &str,
    verdict: &str,
    says: &str,
) -> String {
    let (got, message) = verdict_of(all, id);
    assert_eq!(got, verdict, "{id}: {message}");
    assert!(message.contains(says), "{id}: {message}");
    message
}

/// The diff of the `index`-th outcome of a `--format json` run ("" when it has none).
fn diff_of(ran: &Ran, index: usize) -> String {
    ran.json()["outcomes"][index]["diff"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// `lessonprobe doc ARGS --format json` in `dir`.
fn doc(dir: &Dir) -> Test {
    dir.lessonprobe().arg("doc")
}

const TERMINAL: &str = "# Terminal sessions

```console
$ mkdir work && cd work
$ echo hello > greeting.txt
$ export NAME=ticketflow
```

```shell-session
$ cat greeting.txt; echo \"$NAME\"
hello
ticketflow
$ basename \"$PWD\"
work
```

```sh-session
$ ls missing
? 2
ls: cannot access 'missing': No such file or directory
$ sh -c 'echo out; echo err >&2; exit 3'
out
err
[3]
```

```bash-session
$ cat <<EOF
> one
> two
> three
> EOF
one
...
three
$ echo \"id evt-1234 at 12:00   \"
id [..] at [..]
```
";

#[test]
fn terminal_sessions_carry_state_from_block_to_block_and_pass_when_right() {
    let dir = Dir::new();
    let file = dir.write("guide.md", TERMINAL);
    let ran = doc(&dir).arg(&file).args(["--format", "json"]).success();
    let all = outcomes(&ran);
    let ids: Vec<&str> = all.iter().map(|o| o.0.as_str()).collect();
    assert_eq!(
        ids,
        ["guide.md:3", "guide.md:9", "guide.md:17", "guide.md:27"]
    );
    for o in &all {
        assert_eq!(o.1, "PASS", "{o:?}");
        assert!(o.2.ends_with("guide.md"), "{o:?}");
    }
    assert_eq!(
        all.iter().map(|o| o.3).collect::<Vec<_>>(),
        [3, 9, 17, 27],
        "each outcome carries its opening fence's line"
    );
}

#[test]
fn a_wrong_output_or_status_fails_at_the_command_and_the_next_blocks_still_run() {
    let dir = Dir::new();
    let file = dir.write("guide.md", TERMINAL);
    dir.edit(
        "guide.md",
        "$ basename \"$PWD\"\nwork\n",
        "$ basename \"$PWD\"\nplay\n",
    );
    dir.edit("guide.md", "err\n[3]\n", "err\n[4]\n");
    let ran = doc(&dir).arg(&file).args(["--format", "json"]).failure();
    let all = outcomes(&ran);
    let text = dir.read("guide.md");
    let at = line_of(&text, "$ basename \"$PWD\"");
    let said = format!(
        "{}:{at}: `basename \"$PWD\"` printed other output",
        file.display()
    );
    assert!(assert_outcome(&all, "guide.md:9", "FAIL", &said).starts_with(&said));
    let diff = diff_of(&ran, 1);
    assert!(diff.contains("-play\n+work"), "{diff}");
    let (verdict, message) = verdict_of(&all, "guide.md:17");
    assert_eq!(verdict, "FAIL");
    let at = line_of(&text, "$ sh -c 'echo out; echo err >&2; exit 3'");
    assert!(message.contains(&format!("guide.md:{at}: ")), "{message}");
    assert!(message.contains("exited with status 3, not 4"), "{message}");
    // The block after the failing ones still ran, in the same shell.
    assert_eq!(verdict_of(&all, "guide.md:27").0, "PASS");

    // State is real: without the export, the next block sees no NAME.
    let dir = Dir::new();
    let file = dir.write(
        "guide.md",
        TERMINAL.replace("$ export NAME=ticketflow\n", ""),
    );
    let all = outcomes(&doc(&dir).arg(&file).args(["--format", "json"]).failure());
    assert_eq!(verdict_of(&all, "guide.md:3").0, "PASS");
    assert_eq!(verdict_of(&all, "guide.md:8").0, "FAIL");
}

#[test]
fn doc_runs_each_document_in_a_fresh_empty_folder_and_writes_nothing_in_the_tree() {
    let dir = Dir::new();
    dir.write("docs/data.txt", "shipped with the docs\n");
    dir.write(
        "docs/a.md",
        "# A\n\n```console\n$ ls -A | wc -l\n0\n$ cat \"$TESTDIR/data.txt\"\nshipped with the docs\n$ touch made-by-a.txt\n$ pwd | grep -c \"^$TESTDIR\"\n0\n? 1\n```\n",
    );
    dir.write(
        "docs/b.md",
        "# B\n\n```console\n$ ls\n$ test -e made-by-a.txt\n? 1\n```\n",
    );
    let before = snapshot(dir.path());
    let ran = doc(&dir).arg("docs").args(["--format", "json"]).success();
    let all = outcomes(&ran);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|o| o.1 == "PASS"), "{all:?}");
    assert_eq!(snapshot(dir.path()), before, "doc wrote into the tree");
}

const PYTHON: &str = "# Python sessions

A plain block defines what the sessions use:

```python
def double(n):
    return 2 * n
```

```pycon
>>> x = double(21)
>>> x
42
```

```python-repl
>>> print(\"a\\n\\nb\")
a
<BLANKLINE>
b
```

```doctest
>>> int(\"nope\")
Traceback (most recent call last):
  ...
ValueError: invalid literal for int() with base 10: 'nope'
```

```{doctest}
:options: +ELLIPSIS

>>> list(range(x))
[0, 1, ..., 41]
```

```python
>>> double(x)  # doctest: +NORMALIZE_WHITESPACE
84
```

```py
>>> sorted({'b': 1, 'a': 2})
['a', 'b']
```

An indented one:

    >>> x + 1
    43

```python no-run
raise SystemExit('never run')
```
";

#[test]
fn python_session_forms_share_one_namespace_through_doctest() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let file = dir.write("py.md", PYTHON);
    let ran = doc(&dir)
        .arg(&file)
        .args(["--python", &python, "--format", "json"])
        .success();
    let all = outcomes(&ran);
    let kinds: Vec<(u64, &str)> = all.iter().map(|o| (o.3, o.1.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (5, "PASS"),
            (10, "PASS"),
            (16, "PASS"),
            (23, "PASS"),
            (30, "PASS"),
            (37, "PASS"),
            (42, "PASS"),
            (49, "PASS"),
        ]
    );
}

#[test]
fn a_failing_example_fails_with_its_line_and_doctests_own_report() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let file = dir.write("py.md", PYTHON.replace(">>> x\n42\n", ">>> x\n41\n"));
    let ran = doc(&dir)
        .arg(&file)
        .args(["--python", &python, "--format", "json"])
        .failure();
    let all = outcomes(&ran);
    let said = format!("{}:12: the example printed other output", file.display());
    assert!(assert_outcome(&all, "py.md:10", "FAIL", &said).starts_with(&said));
    let diff = diff_of(&ran, 1);
    assert!(diff.contains("line 12, in py.md:10"), "{diff}");
    assert!(diff.contains("Expected:\n    41\nGot:\n    42"), "{diff}");
    // The other blocks still pass, in the same namespace.
    assert_eq!(verdict_of(&all, "py.md:37").0, "PASS");

    // Without the plain block, `double` is not defined: the namespace is real.
    let dir = Dir::new();
    let file = dir.write(
        "py.md",
        PYTHON.replace("def double(n):\n    return 2 * n\n", "pass\n"),
    );
    let all = outcomes(
        &doc(&dir)
            .arg(&file)
            .args(["--python", &python, "--format", "json"])
            .failure(),
    );
    assert_outcome(
        &all,
        "py.md:9",
        "FAIL",
        "py.md:10: the example raised an exception",
    );
}

#[test]
fn selecting_one_block_runs_the_blocks_before_it_and_reports_only_it() {
    let dir = Dir::new();
    let file = dir.write("guide.md", TERMINAL);
    let ran = doc(&dir)
        .arg(&file)
        .args(["--select", "guide.md:9", "--format", "json"])
        .success();
    let all = outcomes(&ran);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        (all[0].0.as_str(), all[0].1.as_str()),
        ("guide.md:9", "PASS")
    );
    // A failure's rerun command selects the block alone, through doc and its paths.
    dir.edit("guide.md", "hello\nticketflow\n", "hello\nother\n");
    doc(&dir)
        .arg("guide.md")
        .stdout_has("doc guide.md --lesson 1 --select guide.md:9")
        .failure();
    doc(&dir)
        .args(["guide.md", "--last-failed", "--format", "json"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .failure();
    let ran = doc(&dir)
        .args(["guide.md", "--last-failed", "--format", "json"])
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .failure();
    let all = outcomes(&ran);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].0, "guide.md:9");
}

/// A course whose lesson 45 (`name`) holds `lesson`, with `project/data.txt`.
fn course(dir: &Dir, name: &str, lesson: &str) -> std::path::PathBuf {
    dir.write(
        "course/lessonprobe.toml",
        "[redactions]\n\"[EVENT_ID]\" = \"evt-[0-9a-f]{8}\"\n",
    );
    dir.write("course/project/data.txt", "from the project\n");
    dir.write(Path::new("course/lessons").join(name), lesson);
    dir.join("course")
}

const CHINESE: &str = "# 第 45 课：会话

先看项目里的文件：

```console
$ cat data.txt
from the project
$ echo evt-0123abcd > id.txt
```

### 答案 EX-45-01 [code]

运行命令：

```sh
cat id.txt 2>/dev/null || echo 没有
```

预期输出：

```text
没有
```

然后在 Python 里读回它：

```pycon
>>> open('id.txt').read().strip() == 'evt-0123abcd'
True
>>> print(open('id.txt').read().strip())
[EVENT_ID]
```
";

#[test]
fn sessions_in_a_chinese_lesson_run_in_one_copy_of_run_from_beside_its_labelled_exercises() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let course = course(&dir, "45-会话.md", CHINESE);
    let before = snapshot(&course);
    let xml = dir.join("report.xml");
    let ran = dir
        .lessonprobe()
        .arg("--course")
        .arg(&course)
        .args([
            "--lesson", "45", "--python", &python, "--format", "json", "--junit",
        ])
        .arg(&xml)
        .failure();
    let all = outcomes(&ran);
    // The exercise runs in a copy of its own: the session's id.txt is not there.
    assert_eq!(verdict_of(&all, "EX-45-01").0, "PASS");
    assert_eq!(verdict_of(&all, "45-会话.md:5").0, "PASS");
    // Named redactions do not apply to doctest's own comparison: doctest is the judge.
    assert_outcome(
        &all,
        "45-会话.md:27",
        "FAIL",
        "45-会话.md:30: the example printed other output",
    );
    assert_eq!(
        snapshot(&course),
        before,
        "the course checkout was written to"
    );
    let report = parse_junit(&xml);
    let names: Vec<String> = report.test_suites[0]
        .test_cases
        .iter()
        .map(|c| c.name.to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.contains("45-会话.md:5")),
        "{names:?}"
    );
}

#[test]
fn an_english_lesson_checks_its_sessions_with_the_courses_redactions() {
    let dir = Dir::new();
    let lesson = "# Lesson 46\n\n```console\n$ echo stored evt-0123abcd; cat data.txt\nstored [EVENT_ID]\nfrom the project\n```\n\n```console\n$ echo stored evt-zz\nstored [EVENT_ID]\n```\n";
    let course = course(&dir, "46-sessions.md", lesson);
    let ran = dir
        .lessonprobe()
        .arg("--course")
        .arg(&course)
        .args(["--lesson", "46", "--no-junit", "--format", "json"])
        .failure();
    let all = outcomes(&ran);
    assert_eq!(verdict_of(&all, "46-sessions.md:3").0, "PASS");
    assert_outcome(
        &all,
        "46-sessions.md:9",
        "FAIL",
        "lessons/46-sessions.md:10: `echo stored evt-zz`",
    );
}

#[test]
fn malformed_sessions_are_refused_with_file_and_line() {
    let dir = Dir::new();
    for (name, text, wanted) in [
        (
            "before.md",
            "# A\n\n```console\nhello\n$ ls\n```\n",
            "before.md:4: output before the first `$ ` command",
        ),
        (
            "status.md",
            "# A\n\n```console\n$ ls\n? abc\n```\n",
            "status.md:5: exit status \"abc\" is not an integer in 0-255",
        ),
        (
            "open.md",
            "# A\n\ntext\n\n```console\n$ ls\n",
            "open.md:5: unterminated fence",
        ),
    ] {
        let file = dir.write(name, text);
        doc(&dir).arg(&file).stderr_has(wanted).status(2);
    }
    let file = dir.write(
        "latin1.md",
        b"# A\n\n```console\n$ echo \xe9\n```\n".as_slice(),
    );
    doc(&dir)
        .arg(&file)
        .stderr_has("latin1.md:4: not valid UTF-8")
        .status(2);
    doc(&dir)
        .arg(dir.join("missing.md"))
        .stderr_has("missing.md")
        .status(3);
    let file = dir.write("prose.md", "# Only prose\n\nNothing runs here.\n");
    doc(&dir)
        .arg(&file)
        .stderr_has("nothing to verify")
        .status(2);
    // A session with nothing to check is a lint warning, and a failing probe under --strict.
    let file = dir.write(
        "output.md",
        "# A\n\n```console\nonly output\n```\n\n```console\n$ true\n```\n",
    );
    doc(&dir)
        .arg(&file)
        .stderr_has("not collected: ")
        .stderr_has("output.md:3")
        .success();
    doc(&dir).arg(&file).arg("--strict").failure();
}

#[test]
fn a_session_past_its_deadline_is_an_error_and_the_blocks_after_it_are_not_run() {
    let dir = Dir::new();
    let file = dir.write(
        "slow.md",
        "# A\n\n```console\n$ echo started\nstarted\n$ sleep 60\n```\n\n```console\n$ echo after\nafter\n```\n",
    );
    let ran = doc(&dir)
        .arg(&file)
        .args(["--timeout", "1s", "--format", "json"])
        .within(std::time::Duration::from_secs(20))
        .failure();
    let all = outcomes(&ran);
    assert_outcome(
        &all,
        "slow.md:3",
        "ERROR",
        "slow.md:6: `sleep 60` exceeded the deadline of 1s",
    );
    assert_outcome(&all, "slow.md:9", "ERROR", "not run");
}

#[test]
fn a_syntax_error_in_an_example_fails_and_a_missing_interpreter_is_an_error() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let file = dir.write(
        "syntax.md",
        "# A\n\n```pycon\n>>> def f(:\n...     pass\n```\n",
    );
    let all = outcomes(
        &doc(&dir)
            .arg(&file)
            .args(["--python", &python, "--format", "json"])
            .failure(),
    );
    assert_outcome(
        &all,
        "syntax.md:3",
        "FAIL",
        "syntax.md:4: the example raised",
    );
    let all = outcomes(
        &doc(&dir)
            .arg(&file)
            .args(["--python", "/no/such/python", "--format", "json"])
            .failure(),
    );
    assert_outcome(
        &all,
        "syntax.md:3",
        "ERROR",
        "python interpreter \"/no/such/python\" not found",
    );
}

#[test]
fn the_sample_courses_session_lessons_pass_and_fail_when_their_output_changes() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let course = dir.join("course");
    copy_dir(&repo().join("examples/ticketflow-course"), &course);
    for lesson in ["32", "33"] {
        let ran = dir
            .lessonprobe()
            .arg("--course")
            .arg(&course)
            .args([
                "--lesson",
                lesson,
                "--python",
                &python,
                "--no-junit",
                "--format",
                "json",
            ])
            .success();
        let all = outcomes(&ran);
        assert!(all.len() >= 4, "{all:?}");
        assert!(all.iter().all(|o| o.1 == "PASS"), "{all:?}");
    }
    dir.edit("course/lessons/32-sessions.md", "(2, 2)", "(3, 2)");
    dir.edit(
        "course/lessons/33-sessions-zh.md",
        ">>> store.count()\n1\n",
        ">>> store.count()\n2\n",
    );
    for lesson in ["32", "33"] {
        dir.lessonprobe()
            .arg("--course")
            .arg(&course)
            .args(["--lesson", lesson, "--python", &python, "--no-junit"])
            .stdout_has("FAIL")
            .failure();
    }
}
