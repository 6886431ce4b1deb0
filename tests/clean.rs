//! `lessonprobe clean` against a real PostgreSQL, `sqlite:DIR` folders and `lessonprobe broker`:
//! what runs left is found by the run-id naming rule, listed in a dry run, dropped with
//! `--execute`, one run's or every run's, and nothing else is touched.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use lessonprobe_probes::scratch::schema_for_run;

fn clean(cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = lessonprobe(cwd).arg("clean").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn schema_exists(client: &mut postgres::Client, name: &str) -> bool {
    client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
        .unwrap()
        .is_some()
}

#[test]
fn schemas_of_earlier_runs_are_listed_then_dropped_one_run_at_a_time() {
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // What two interrupted runs left (the key of a case is lp-<run>.<lesson>.<case>), and two
    // schemas that are not lessonprobe's.
    let old_a = [
        schema_for_run("lp-cl-old-a.30.l30-12-postgres"),
        schema_for_run("lp-cl-old-a.29.ex-29-02-postgres"),
    ];
    let old_b = schema_for_run("lp-cl-old-b.30.ex-30-01-postgres");
    let foreign = ["cl_audit", "lp_not_ours"];
    for name in old_a
        .iter()
        .chain([&old_b])
        .map(String::as_str)
        .chain(foreign)
    {
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{name}\" CASCADE; CREATE SCHEMA \"{name}\"; CREATE TABLE \"{name}\".t (x int)"
            ))
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();

    let (code, stdout, stderr) = clean(&repo(), &["--db", &url, "--run-id", "cl-old-a"]);
    assert_eq!(code, Some(0), "{stderr}");
    for name in &old_a {
        assert!(
            stdout.contains(&format!("would drop schema {name} (postgres ")),
            "{stdout}"
        );
    }
    assert!(!stdout.contains(&old_b), "another run's: {stdout}");
    assert!(
        stdout.ends_with("2 leftovers of run cl-old-a; run again with --execute to drop them\n"),
        "{stdout}"
    );
    assert!(
        old_a.iter().all(|n| schema_exists(&mut client, n)),
        "a dry run drops nothing"
    );

    let (code, stdout, stderr) = clean(
        &repo(),
        &["--db", &url, "--run-id", "cl-old-a", "--execute"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.ends_with("dropped 2 of 2 leftovers of run cl-old-a\n"),
        "{stdout}"
    );
    assert!(!old_a.iter().any(|n| schema_exists(&mut client, n)));
    assert!(schema_exists(&mut client, &old_b));

    // Every run's: what is left of cl-old-b, and never a schema that is not lessonprobe's.
    let (code, stdout, stderr) = clean(dir.path(), &["--db", &url, "--execute"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("dropped schema {old_b} (postgres ")),
        "{stdout}"
    );
    assert!(!schema_exists(&mut client, &old_b));
    for name in foreign {
        assert!(
            schema_exists(&mut client, name),
            "{name} is not lessonprobe's"
        );
        assert!(!stdout.contains(name), "{stdout}");
        client
            .batch_execute(&format!("DROP SCHEMA \"{name}\" CASCADE"))
            .unwrap();
    }
}

#[test]
fn database_files_of_a_sqlite_folder_are_found_by_their_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("dbs");
    for run in ["cl-f1", "cl-f2"] {
        let out = lessonprobe(&repo())
            .args(["--lesson", "30", "--select", "EX-30-01", "--no-junit"])
            .args(["--run-id", run])
            .arg(format!("--db=sqlite:{}", db.display()))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
    }
    std::fs::write(db.join("audit.db"), "").unwrap();
    let sqlite = format!("sqlite:{}", db.display());

    let (code, stdout, _) = clean(dir.path(), &["--db", &sqlite]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("would drop file ") && stdout.contains("lp-cl-f1.30.ex-30-01-sqlite.db"),
        "{stdout}"
    );
    assert!(
        stdout.contains("lp-cl-f2.30.ex-30-01-sqlite.db"),
        "{stdout}"
    );

    let (code, stdout, _) = clean(
        dir.path(),
        &["--db", &sqlite, "--run-id", "cl-f1", "--execute"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let mut left: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["audit.db", "lp-cl-f2.30.ex-30-01-sqlite.db"]);
}

#[test]
fn topics_of_a_run_are_listed_and_a_broker_that_cannot_delete_is_named_in_time() {
    let mut broker = BrokerProcess::start(&[]);
    let s = broker.servers.clone();
    let dir = tempfile::tempdir().unwrap();
    let out = lessonprobe(&repo())
        .args(["--lesson", "30", "--select", "L30-13", "--no-junit"])
        .args(["--run-id", "cl-k1", "--kafka", &s])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The broker process auto-creates topics and has no DeleteTopics, so the run's topic stays.
    let topic = "ticketflow.audit.v1.beyond.lp-cl-k1.30.l30-13-sqlite";
    assert!(partitions_of(&s, topic) > 0);

    let (code, stdout, stderr) = clean(dir.path(), &["--kafka", &s, "--run-id", "cl-k1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains(&format!("would drop topic {topic} (kafka {s})")),
        "{stdout}"
    );
    let (_, stdout, _) = clean(dir.path(), &["--kafka", &s, "--run-id", "cl-other"]);
    assert!(!stdout.contains(topic), "{stdout}");

    let started = Instant::now();
    let (code, stdout, stderr) = clean(
        dir.path(),
        &[
            "--kafka",
            &s,
            "--run-id",
            "cl-k1",
            "--execute",
            "--timeout",
            "2s",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(4), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("topic {topic} (kafka {s}): not dropped: ")),
        "{stderr}"
    );
    assert!(
        stdout.ends_with("dropped 0 of 1 leftovers of run cl-k1\n"),
        "{stdout}"
    );
    assert_eq!(broker.terminate(), Some(0));
}

#[test]
fn clean_needs_a_place_and_refuses_the_embedded_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = clean(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("clean needs a place to look"), "{stderr}");
    let (code, _, stderr) = clean(dir.path(), &["--kafka", "embedded"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nothing to clean"), "{stderr}");
}
