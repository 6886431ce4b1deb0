//! Jupyter notebooks end to end through the binary, in a real kernel (the test venv's ipykernel
//! and nbclient): a passing notebook; each cause of a FAIL (a stored output changed, a tag
//! removed, a raising cell) and of an ERROR (a hanging cell, whose kernel answers the interrupt
//! and runs the later cells or is killed, a dead kernel, `input()`, a malformed file); `doc` on a file and a folder, a course's numbered notebook lesson; the JSON
//! fields; run-only outputs; Ctrl-C; `--partition`; the MyST Markdown form; nbval's own test
//! notebooks, cell by cell as nbval judges them, and its sanitize file; the HTML report of a
//! failing cell; a course notebook importing the course's code from a copy; `--watch`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;
use serde_json::{json, Value};

/// A code cell: its source lines, stored outputs, tags and execution count.
struct Code {
    source: &'static [&'static str],
    outputs: Value,
    tags: &'static [&'static str],
    executed: bool,
    metadata: Value,
}

fn code(source: &'static [&'static str], outputs: Value) -> Code {
    Code {
        source,
        outputs,
        tags: &[],
        executed: true,
        metadata: json!({}),
    }
}

fn stdout(text: &str) -> Value {
    json!([{"name": "stdout", "output_type": "stream", "text": [text]}])
}

/// An nbformat 4.5 notebook of a title cell and `cells`, written as Jupyter writes it (keys
/// sorted, one space of indentation, one source line a JSON line).
fn notebook(cells: &[Code]) -> String {
    let mut all = vec![
        json!({"cell_type": "markdown", "id": "title", "metadata": {},
        "source": ["# Explore\n"]}),
    ];
    for (i, cell) in cells.iter().enumerate() {
        let mut lines: Vec<String> = cell.source.iter().map(|l| format!("{l}\n")).collect();
        if let Some(last) = lines.last_mut() {
            last.pop();
        }
        let mut metadata = cell.metadata.clone();
        if !cell.tags.is_empty() {
            metadata["tags"] = json!(cell.tags);
        }
        all.push(json!({
            "cell_type": "code",
            "execution_count": if cell.executed { json!(i + 1) } else { Value::Null },
            "id": format!("c{}", i + 1),
            "metadata": metadata,
            "outputs": cell.outputs,
            "source": lines,
        }));
    }
    let nb = json!({
        "cells": all,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    let mut text = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut writer = serde_json::Serializer::with_formatter(&mut text, formatter);
    serde::Serialize::serialize(&nb, &mut writer).unwrap();
    String::from_utf8(text).unwrap() + "\n"
}

/// The cells of a notebook that passes: state carried, a result, a redacted output.
fn passing() -> Vec<Code> {
    vec![
        code(
            &["rows = [1, 2, 3]", "print(len(rows), 'rows')"],
            stdout("3 rows\n"),
        ),
        code(
            &["sum(rows)"],
            json!([{"data": {"text/plain": ["6"]}, "execution_count": 2, "metadata": {},
                "output_type": "execute_result"}]),
        ),
        code(&["x = 1"], json!([])),
        code(
            &["import os", "print(os.path.exists('data.txt'))"],
            stdout("True\n"),
        ),
    ]
}

/// `lessonprobe doc PATH --python P --format json` in `dir`.
fn doc(dir: &Dir, path: &Path, python: &str) -> Test {
    dir.lessonprobe()
        .arg("doc")
        .arg(path)
        .args(["--python", python, "--format", "json"])
        .within(Duration::from_secs(120))
}

/// What these tests read of an outcome.
#[derive(Debug, serde::Deserialize)]
struct Row {
    id: String,
    verdict: String,
    cell: Option<u64>,
    line: Option<u64>,
    message: Option<String>,
}

/// Every outcome of a `--format json` run.
fn outcomes(ran: &Ran) -> Vec<Row> {
    serde_json::from_value(ran.json()["outcomes"].clone()).expect("outcomes")
}

/// (id, verdict) pairs, sorted by id.
fn verdicts(ran: &Ran) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = outcomes(ran)
        .into_iter()
        .map(|o| (o.id, o.verdict))
        .collect();
    all.sort();
    all
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = expected
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    all.sort();
    all
}

/// The outcome `id`: its verdict and message.
#[track_caller]
fn outcome(ran: &Ran, id: &str) -> (String, String) {
    let all = outcomes(ran);
    let o = all
        .iter()
        .find(|o| o.id == id)
        .unwrap_or_else(|| panic!("no outcome {id} in {all:?}"));
    (o.verdict.clone(), o.message.clone().unwrap_or_default())
}

/// A folder with `nb.ipynb` of `cells` and the data file its last passing cell reads; the
/// notebook as given to `doc` in that folder.
fn with_notebook(cells: &[Code]) -> (Dir, PathBuf) {
    let dir = Dir::new();
    dir.write("data.txt", "x\n");
    dir.write("nb.ipynb", notebook(cells));
    (dir, PathBuf::from("nb.ipynb"))
}

/// `file:LINE` of the first line of `file` (in `dir`) holding `needle`.
#[track_caller]
fn at(dir: &Dir, file: &str, needle: &str) -> String {
    let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in {file}"));
    format!("{file}:{}", line + 1)
}

#[test]
fn a_notebook_whose_cells_run_and_show_their_stored_outputs_passes_with_cell_and_line() {
    let Some(python) = python() else { return };
    let (dir, file) = with_notebook(&passing());
    let ran = doc(&dir, &file, &python).success();
    let all = outcomes(&ran);
    let mut seen: Vec<(String, String, u64, String)> = all
        .iter()
        .map(|o| {
            let line = o.line.unwrap_or(0);
            (
                o.id.clone(),
                o.verdict.clone(),
                o.cell.unwrap_or(999),
                format!("nb.ipynb:{line}"),
            )
        })
        .collect();
    seen.sort();
    let first_lines = ["rows = [1, 2, 3]", "sum(rows)", "x = 1", "import os"];
    let expected: Vec<(String, String, u64, String)> = first_lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let n = i as u64 + 1;
            (
                format!("nb.ipynb#c{n}"),
                "PASS".into(),
                n,
                at(&dir, "nb.ipynb", l),
            )
        })
        .collect();
    assert_eq!(seen, expected);
    assert_eq!(ran.json()["outcomes"][0]["file"], "nb.ipynb");
    // The notebook ran in a copy of its folder: the course's folder is as it was.
    assert!(!dir.path().join(".ipynb_checkpoints").exists());
}

#[test]
fn a_changed_stored_output_fails_its_cell_with_the_diff_at_its_line() {
    let Some(python) = python() else { return };
    let mut cells = passing();
    cells[0].outputs = stdout("4 rows\n");
    let (dir, file) = with_notebook(&cells);
    let ran = doc(&dir, &file, &python).failure();
    let (verdict, message) = outcome(&ran, "nb.ipynb#c1");
    assert_eq!(verdict, "FAIL");
    assert!(
        message.starts_with(&format!(
            "{}: cell 1 produced other outputs than the notebook stores",
            at(&dir, "nb.ipynb", "rows = [1, 2, 3]")
        )),
        "{message}"
    );
    let diff = ran.json()["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "nb.ipynb#c1")
        .map(|o| o["diff"].as_str().unwrap_or("").to_owned())
        .unwrap();
    assert!(diff.contains("-4 rows\n+3 rows\n"), "{diff}");
    assert_eq!(outcome(&ran, "nb.ipynb#c2").0, "PASS");
}

#[test]
fn a_raising_cell_fails_with_the_exception_and_later_cells_still_run_unless_tagged() {
    let Some(python) = python() else { return };
    let raising = || Code {
        tags: &["raises-exception"],
        ..code(
            &["y = 2", "1 / 0"],
            json!([{"ename": "ZeroDivisionError", "evalue": "division by zero",
                "output_type": "error", "traceback": []}]),
        )
    };
    let after = || code(&["print(y)"], stdout("2\n"));
    let (dir, file) = with_notebook(&[raising(), after()]);
    let ran = doc(&dir, &file, &python).success();
    assert_eq!(
        verdicts(&ran),
        pairs(&[("nb.ipynb#c1", "PASS"), ("nb.ipynb#c2", "PASS")])
    );
    // The tag removed: the cell raises where nothing allows it.
    let untagged = Code {
        tags: &[],
        ..raising()
    };
    let (dir, file) = with_notebook(&[untagged, after()]);
    let ran = doc(&dir, &file, &python).failure();
    let (verdict, message) = outcome(&ran, "nb.ipynb#c1");
    assert_eq!(verdict, "FAIL");
    assert_eq!(
        message,
        format!(
            "{}: cell 1 raised ZeroDivisionError: division by zero at line 2 of the cell",
            at(&dir, "nb.ipynb", "y = 2")
        )
    );
    assert_eq!(outcome(&ran, "nb.ipynb#c2").0, "PASS");
}

/// Runs `doc .` over `a/1-hangs.ipynb` (a cell setting `x`, then `hanging` under a 3 s limit,
/// then `later`) and a passing `b/2-passes.ipynb`: checks that the first cell and the other
/// notebook pass, that the hanging cell is an ERROR ending as `says`, and that its kernel is
/// gone at the end (`hanging` writes its pid to `kernel.pid`); the run, for the later cells.
fn over_its_limit(
    dir: &Dir,
    hanging: &'static [&'static str],
    later: Vec<Code>,
    says: &str,
) -> Option<Ran> {
    let python = python()?;
    let mut cells = vec![
        code(&["x = 1", "print('before')"], stdout("before\n")),
        Code {
            metadata: json!({"lessonprobe": {"timeout": 3}}),
            ..code(hanging, json!([]))
        },
    ];
    cells.extend(later);
    dir.write("a/1-hangs.ipynb", notebook(&cells));
    dir.write("b/2-passes.ipynb", notebook(&passing()[..3]));
    let ran = doc(dir, Path::new("."), &python).failure();
    assert_eq!(
        outcome(&ran, "1-hangs.ipynb#c2"),
        (
            "ERROR".to_owned(),
            format!(
                "{}: cell 2 exceeded its limit of 3s; {says}",
                at(dir, "a/1-hangs.ipynb", "time.sleep(600)")
            )
        )
    );
    assert_eq!(outcome(&ran, "1-hangs.ipynb#c1").0, "PASS");
    assert_eq!(outcome(&ran, "2-passes.ipynb#c3").0, "PASS");
    let kernel = std::fs::read_to_string(dir.path().join("kernel.pid")).expect("the cell ran");
    assert_gone(kernel.trim());
    Some(ran)
}

#[test]
fn a_hanging_cell_is_an_error_its_kernel_interrupted_and_the_later_cells_run_in_it() {
    let dir = Dir::new();
    let pid = dir.path().join("kernel.pid");
    let same_kernel = one_line(format!(
        "print(x, open({:?}).read() == str(__import__('os').getpid()))",
        pid.display()
    ));
    let later = vec![
        code(same_kernel, stdout("1 True\n")),
        code(&["print('after')"], stdout("stored\n")),
    ];
    let says = "the kernel was interrupted and runs the later cells";
    let Some(ran) = over_its_limit(&dir, sleeping(&pid), later, says) else {
        return;
    };
    // The later cells run in the same kernel, its state kept, each judged by its outputs.
    assert_eq!(outcome(&ran, "1-hangs.ipynb#c3").0, "PASS");
    let (verdict, message) = outcome(&ran, "1-hangs.ipynb#c4");
    assert_eq!(verdict, "FAIL");
    assert!(
        message.contains("cell 4 produced other outputs"),
        "{message}"
    );
}

#[test]
fn a_hanging_cell_whose_kernel_ignores_the_interrupt_is_an_error_the_kernel_killed_the_rest_not_run(
) {
    let dir = Dir::new();
    let deaf = one_line(format!(
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); {}",
        sleeping(&dir.path().join("kernel.pid"))[0]
    ));
    let later = vec![code(&["print('after')"], stdout("after\n"))];
    let says = "the kernel was interrupted, did not answer within 5s, and was killed";
    let Some(ran) = over_its_limit(&dir, deaf, later, says) else {
        return;
    };
    let (verdict, message) = outcome(&ran, "1-hangs.ipynb#c3");
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains(
            "cell 3 not run: the kernel was killed at cell 2 (it did not answer the interrupt)"
        ),
        "{message}"
    );
}

/// The process `pid` is gone (or a zombie waiting to be reaped).
#[track_caller]
fn assert_gone(pid: &str) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let state = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .unwrap_or("")
        .trim()
        .to_owned();
    assert!(
        state.is_empty() || state.starts_with('Z'),
        "kernel {pid} still running: {state}"
    );
}

#[test]
fn a_cell_that_kills_its_kernel_is_an_error_and_the_cells_after_it_are_not_run() {
    let Some(python) = python() else { return };
    let cells = [
        code(&["x = 1"], json!([])),
        code(&["import os", "os._exit(3)"], json!([])),
        code(&["print(x)"], stdout("1\n")),
    ];
    let (dir, file) = with_notebook(&cells);
    let ran = doc(&dir, &file, &python).failure();
    let (verdict, message) = outcome(&ran, "nb.ipynb#c2");
    assert_eq!(verdict, "ERROR");
    assert!(
        message.starts_with(&format!(
            "{}: the kernel died while cell 2 ran",
            at(&dir, "nb.ipynb", "import os")
        )),
        "{message}"
    );
    let (verdict, message) = outcome(&ran, "nb.ipynb#c3");
    assert_eq!(verdict, "ERROR");
    assert!(message.contains("cell 3 not run"), "{message}");
}

#[test]
fn input_is_an_error_never_a_hang() {
    let Some(python) = python() else { return };
    let cells = [
        code(&["name = input('name? ')"], json!([])),
        code(&["print('next')"], stdout("next\n")),
    ];
    let (dir, file) = with_notebook(&cells);
    let ran = doc(&dir, &file, &python).failure();
    let (verdict, message) = outcome(&ran, "nb.ipynb#c1");
    assert_eq!(verdict, "ERROR");
    assert_eq!(
        message,
        format!(
            "{}: cell 1 asks for input (input()), which a notebook run cannot give",
            at(&dir, "nb.ipynb", "input(")
        )
    );
    assert_eq!(outcome(&ran, "nb.ipynb#c2").0, "PASS");
}

#[test]
fn a_malformed_notebook_is_a_usage_error_at_its_line_and_column() {
    let dir = Dir::new();
    let text =
        notebook(&passing()).replacen("\"cell_type\": \"code\",", "\"cell_type\": \"code\"", 1);
    dir.write("broken.ipynb", text);
    // The comma missing at the end of line 12: the next key, on line 13, is unexpected.
    dir.lessonprobe()
        .args(["doc", "broken.ipynb"])
        .stderr("lessonprobe: broken.ipynb:13:4: not a Jupyter notebook: expected `,` or `}`\n")
        .status(2);
}

#[test]
fn run_only_outputs_compare_only_the_cells_that_ask() {
    let Some(python) = python() else { return };
    let mut cells = passing();
    cells[0].outputs = stdout("4 rows\n");
    cells[1].outputs = json!([{"data": {"text/plain": ["7"]}, "execution_count": 2,
        "metadata": {}, "output_type": "execute_result"}]);
    cells[1].tags = &["nbval-check-output"];
    let (dir, file) = with_notebook(&cells);
    dir.write("lessonprobe.toml", "[notebooks]\noutputs = \"run-only\"\n");
    let ran = doc(&dir, &file, &python).failure();
    assert_eq!(
        verdicts(&ran),
        pairs(&[
            ("nb.ipynb#c1", "PASS"),
            ("nb.ipynb#c2", "FAIL"),
            ("nb.ipynb#c3", "PASS"),
            ("nb.ipynb#c4", "PASS"),
        ])
    );
    // The command line over the course: every stored output compared.
    let ran = doc(&dir, &file, &python)
        .args(["--notebook-outputs", "compared"])
        .failure();
    assert_eq!(outcome(&ran, "nb.ipynb#c1").0, "FAIL");
    // And the other way: run-only over a course that compares.
    dir.write("lessonprobe.toml", "");
    let ran = doc(&dir, &file, &python)
        .args(["--notebook-outputs", "run-only"])
        .failure();
    assert_eq!(outcome(&ran, "nb.ipynb#c1").0, "PASS");
    assert_eq!(outcome(&ran, "nb.ipynb#c2").0, "FAIL");
}

#[test]
fn doc_verifies_a_folder_of_notebooks_and_a_course_finds_its_numbered_notebook_lesson() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    dir.write("lessons/data.txt", "x\n");
    dir.write("lessons/35-explore.ipynb", notebook(&passing()));
    let ran = doc(&dir, Path::new("lessons"), &python).success();
    assert_eq!(outcomes(&ran).len(), 4);
    let ran = dir
        .lessonprobe()
        .args(["--python", &python, "--lesson", "35", "--format", "json"])
        .within(Duration::from_secs(120))
        .success();
    assert_eq!(
        verdicts(&ran),
        pairs(&[
            ("35-explore.ipynb#c1", "PASS"),
            ("35-explore.ipynb#c2", "PASS"),
            ("35-explore.ipynb#c3", "PASS"),
            ("35-explore.ipynb#c4", "PASS"),
        ])
    );
    assert_eq!(
        ran.json()["outcomes"][0]["file"],
        "lessons/35-explore.ipynb"
    );
}

#[test]
fn nbvals_own_test_notebooks_get_the_verdicts_nbval_gives_them() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    copy_dir(&repo().join("tests/fixtures/nbval"), dir.path());
    let ran = doc(&dir, Path::new("."), &python).failure();
    // nbval 0.11.0 fails exactly these two cells (ORIGIN.md); every other code cell passes.
    let failing = [
        "test-exceptions-fail-storedmismatch.ipynb#0",
        "test-stream-fail-missingoutput.ipynb#1",
    ];
    let all = verdicts(&ran);
    assert_eq!(all.len(), 17, "{all:?}");
    for (id, verdict) in &all {
        let want = if failing.contains(&id.as_str()) {
            "FAIL"
        } else {
            "PASS"
        };
        assert_eq!(verdict, want, "{id}");
    }
}

#[test]
fn a_course_whose_interpreter_lacks_the_kernel_has_one_preflight_error_with_the_fix() {
    let dir = Dir::new();
    dir.write("lessons/35-explore.ipynb", notebook(&passing()));
    // An interpreter with nothing installed.
    let venv = dir.path().join("bare");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 runs");
    assert!(made.success());
    let bare = venv.join("bin/python").display().to_string();
    let ran = dir
        .lessonprobe()
        .args(["--python", &bare, "--lesson", "35"])
        .stdout_has("ERROR   environment: ")
        .stdout_has(format!(
            " lacks ipykernel, nbclient, which notebook lessons need for their Jupyter kernel — {bare} -m pip install ipykernel nbclient"
        ))
        .failure();
    let text = ran.text();
    assert_eq!(
        text.matches("needs jupyter kernel, which the preflight found broken")
            .count(),
        4,
        "{text}"
    );
}

/// The source of a cell that writes its kernel's pid to `pid` and sleeps ten minutes.
fn sleeping(pid: &Path) -> &'static [&'static str] {
    one_line(format!(
        "import os, time; open({:?}, 'w').write(str(os.getpid())); time.sleep(600)",
        pid.display()
    ))
}

/// A cell's source of the one line `line` (a test's cells live as long as the test).
fn one_line(line: String) -> &'static [&'static str] {
    let line: &'static str = Box::leak(line.into_boxed_str());
    Box::leak(vec![line].into_boxed_slice())
}

/// A folder with a notebook whose second cell writes its kernel's pid to `kernel.pid` and
/// sleeps, and that file's path.
fn with_a_sleeping_kernel() -> (Dir, PathBuf) {
    let dir = Dir::new();
    let pid = dir.path().join("kernel.pid");
    let cells = [code(&["x = 1"], json!([])), code(sleeping(&pid), json!([]))];
    dir.write("nb.ipynb", notebook(&cells));
    (dir, pid)
}

/// The pid the sleeping cell wrote, once it has.
#[track_caller]
fn kernel_pid(pid: &Path) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match std::fs::read_to_string(pid) {
            Ok(text) if !text.is_empty() => return text,
            _ if std::time::Instant::now() > until => panic!("the sleeping cell never ran"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The process `pid` goes within a few seconds (a kernel notices its driver's end).
#[track_caller]
fn assert_goes(pid: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::fs::metadata(format!("/proc/{pid}")).is_ok() && std::time::Instant::now() < until {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if status.contains("State:\tZ") {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_gone(pid);
}

#[test]
fn ctrl_c_while_a_cell_runs_leaves_no_kernel_running() {
    let Some(python) = python() else { return };
    let (dir, pid) = with_a_sleeping_kernel();
    let mut running = doc(&dir, Path::new("nb.ipynb"), &python).spawn();
    let kernel = kernel_pid(&pid);
    running.signal(libc::SIGINT);
    let ran = running.within(Duration::from_secs(20)).status(130);
    assert_gone(kernel.trim());
    let (verdict, message) = outcome(&ran, "nb.ipynb#c2");
    assert_eq!(verdict, "ERROR");
    assert!(message.contains("interrupted"), "{message}");
}

#[test]
fn a_second_ctrl_c_exits_at_once_and_the_kernel_still_goes() {
    let Some(python) = python() else { return };
    let (dir, pid) = with_a_sleeping_kernel();
    let mut running = doc(&dir, Path::new("nb.ipynb"), &python).spawn();
    let kernel = kernel_pid(&pid);
    running.signal(libc::SIGINT);
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(5)).status(130);
    assert_goes(kernel.trim());
}

#[test]
fn a_failing_cell_is_annotated_at_its_line_and_select_and_last_failed_take_cells_by_name() {
    let Some(python) = python() else { return };
    let mut cells = passing();
    cells[1].outputs = json!([{"data": {"text/plain": ["7"]}, "execution_count": 2,
        "metadata": {}, "output_type": "execute_result"}]);
    let (dir, file) = with_notebook(&cells);
    let summary = dir.path().join("summary.md");
    let line = at(&dir, "nb.ipynb", "sum(rows)");
    let line = line.trim_start_matches("nb.ipynb:");
    dir.lessonprobe()
        .arg("doc")
        .arg(&file)
        .args(["--python", &python])
        .in_github_actions(&summary)
        .env("GITHUB_WORKSPACE", dir.path())
        .stdout_has(format!("::error file=nb.ipynb,line={line},"))
        .failure();
    // Only the failed cell is reported again; the cells before it still run, for its state.
    let ran = doc(&dir, &file, &python).arg("--last-failed").failure();
    assert_eq!(verdicts(&ran), pairs(&[("nb.ipynb#c2", "FAIL")]));
    let ran = doc(&dir, &file, &python)
        .args(["--select", "nb.ipynb#c4"])
        .success();
    assert_eq!(verdicts(&ran), pairs(&[("nb.ipynb#c4", "PASS")]));
}

#[test]
fn partition_never_splits_a_notebooks_cells() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    dir.write("lessons/data.txt", "x\n");
    dir.write("lessons/35-explore.ipynb", notebook(&passing()));
    let shards: Vec<usize> = (1..=3)
        .map(|k| {
            let ran = dir
                .lessonprobe()
                .args(["--python", &python, "--lesson", "35", "--format", "json"])
                .args(["--partition", &format!("{k}/3")])
                .within(Duration::from_secs(120))
                .success();
            outcomes(&ran).len()
        })
        .collect();
    let mut sorted = shards.clone();
    sorted.sort();
    assert_eq!(sorted, [0, 0, 4], "cells per shard: {shards:?}");
}

const MYST: &str = "---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  name: python3
---

# Explore

```{code-cell} ipython3
rows = [1, 2, 3]
print(len(rows), 'rows')
```

Text between the cells.

```{code-cell} ipython3
:tags: [raises-exception]

rows[10]
```

```{code-cell} ipython3
total = sum(rows) / 0
```
";

#[test]
fn a_myst_notebook_in_markdown_runs_its_code_cells_in_a_kernel() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    dir.write("explore.md", MYST);
    let ran = doc(&dir, Path::new("explore.md"), &python).failure();
    assert_eq!(
        verdicts(&ran),
        pairs(&[
            ("explore.md#1", "PASS"),
            ("explore.md#3", "PASS"),
            ("explore.md#4", "FAIL"),
        ])
    );
    let (_, message) = outcome(&ran, "explore.md#4");
    assert_eq!(
        message,
        format!(
            "{}: cell 4 raised ZeroDivisionError: division by zero at line 1 of the cell",
            at(&dir, "explore.md", "total = ")
        )
    );
}

#[test]
fn bless_writes_a_failing_cells_produced_outputs_and_changes_nothing_else() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let mut cells = passing();
    cells[0].outputs = stdout("4 rows\n");
    dir.write("lessons/data.txt", "x\n");
    let file = dir.write("lessons/35-explore.ipynb", notebook(&cells));
    dir.lessonprobe()
        .args(["bless", "--lesson", "35", "--python", &python])
        .within(Duration::from_secs(120))
        .success();
    // Byte for byte the notebook whose stored output is the one the cell prints.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        notebook(&passing())
    );
    dir.lessonprobe()
        .args(["--lesson", "35", "--python", &python])
        .within(Duration::from_secs(120))
        .success();
}

#[test]
fn a_notebook_over_its_own_limit_is_stopped_at_the_cell_it_was_running() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let pid = dir.path().join("kernel.pid");
    let cells = [code(&["x = 1"], json!([])), code(sleeping(&pid), json!([]))];
    let mut nb: Value = serde_json::from_str(&notebook(&cells)).unwrap();
    nb["metadata"]["lessonprobe"] = json!({"notebook_timeout": "3s"});
    dir.write("nb.ipynb", serde_json::to_string_pretty(&nb).unwrap());
    let ran = doc(&dir, Path::new("nb.ipynb"), &python).failure();
    assert_eq!(outcome(&ran, "nb.ipynb#c1").0, "PASS");
    let (verdict, message) = outcome(&ran, "nb.ipynb#c2");
    assert_eq!(verdict, "ERROR");
    assert_eq!(
        message,
        format!(
            "{}: the notebook exceeded its limit of 3s during cell 2; the kernel was killed",
            at(&dir, "nb.ipynb", "time.sleep(600)")
        )
    );
    assert_gone(kernel_pid(&pid).trim());
}

/// The sample course's notebook lesson, in the course's lessons folder.
const SAMPLE_NOTEBOOK: &str = "lessons/36-explore-audit.ipynb";

/// `lessonprobe --lesson 36 --format json` over the course `course`.
fn sample_lesson_36(course: &Path, python: &str) -> Test {
    lessonprobe()
        .arg("--course")
        .arg(course)
        .args(["--python", python, "--lesson", "36", "--format", "json"])
        .within(Duration::from_secs(180))
}

#[test]
fn the_sample_courses_notebook_lesson_fails_at_the_cell_whose_stored_output_changed() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    let course = dir.path().join("course");
    copy_dir(&repo().join("examples/ticketflow-course"), &course);
    let ran = sample_lesson_36(&course, &python).success();
    let all = outcomes(&ran);
    assert_eq!(all.len(), 6, "{all:?}");
    assert!(all.iter().all(|o| o.verdict == "PASS"), "{all:?}");

    // The query's claim "12 rows" made 13: that cell alone fails, at its first source line.
    let file = course.join(SAMPLE_NOTEBOOK);
    let text = std::fs::read_to_string(&file).unwrap();
    let stored = "\"text/plain\": [\n       \"12\"\n      ]";
    assert_eq!(text.matches(stored).count(), 1, "{text}");
    std::fs::write(&file, text.replace(stored, &stored.replace("12", "13"))).unwrap();
    let ran = sample_lesson_36(&course, &python).failure();
    let line = 1 + text
        .lines()
        .position(|l| l.contains("\"import sqlite3\\n\""))
        .unwrap();
    let (verdict, message) = outcome(&ran, "36-explore-audit.ipynb#rows");
    assert_eq!(verdict, "FAIL");
    let here = format!("{}:{line}", course.join(SAMPLE_NOTEBOOK).display());
    assert!(
        message.starts_with(&format!(
            "{here}: cell 4 produced other outputs than the notebook stores"
        )),
        "{message}"
    );
    let failed: Vec<String> = outcomes(&ran)
        .into_iter()
        .filter(|o| o.verdict != "PASS")
        .map(|o| o.id)
        .collect();
    assert_eq!(failed, ["36-explore-audit.ipynb#rows"]);
}

/// The text of each `<pre>` of an HTML report, by its class, as an HTML reader sees it (each
/// `<span>` of a diff a line).
fn pre_texts(page: &str) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(page);
    reader.config_mut().check_end_names = false;
    let mut out: Vec<(String, String)> = Vec::new();
    let mut open = false;
    loop {
        match reader.read_event().expect("readable HTML") {
            Event::Start(e) if e.name().as_ref() == b"pre" => {
                let class = e
                    .try_get_attribute("class")
                    .ok()
                    .flatten()
                    .map(|a| String::from_utf8_lossy(&a.value).into_owned())
                    .unwrap_or_default();
                out.push((class, String::new()));
                open = true;
            }
            Event::End(e) if e.name().as_ref() == b"pre" => open = false,
            Event::End(e) if open && e.name().as_ref() == b"span" => {
                if let Some(last) = out.last_mut() {
                    last.1.push('\n');
                }
            }
            Event::Text(t) if open => {
                if let Some(last) = out.last_mut() {
                    last.1.push_str(&String::from_utf8_lossy(&t));
                }
            }
            Event::GeneralRef(r) if open => {
                let name = String::from_utf8_lossy(&r).into_owned();
                let c = quick_xml::escape::resolve_xml_entity(&name).unwrap_or("?");
                if let Some(last) = out.last_mut() {
                    last.1.push_str(c);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

#[test]
fn an_html_report_shows_a_failing_cells_source_with_its_place_and_its_diff() {
    let Some(python) = python() else { return };
    let mut cells = passing();
    cells[0].outputs = stdout("4 rows\n");
    let (dir, file) = with_notebook(&cells);
    doc(&dir, &file, &python)
        .args(["--html", "page.html"])
        .failure();
    let page = dir.read("page.html");
    let line = at(&dir, "nb.ipynb", "rows = [1, 2, 3]");
    let line = line.trim_start_matches("nb.ipynb:");
    assert!(
        page.contains(&format!("source (nb.ipynb cell 1 line {line}):")),
        "{page}"
    );
    let pres = pre_texts(&page);
    let source: Vec<&str> = pres
        .iter()
        .filter(|(class, _)| class == "source")
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(
        source,
        ["rows = [1, 2, 3]\nprint(len(rows), 'rows')"],
        "{pres:?}"
    );
    let diff = pres
        .iter()
        .find(|(class, _)| class == "diff")
        .map(|(_, text)| text.as_str())
        .unwrap_or_default();
    assert!(diff.contains("-4 rows\n+3 rows\n"), "{diff}");
}

/// A course of one notebook lesson (35) whose first cell prints today's date and time, stored
/// as printed on another day, with `toml` as its configuration.
fn dated_course(toml: &str) -> Dir {
    let dir = Dir::new();
    dir.write("lessonprobe.toml", toml);
    dir.write(
        "nbval-sanitize.cfg",
        std::fs::read(repo().join("tests/fixtures/nbval/sanitize_defaults.cfg")).unwrap(),
    );
    let cells = [code(
        &[
            "import datetime",
            "print(datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S'))",
        ],
        stdout("2020-01-01 10:00:00\n"),
    )];
    dir.write("lessons/35-dated.ipynb", notebook(&cells));
    dir
}

fn lesson_35(dir: &Dir, python: &str) -> Test {
    dir.lessonprobe()
        .args(["--python", python, "--lesson", "35", "--format", "json"])
        .within(Duration::from_secs(120))
}

#[test]
fn an_nbval_sanitize_file_given_by_the_course_applies_to_stored_and_produced_outputs() {
    let Some(python) = python() else { return };
    let given = "[notebooks]\nsanitize = \"nbval-sanitize.cfg\"\n";
    let dir = dated_course(given);
    let ran = lesson_35(&dir, &python).success();
    assert_eq!(verdicts(&ran), pairs(&[("35-dated.ipynb#c1", "PASS")]));
    // Without it the stored date is a claim the run contradicts.
    let dir = dated_course("");
    let ran = lesson_35(&dir, &python).failure();
    assert_eq!(verdicts(&ran), pairs(&[("35-dated.ipynb#c1", "FAIL")]));

    let dir = dated_course(given);
    dir.write("nbval-sanitize.cfg", "[dates]\nregex: (\\d+\nreplace: N\n");
    lesson_35(&dir, &python)
        .stderr_has("nbval-sanitize.cfg:2: \"(\\\\d+\" is not a valid regular expression")
        .status(2);
    dir.write(
        "nbval-sanitize.cfg",
        "[dates]\nregex: x\nreplace: y\n\n[times]\n",
    );
    lesson_35(&dir, &python)
        .stderr_has("nbval-sanitize.cfg:5: section [times] has no `regex:` line")
        .status(2);
    std::fs::remove_file(dir.join("nbval-sanitize.cfg")).unwrap();
    lesson_35(&dir, &python)
        .stderr_has(
            "lessonprobe.toml:2:12: [notebooks] sanitize file \"nbval-sanitize.cfg\" does not exist in the course",
        )
        .status(2);
}

#[test]
fn a_course_notebook_imports_the_courses_code_from_a_copy_and_writes_nothing_into_the_course() {
    let Some(python) = python() else { return };
    let dir = Dir::new();
    dir.write("lessonprobe.toml", "");
    dir.write("project/helper.py", "ROWS = 3\n");
    let cells = [
        code(
            &["import os, helper", "print(helper.ROWS, 'rows')"],
            stdout("3 rows\n"),
        ),
        code(
            &[
                "beside = os.path.join(os.path.dirname(helper.__file__), 'beside.txt')",
                "open(beside, 'w').write('x')",
                "open('mine.txt', 'w').write('y')",
                "import py_compile",
                "py_compile.compile(helper.__file__)",
                "print(os.path.exists(beside), os.path.exists('mine.txt'))",
            ],
            stdout("True True\n"),
        ),
    ];
    dir.write("lessons/35-explore.ipynb", notebook(&cells));
    let course = |dir: &Dir| {
        [
            snapshot(&dir.join("project")),
            snapshot(&dir.join("lessons")),
        ]
    };
    let before = course(&dir);
    let ran = lesson_35(&dir, &python).arg("--no-junit").success();
    assert_eq!(
        verdicts(&ran),
        pairs(&[
            ("35-explore.ipynb#c1", "PASS"),
            ("35-explore.ipynb#c2", "PASS")
        ])
    );
    assert_eq!(course(&dir), before);
}

#[test]
fn a_notebook_lesson_under_watch_reruns_when_edited_and_not_when_it_writes_a_file() {
    let Some(python) = python() else { return };
    let (dir, outside) = (Dir::new(), Dir::new());
    dir.write("lessonprobe.toml", "");
    let mut cells = vec![
        code(&["print(3, 'rows')"], stdout("3 rows\n")),
        code(&["_ = open('written.txt', 'w').write('x')"], json!([])),
    ];
    dir.write("lessons/35-explore.ipynb", notebook(&cells));
    std::fs::create_dir_all(outside.join("tmp")).unwrap();
    let mut running = dir
        .lessonprobe()
        .args([
            "--python", &python, "--lesson", "35", "--jobs", "1", "--watch",
        ])
        .env("TMPDIR", outside.join("tmp"))
        .env("XDG_CACHE_HOME", outside.join("cache"))
        .spawn();
    let waits = |e: &str| e.matches("waiting for a change").count();
    let step = Duration::from_secs(120);
    let report = dir.join("reports/lesson-35.xml");
    running.wait_for_stderr("the first run", step, |e| waits(e) == 1);
    let junit = |path: &Path| -> Vec<String> {
        lessonprobe_testkit::verdicts(&parse_junit(path))
            .into_iter()
            .map(|(_, verdict)| verdict)
            .collect()
    };
    assert_eq!(junit(&report), ["PASS", "PASS"]);
    // The file the notebook wrote is in its copy: nothing changed in the course.
    std::thread::sleep(Duration::from_secs(3));
    let stderr = running.stderr_so_far();
    assert_eq!(
        waits(&stderr),
        1,
        "the notebook's own file restarted the watch:\n{stderr}"
    );
    assert!(!dir.join("lessons/written.txt").exists());

    cells[0].outputs = stdout("4 rows\n");
    dir.write("lessons/35-explore.ipynb", notebook(&cells));
    running.wait_for_stderr("the rerun", step, |e| waits(e) == 2);
    let stderr = running.stderr_so_far();
    assert!(
        stderr.contains("run 2, after a change to lessons/35-explore.ipynb"),
        "{stderr}"
    );
    assert_eq!(junit(&report), ["FAIL", "PASS"]);
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(30)).status(130);
}
