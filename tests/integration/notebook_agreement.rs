//! Notebooks others wrote, through the binary in a real kernel: each code cell's verdict equals
//! the one nbval 0.11.0 gave it (the expected verdicts below are nbval's, from its run; see
//! `tests/fixtures/nbmake/ORIGIN.md`), compared and in run-only mode against `--nbval-lax`; after
//! a cell over its limit too (`tests/fixtures/nbmake-timeout/ORIGIN.md`).

use std::path::Path;
use std::time::Duration;

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;
use serde_json::Value;

/// nbval's verdict of each code cell (numbered among code cells, as nbval names them) of
/// nbmake's test notebooks; the same with and without `--nbval-lax` (they store no outputs).
const NBMAKE: &[(&str, &[&str])] = &[
    ("empty.ipynb", &["PASS"]),
    // Tagged `skip-execution`, an nbmake tag nbval does not know: the cell runs and raises.
    ("ignore_tag.ipynb", &["FAIL", "PASS"]),
    // nbmake's `mock` metadata is nbmake's own: the asserting cell fails under nbval.
    ("mock.ipynb", &["PASS", "FAIL"]),
    ("post_cell_execute.ipynb", &["PASS", "FAIL"]),
    ("post_cell_execute_error.ipynb", &["PASS"]),
    ("post_cell_execute_masked_error.ipynb", &["FAIL"]),
    ("raises_tag.ipynb", &["PASS", "PASS"]),
];

/// nbval's verdicts under `--nbval-lax` of its own test notebooks (`tests/fixtures/nbval`):
/// every code cell passes, the mismatching outputs no longer compared.
const NBVAL_LAX: &[(&str, &[&str])] = &[
    ("pass-exceptions.ipynb", &["PASS"; 6]),
    ("pass-minimal-example.ipynb", &["PASS"; 2]),
    ("test-exceptions-fail-storedmismatch.ipynb", &["PASS"; 2]),
    ("test-stream-fail-missingoutput.ipynb", &["PASS"; 3]),
    (
        "test-stream-pass-missing-unexecuted-output.ipynb",
        &["PASS"; 4],
    ),
];

/// `lessonprobe doc . --format json` (with `extra`, exiting `code`) over a copy of `fixtures`:
/// each notebook's code cells' verdicts, in order, by file name.
fn verdicts_of(
    fixtures: &str,
    python: &str,
    extra: &[&str],
    code: i32,
) -> Vec<(String, Vec<String>)> {
    let dir = Dir::new();
    copy_dir(&repo().join(fixtures), dir.path());
    let ran = dir
        .lessonprobe()
        .args([
            "doc",
            ".",
            "--python",
            python,
            "--format",
            "json",
            "--no-junit",
        ])
        .args(extra)
        .within(Duration::from_secs(180))
        .status(code);
    let outcomes = ran.json()["outcomes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // Shown with a failed assertion: why a cell was not judged.
    for o in outcomes.iter().filter(|o| o["verdict"] == "ERROR") {
        eprintln!("{} cell {}: {}", o["file"], o["cell"], o["message"]);
    }
    let mut files: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o["file"].as_str().map(str::to_owned))
        .collect();
    files.sort();
    files.dedup();
    files
        .into_iter()
        .map(|file| {
            let positions = code_positions(&dir.path().join(&file));
            let mut cells: Vec<(usize, String)> = outcomes
                .iter()
                .filter(|o| o["file"] == file.as_str())
                .map(|o| {
                    let index = o["cell"].as_u64().expect("a cell index") as usize;
                    let verdict = o["verdict"].as_str().unwrap_or("").to_owned();
                    (positions[&index], verdict)
                })
                .collect();
            cells.sort();
            let name = Path::new(&file).file_name().unwrap().to_string_lossy();
            (name.into_owned(), cells.into_iter().map(|c| c.1).collect())
        })
        .collect()
}

/// Each code cell's index among all cells -> its place among the code cells (nbval's number).
fn code_positions(notebook: &Path) -> std::collections::HashMap<usize, usize> {
    let text = std::fs::read_to_string(notebook).unwrap();
    let cells: Value = serde_json::from_str::<Value>(&text).unwrap()["cells"].clone();
    let code = cells.as_array().unwrap().iter().enumerate();
    code.filter(|(_, c)| c["cell_type"] == "code")
        .enumerate()
        .map(|(position, (index, _))| (index, position))
        .collect()
}

fn expected(table: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    table
        .iter()
        .map(|(file, cells)| {
            let cells = cells.iter().map(|v| (*v).to_owned()).collect();
            ((*file).to_owned(), cells)
        })
        .collect()
}

#[test]
fn nbmakes_test_notebooks_get_nbvals_verdicts_compared_and_run_only() {
    let Some(python) = python() else { return };
    let want = expected(NBMAKE);
    assert_eq!(verdicts_of("tests/fixtures/nbmake", &python, &[], 1), want);
    let run_only = ["--notebook-outputs", "run-only"];
    assert_eq!(
        verdicts_of("tests/fixtures/nbmake", &python, &run_only, 1),
        want
    );
}

#[test]
fn nbvals_test_notebooks_in_run_only_mode_get_nbval_laxs_verdicts() {
    let Some(python) = python() else { return };
    let run_only = ["--notebook-outputs", "run-only"];
    assert_eq!(
        verdicts_of("tests/fixtures/nbval", &python, &run_only, 0),
        expected(NBVAL_LAX)
    );
}

/// nbval's verdicts of nbmake's `import_errs.ipynb` with a 3 s limit per cell: FAIL, FAIL (the
/// cell over its limit), then XFAIL and XPASS, the later cells run in the interrupted kernel
/// (an expected failure that failed, one that passed). lessonprobe gives the cell over its
/// limit an ERROR naming it (by design), then runs the later cells in the same kernel: each
/// fails or passes as nbval's XFAIL and XPASS say they did.
const NBMAKE_TIMEOUT: &[(&str, &[&str])] =
    &[("import_errs.ipynb", &["FAIL", "ERROR", "FAIL", "PASS"])];

#[test]
fn the_cells_after_one_over_its_limit_run_in_the_interrupted_kernel_as_under_nbval() {
    let Some(python) = python() else { return };
    let want = expected(NBMAKE_TIMEOUT);
    // Twice in each mode, two runs at once: the timed-out cell's IOPub reader, had it been left
    // running beside the next cell's, took that cell's error one run in fifteen or so on a busy
    // machine (the import of a missing module then passed); more runs at once make such a race
    // show.
    for round in 1..=2 {
        std::thread::scope(|runs| {
            for mode in ["compared", "run-only"] {
                let (python, want) = (&python, &want);
                runs.spawn(move || {
                    let extra = ["--timeout", "3s", "--notebook-outputs", mode];
                    let got = verdicts_of("tests/fixtures/nbmake-timeout", python, &extra, 1);
                    assert_eq!(&got, want, "{mode}, round {round}");
                });
            }
        });
    }
}
