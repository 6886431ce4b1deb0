//! The student's loop through the built binary: `--max-fail`/`--fail-fast` leave the rest NOT
//! RUN, `--last-failed` reruns what failed, `--retries` makes a probe that fails then passes
//! FLAKY, and `--partition K/N` splits a selection into shards that together run it once; in
//! the terminal, JSON and JUnit alike, and always agreeing with the exit code.

use std::collections::BTreeSet;
use std::path::Path;

use lessonprobe_testkit::*;
use quick_junit::{NonSuccessKind, Report, TestCaseStatus};

/// Lesson 93: one pass, then three failures that pass once `fixed-ID` exists, then a pass.
fn loop_manifest() -> Manifest {
    let fails_until_fixed = |id: &str, script: &str| {
        Probe::script(id, &format!("{script}test -f fixed-{id}")).name("fails")
    };
    Manifest::lesson(93, "loop")
        .probe(Probe::command("L-PASS", ["echo", "ok"]).name("passes"))
        .probe(fails_until_fixed("L-F1", "echo f1-output; "))
        .probe(fails_until_fixed("L-F2", ""))
        .probe(fails_until_fixed("L-F3", ""))
        .probe(Probe::command("L-PASS2", ["echo", "ok"]).name("passes"))
}

fn loop_course() -> Dir {
    loop_manifest().in_new_dir("93-loop.toml")
}

/// `(id, verdict)` of every outcome of a JSON report.
fn json_verdicts(doc: &serde_json::Value) -> Vec<(String, String)> {
    doc["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["id"].as_str().unwrap().to_owned(),
                o["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn max_fail_1_reports_one_fail_and_the_rest_not_run_in_every_format() {
    let dir = loop_course();
    let xml = dir.join("r.xml");
    let ran = dir
        .lessonprobe()
        .args([
            "--lesson",
            "93",
            "--max-fail",
            "1",
            "--jobs",
            "1",
            "--format",
            "json",
        ])
        .arg("--junit")
        .arg(&xml)
        .failure();
    let doc = ran.json();
    assert_eq!(
        json_verdicts(&doc),
        pairs(&[
            ("L-PASS", "PASS"),
            ("L-F1", "FAIL"),
            ("L-F2", "NOT_RUN"),
            ("L-F3", "NOT_RUN"),
            ("L-PASS2", "NOT_RUN"),
        ])
    );
    assert_eq!(doc["counts"]["failed"], 1);
    assert_eq!(doc["counts"]["not_run"], 3);
    assert_eq!(doc["counts"]["passed"], 1);
    assert_eq!(doc["succeeded"], false);
    assert!(doc["outcomes"][2]["message"]
        .as_str()
        .unwrap()
        .contains("--max-fail 1 was reached"));
    validate_junit(&xml);
    let report = parse_junit(&xml);
    assert_eq!(
        verdicts(&report),
        pairs(&[
            ("L-PASS passes", "PASS"),
            ("L-F1 fails", "FAIL"),
            ("L-F2 fails", "NOT RUN"),
            ("L-F3 fails", "NOT RUN"),
            ("L-PASS2 passes", "NOT RUN"),
        ])
    );
    assert_eq!(report.test_suites[0].failures, 1);

    // The terminal, with --fail-fast, and the xunit1 family.
    let ran = dir
        .lessonprobe()
        .args(["--lesson", "93", "--fail-fast", "--jobs", "1"])
        .args(["--junit-family", "xunit1", "--junit"])
        .arg(&xml)
        .stdout_matches(format!(
            "PASS    [..] lesson 93 L-PASS passes
FAIL    [..] lesson 93 L-F1 fails
...
NOT RUN [..] lesson 93 L-F2 fails: --max-fail 1 was reached, so it never started
NOT RUN [..] lesson 93 L-F3 fails: --max-fail 1 was reached, so it never started
NOT RUN [..] lesson 93 L-PASS2 passes: --max-fail 1 was reached, so it never started

failures (1), each rerun alone by its command:
FAIL    checkpoints/93-loop.toml:{} lesson 93 L-F1 fails
    [..]lessonprobe --lesson 93 --select L-F1

JUnit report: [..]
1 passed, 1 failed, 0 errors, 0 skipped, 0 pending, 3 not run in [..]; FAIL: L-F1; NOT RUN: L-F2, L-F3, L-PASS2
",
            line_of(&loop_manifest().to_string(), "id = \"L-F1\"")
        ))
        .failure();
    assert_eq!(ran.stdout.matches("FAIL    [").count(), 1, "{}", ran.stdout);
    validate_against(&xml, "junit-10-xunit1.xsd");
    assert_eq!(verdicts(&parse_junit(&xml))[4].1, "NOT RUN");
}

#[test]
fn last_failed_reruns_what_failed_says_when_nothing_did_and_runs_all_without_state() {
    let dir = loop_course();
    let xml = dir.join("r.xml");
    let last_failed = || {
        dir.lessonprobe()
            .args(["--lesson", "93", "--last-failed", "--format", "json"])
            .arg("--junit")
            .arg(&xml)
    };
    let first = last_failed()
        .stderr_has("no earlier run of this course and selection is recorded; running all 5 probes")
        .failure();
    assert_eq!(json_verdicts(&first.json()).len(), 5);
    assert_eq!(
        dir.read(".lessonprobe/.gitignore"),
        "*\n",
        "the state is kept out of git"
    );
    // What failed, read back from the JUnit report.
    let failed: BTreeSet<String> = verdicts(&parse_junit(&xml))
        .into_iter()
        .filter(|(_, v)| v == "FAIL")
        .map(|(name, _)| name.split(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");

    // L-F1 is fixed: the rerun runs exactly the three, and L-F1 passes.
    dir.write("fixed-L-F1", "");
    let second = last_failed()
        .stderr_has("--last-failed: running the 3 of 5 probes that failed in the previous run")
        .failure();
    let rerun = json_verdicts(&second.json());
    let ids: BTreeSet<String> = rerun.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, failed);
    assert!(rerun.contains(&("L-F1".to_owned(), "PASS".to_owned())));
    validate_junit(&xml);
    assert_eq!(parse_junit(&xml).tests, 3);

    // The rest are fixed: the two left run, then nothing is left to run.
    dir.write("fixed-L-F2", "");
    dir.write("fixed-L-F3", "");
    let third = dir
        .lessonprobe()
        .args(["--lesson", "93", "--last-failed", "--format", "json"])
        .stderr_has("running the 2 of 5 probes")
        .success();
    assert_eq!(
        json_verdicts(&third.json()),
        pairs(&[("L-F2", "PASS"), ("L-F3", "PASS")])
    );
    dir.lessonprobe()
        .args(["--lesson", "93", "--last-failed", "--junit"])
        .arg(&xml)
        .stderr_has("--last-failed: no probe failed in the previous run of this course and selection; nothing to run")
        .stdout_has("0 passed, 0 failed, 0 errors, 0 skipped, 0 pending in ")
        .success();
    validate_junit(&xml);
    assert_eq!(parse_junit(&xml).tests, 0);

    // Another selection has a state of its own.
    dir.lessonprobe()
        .args(["--lesson", "93", "--select", "L-F*", "--last-failed"])
        .stderr_has("running all 3 probes")
        .success();
}

/// Lesson 94: a command that fails on its first attempt (leaving a marker) and passes after,
/// one that always fails, counting its attempts in a file, and one its manifest retries.
fn retries_course() -> Dir {
    let flaky = "if [ -f marker ]; then echo second-attempt; else touch marker; echo first-attempt-output; echo first-attempt-err >&2; exit 1; fi";
    let own = "if [ -f own-marker ]; then exit 0; else touch own-marker; exit 1; fi";
    Manifest::lesson(94, "retries")
        .probe(
            Probe::script("R-FLAKY", flaky)
                .name("second-time-lucky")
                .expect("second-attempt"),
        )
        .probe(Probe::script("R-ALWAYS", "echo x >> attempts; exit 1").name("never-lucky"))
        .probe(
            Probe::script("R-OWN", own)
                .name("manifest-retries")
                .retries(1),
        )
        .in_new_dir("94-retries.toml")
}

fn reset(dir: &Dir) {
    for file in ["marker", "own-marker", "attempts"] {
        let _ = std::fs::remove_file(dir.join(file));
    }
}

/// The JUnit case of a FLAKY probe: a pass with its failed attempt kept, valid in both families.
fn assert_flaky_junit(xml: &Path, strict: bool) {
    validate_junit(xml);
    let report = parse_junit(xml);
    let suite = &report.test_suites[0];
    let flaky = case(&report, "R-FLAKY second-time-lucky");
    let runs = match &flaky.status {
        TestCaseStatus::Success { flaky_runs } if !strict => flaky_runs,
        TestCaseStatus::NonSuccess {
            kind: NonSuccessKind::Failure,
            message,
            reruns,
            ..
        } if strict => {
            let message = message.as_deref().unwrap_or("");
            assert!(
                message.starts_with("FLAKY under --strict: passed on attempt 2 of 2"),
                "{message}"
            );
            &reruns.runs
        }
        other => panic!("R-FLAKY is {other:?}"),
    };
    assert_eq!(runs.len(), 1);
    let first = runs[0].system_out.as_deref().unwrap_or("");
    assert!(
        first.contains("first-attempt-output") && first.contains("first-attempt-err"),
        "{first}"
    );
    assert_eq!(flaky.system_out.as_deref(), Some("second-attempt"));
    let err = flaky.system_err.as_deref().unwrap_or("");
    assert!(err.starts_with("FLAKY: passed on attempt 2 of 2"), "{err}");
    let property = |name: &str| {
        suite
            .properties
            .iter()
            .find(|p| p.name.as_str() == name)
            .map(|p| p.value.to_string())
    };
    assert_eq!(
        property("R-FLAKY second-time-lucky.verdict").as_deref(),
        Some("FLAKY")
    );
    assert_eq!(
        property("R-FLAKY second-time-lucky.attempts").as_deref(),
        Some("2")
    );
    let always = case(&report, "R-ALWAYS never-lucky");
    match &always.status {
        TestCaseStatus::NonSuccess {
            kind: NonSuccessKind::Failure,
            reruns,
            ..
        } => assert_eq!(reruns.runs.len(), 2),
        other => panic!("R-ALWAYS is {other:?}"),
    }
}

#[test]
fn a_probe_that_fails_then_passes_is_flaky_everywhere_and_fails_the_run_only_under_strict() {
    let dir = retries_course();
    let xml = dir.join("r.xml");
    // Each run of lesson 94 starts with no marker left and no attempt counted.
    let run = |args: &[&str]| {
        reset(&dir);
        dir.lessonprobe().args(["--lesson", "94"]).args(args)
    };
    // Exit code and JUnit without --strict, R-ALWAYS excluded so the run can succeed.
    run(&["--select", "R-FLAKY", "--retries", "2", "--junit"])
        .arg(&xml)
        .stdout_has("FLAKY   [")
        .stdout_has("attempt 1 of 2: FAIL: ")
        .stdout_has("0 pending, 1 flaky in ")
        .stdout_has("; FLAKY: R-FLAKY")
        .success();
    run(&["--retries", "2", "--format", "json", "--junit"])
        .arg(&xml)
        .failure();
    assert_flaky_junit(&xml, false);
    assert_eq!(
        dir.read("attempts").lines().count(),
        3,
        "R-ALWAYS ran 1 + 2 times"
    );

    let ran = run(&[
        "--retries",
        "2",
        "--format",
        "json",
        "--junit-family",
        "xunit1",
        "--junit",
    ])
    .arg(&xml)
    .failure();
    validate_against(&xml, "junit-10-xunit1.xsd");
    let doc = ran.json();
    assert_eq!(
        json_verdicts(&doc),
        pairs(&[
            ("R-FLAKY", "FLAKY"),
            ("R-ALWAYS", "FAIL"),
            ("R-OWN", "FLAKY")
        ])
    );
    assert_eq!(
        (
            doc["counts"]["flaky"].as_u64(),
            doc["counts"]["failed"].as_u64()
        ),
        (Some(2), Some(1))
    );
    let flaky = &doc["outcomes"][0];
    assert_eq!(flaky["attempts"], 2);
    assert_eq!(flaky["output"], "second-attempt\n");
    let kept = &flaky["failed_attempts"][0];
    assert_eq!(
        (kept["number"].as_u64(), kept["verdict"].as_str()),
        (Some(1), Some("FAIL"))
    );
    assert!(kept["output"]
        .as_str()
        .unwrap()
        .contains("first-attempt-output"));
    let always = &doc["outcomes"][1];
    assert_eq!(always["attempts"], 3);
    assert_eq!(always["failed_attempts"].as_array().unwrap().len(), 2);

    // Under --strict a FLAKY probe fails the run like a failure, in every format.
    run(&[
        "--select",
        "R-FLAKY",
        "--retries",
        "1",
        "--strict",
        "--junit",
    ])
    .arg(&xml)
    .stdout_has("; FLAKY under --strict: R-FLAKY")
    .failure();
    let report = parse_junit(&xml);
    assert_eq!(report.test_suites[0].failures, 1);
    let strict = run(&[
        "--select",
        "R-FLAKY",
        "--retries",
        "1",
        "--strict",
        "--format",
        "json",
    ])
    .failure();
    assert_eq!(strict.json()["succeeded"], false);
    run(&["--retries", "2", "--strict", "--junit"])
        .arg(&xml)
        .failure();
    assert_flaky_junit(&xml, true);

    // Without --retries only the manifest's own retries apply.
    let plain = run(&["--format", "json"]).failure();
    assert_eq!(
        json_verdicts(&plain.json()),
        pairs(&[
            ("R-FLAKY", "FAIL"),
            ("R-ALWAYS", "FAIL"),
            ("R-OWN", "FLAKY")
        ])
    );
    assert_eq!(dir.read("attempts").lines().count(), 1);
}

#[test]
fn a_document_probe_retries_only_when_asked() {
    let dir = Dir::new();
    let attempts = dir.join("doc-attempts");
    let lesson = format!(
        "# Retrying\n\n### Answer EX-77-01 [code]\n\nRun:\n\n```sh\necho x >> {}; exit 1\n```\n",
        attempts.display()
    );
    dir.write("course/lessonprobe.toml", "");
    dir.write("course/project/README", "");
    dir.write("course/lessons/77-retrying.md", lesson);
    let run = |extra: &[&str]| {
        let _ = std::fs::remove_file(&attempts);
        dir.lessonprobe()
            .args([
                "--lesson",
                "77",
                "--course",
                "course",
                "--retries",
                "2",
                "--no-junit",
            ])
            .args(extra)
            .failure();
        std::fs::read_to_string(&attempts).unwrap().lines().count()
    };
    assert_eq!(
        run(&[]),
        1,
        "a document probe is not retried by --retries alone"
    );
    assert_eq!(run(&["--retry-documents"]), 3);
}

/// Lessons 95 and 96: eleven quick probes, two of them prose, one run on each SQL backend
/// asked for (SKIP without it).
fn partition_course() -> Dir {
    let dir = Dir::new();
    for (lesson, count) in [(95, 6), (96, 5)] {
        let mut manifest = Manifest::lesson(lesson, &format!("shard {lesson}"));
        for i in 0..count {
            let id = format!("P{lesson}-{i}");
            manifest = manifest.probe(if i == 2 {
                Probe::prose(&id, "why?")
            } else {
                Probe::command(&id, ["echo", &format!("{lesson}-{i}")])
            });
        }
        dir.write(
            format!("checkpoints/{lesson}-shard.toml"),
            manifest.to_string(),
        );
    }
    dir
}

/// `(suite, classname, name)` of every test case.
fn testcases(report: &Report) -> Vec<(String, String, String)> {
    report
        .test_suites
        .iter()
        .flat_map(|s| {
            s.test_cases.iter().map(|c| {
                (
                    s.name.to_string(),
                    c.classname.as_deref().unwrap_or("").to_owned(),
                    c.name.to_string(),
                )
            })
        })
        .collect()
}

#[test]
fn three_shards_run_every_probe_of_the_selection_exactly_once() {
    let dir = partition_course();
    let all = dir.join("all.xml");
    dir.lessonprobe().arg("--junit").arg(&all).success();
    let whole = testcases(&parse_junit(&all));
    assert_eq!(whole.len(), 11);
    let mut union = Vec::new();
    for k in 1..=3 {
        let xml = dir.join(format!("shard-{k}.xml"));
        dir.lessonprobe()
            .args(["--partition", &format!("{k}/3"), "--junit"])
            .arg(&xml)
            .success();
        validate_junit(&xml);
        let shard = testcases(&parse_junit(&xml));
        assert!((3..=4).contains(&shard.len()), "shard {k}: {shard:?}");
        union.extend(shard);
    }
    let distinct: BTreeSet<_> = union.iter().cloned().collect();
    assert_eq!(distinct.len(), union.len(), "shards overlap: {union:?}");
    assert_eq!(distinct, whole.into_iter().collect::<BTreeSet<_>>());

    // With a selection too, and nextest's spelling.
    let selected = dir.join("selected.xml");
    dir.lessonprobe()
        .args(["--lesson", "95", "--partition", "count:2/3", "--junit"])
        .arg(&selected)
        .success();
    assert_eq!(
        testcases(&parse_junit(&selected))
            .into_iter()
            .map(|(_, _, name)| name)
            .collect::<Vec<_>>(),
        ["P95-1 probe", "P95-4 probe"]
    );
}

/// Lesson 45: four terminal session blocks of one document sharing one shell, each appending
/// to `ran.log` outside the working copy, and two command probes.
const SHARDED_SESSIONS: &str = "# Sessions

```console
$ export GREETING=hello
$ echo 1 >> \"$LOG\"
```

```console
$ echo $GREETING; echo 2 >> \"$LOG\"
hello
```

```console
$ echo 3 >> \"$LOG\"
```

```console
$ echo 4 >> \"$LOG\"; echo $GREETING again
hello again
```
";

#[test]
fn a_documents_session_blocks_run_whole_in_one_shard() {
    let dir = Manifest::lesson(45, "sessions")
        .probe(Probe::command("P45-a", ["echo", "a"]))
        .probe(Probe::command("P45-b", ["echo", "b"]))
        .in_new_dir("45-sessions.toml");
    dir.write("course/lessonprobe.toml", "");
    dir.write("course/lessons/45-sessions.md", SHARDED_SESSIONS);
    let log = dir.join("ran.log");
    let mut shards = Vec::new();
    for k in 1..=2 {
        let ran = dir
            .lessonprobe()
            .args(["--course", "course", "--lesson", "45", "--format", "json"])
            .args(["--partition", &format!("{k}/2")])
            .env("LOG", &log)
            .success();
        shards.push(json_verdicts(&ran.json()));
    }
    let sessions: Vec<usize> = shards
        .iter()
        .map(|s| {
            s.iter()
                .filter(|(id, _)| id.starts_with("45-sessions.md:"))
                .count()
        })
        .collect();
    assert!(
        sessions.contains(&4) && sessions.contains(&0),
        "a document's session blocks were split across shards: {shards:?}"
    );
    let all: BTreeSet<String> = shards.iter().flatten().map(|(id, _)| id.clone()).collect();
    assert_eq!(all.len(), 6, "{shards:?}");
    assert!(
        shards.iter().flatten().all(|(_, v)| v == "PASS"),
        "{shards:?}"
    );
    // Every block ran once over both shards: none was run again for another shard's state.
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "1\n2\n3\n4\n");
}

#[test]
fn an_invalid_partition_exits_2_with_one_line() {
    let dir = partition_course();
    for bad in ["0/3", "4/3", "x", "1/0", "2/x"] {
        let ran = dir
            .lessonprobe()
            .args(["--partition", bad])
            .stderr_has(format!("lessonprobe: --partition \"{bad}\": "))
            .stdout("")
            .status(2);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    }
}
