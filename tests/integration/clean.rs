//! `lessonprobe clean` against a real PostgreSQL, `sqlite:DIR` folders and `lessonprobe broker`:
//! what runs left is found by the run-id naming rule, listed in a dry run, dropped with
//! `--execute`, one run's or every run's, and nothing else is touched.

use std::time::Duration;

use lessonprobe_probes::case_schema::schema_for_run;
use lessonprobe_testkit::kafka::partitions_of;
use lessonprobe_testkit::*;

fn clean(args: &[&str]) -> Test {
    lessonprobe().arg("clean").args(args)
}

fn schema_exists(client: &mut ::postgres::Client, name: &str) -> bool {
    client
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
        .unwrap()
        .is_some()
}

#[test]
fn schemas_of_earlier_runs_are_listed_then_dropped_one_run_at_a_time() {
    let Some(url) = services::postgres() else {
        return;
    };
    let mut client = postgres::connect(&url);
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

    let mut dry = clean(&["--db", &url, "--run-id", "cl-old-a"]).in_repo();
    for name in &old_a {
        dry = dry.stdout_has(format!("would drop schema {name} (postgres "));
    }
    // Not another run's.
    let ran = dry.stdout_lacks(old_b.as_str()).success();
    assert!(
        ran.stdout
            .ends_with("2 leftovers of run cl-old-a; run again with --execute to drop them\n"),
        "{}",
        ran.stdout
    );
    assert!(
        old_a.iter().all(|n| schema_exists(&mut client, n)),
        "a dry run drops nothing"
    );

    let ran = clean(&["--db", &url, "--run-id", "cl-old-a", "--execute"])
        .in_repo()
        .success();
    assert!(
        ran.stdout
            .ends_with("dropped 2 of 2 leftovers of run cl-old-a\n"),
        "{}",
        ran.stdout
    );
    assert!(!old_a.iter().any(|n| schema_exists(&mut client, n)));
    assert!(schema_exists(&mut client, &old_b));

    // Every run's: what is left of cl-old-b, and never a schema that is not lessonprobe's.
    let mut every = clean(&["--db", &url, "--execute"])
        .stdout_has(format!("dropped schema {old_b} (postgres "));
    for name in foreign {
        every = every.stdout_lacks(name);
    }
    every.success();
    assert!(!schema_exists(&mut client, &old_b));
    for name in foreign {
        assert!(
            schema_exists(&mut client, name),
            "{name} is not lessonprobe's"
        );
        client
            .batch_execute(&format!("DROP SCHEMA \"{name}\" CASCADE"))
            .unwrap();
    }
}

#[test]
fn database_files_of_a_sqlite_folder_are_found_by_their_run() {
    let dir = Dir::new();
    let db = dir.join("dbs");
    for run in ["cl-f1", "cl-f2"] {
        lessonprobe()
            .in_repo()
            .args(["--lesson", "30", "--select", "EX-30-01", "--no-junit"])
            .args(["--run-id", run])
            .arg(format!("--db=sqlite:{}", db.display()))
            .success();
    }
    std::fs::write(db.join("audit.db"), "").unwrap();
    let sqlite = format!("sqlite:{}", db.display());

    clean(&["--db", &sqlite])
        .current_dir(&dir)
        .stdout_has("would drop file ")
        .stdout_has("lp-cl-f1.30.ex-30-01-sqlite.db")
        .stdout_has("lp-cl-f2.30.ex-30-01-sqlite.db")
        .success();

    clean(&["--db", &sqlite, "--run-id", "cl-f1", "--execute"])
        .current_dir(&dir)
        .success();
    let mut left: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["audit.db", "lp-cl-f2.30.ex-30-01-sqlite.db"]);
}

/// On the mock cluster only: a broker that cannot delete topics is what is tested (Apache Kafka
/// answers DeleteTopics).
#[test]
fn topics_of_a_run_are_listed_and_the_mock_cluster_that_cannot_delete_is_named_in_time() {
    let mut broker = BrokerProcess::start(&[]);
    let s = broker.servers.clone();
    lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--select", "L30-13", "--no-junit"])
        .args(["--run-id", "cl-k1", "--kafka", &s])
        .success();
    // The broker process auto-creates topics and has no DeleteTopics, so the run's topic stays.
    let topic = "ticketflow.audit.v1.beyond.lp-cl-k1.30.l30-13-sqlite";
    assert!(partitions_of(&s, topic) > 0);

    clean(&["--kafka", &s, "--run-id", "cl-k1"])
        .stdout_has(format!("would drop topic {topic} (kafka {s})"))
        .success();
    clean(&["--kafka", &s, "--run-id", "cl-other"])
        .stdout_lacks(topic)
        .success();

    let ran = clean(&["--kafka", &s, "--run-id", "cl-k1", "--execute"])
        .args(["--timeout", "2s"])
        .within(Duration::from_secs(20))
        .stderr_has(format!("topic {topic} (kafka {s}): not dropped: "))
        .status(4);
    assert!(
        ran.stdout
            .ends_with("dropped 0 of 1 leftovers of run cl-k1\n"),
        "{}",
        ran.stdout
    );
    assert_eq!(broker.terminate(), Some(0));
}

#[test]
fn clean_needs_a_place_and_refuses_the_embedded_broker() {
    clean(&[])
        .stderr_has("clean needs a place to look")
        .status(2);
    clean(&["--kafka", "embedded"])
        .stderr_has("nothing to clean")
        .status(2);
}
