//! The SQL probes on a real PostgreSQL (LESSONPROBE_TEST_POSTGRES, started by scripts/test.sh),
//! chosen with --db, read back through the JUnit report and the server's catalog.

use std::time::Duration;

use lessonprobe_testkit::postgres::OwnCluster;
use lessonprobe_testkit::*;
use ticketflow::consumer::{AuditConsumer, Commit, Position};
use ticketflow::event::AuditEvent;
use ticketflow::store::PostgresAuditStore;

const T: Duration = Duration::from_secs(10);

/// Schemas left by runs whose id starts with `run`.
fn schemas_of(url: &str, run: &str) -> i64 {
    let mut client = lessonprobe_testkit::postgres::connect(url);
    let pattern = format!("lp\\_%\\_{}\\_%", run.replace('-', "\\_"));
    client
        .query_one(
            "SELECT COUNT(*) FROM pg_namespace WHERE nspname LIKE $1",
            &[&pattern],
        )
        .unwrap()
        .get(0)
}

#[test]
fn lesson_30_passes_on_postgres() {
    let Some(url) = services::postgres() else {
        return;
    };
    let dir = Dir::new();
    let xml = dir.join("pg.xml");
    lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--db", &url, "--junit"])
        .arg(&xml)
        .success();
    validate_junit(&xml);
    let cases = verdicts(&parse_junit(&xml));
    let on_pg: Vec<_> = cases
        .iter()
        .filter(|(n, _)| n.ends_with("[postgres]"))
        .collect();
    assert_eq!(on_pg.len(), 7, "{cases:?}");
    assert!(on_pg.iter().all(|(_, v)| v == "PASS"), "{on_pg:?}");
    assert!(!cases.iter().any(|(n, _)| n.ends_with("[sqlite]")));
}

#[test]
fn db_all_runs_each_sql_probe_once_per_backend() {
    let Some(url) = services::postgres() else {
        return;
    };
    let dir = Dir::new();
    let xml = dir.join("all.xml");
    lessonprobe()
        .in_repo()
        .env("LESSONPROBE_POSTGRES", &url)
        .args(["--lesson", "30", "--db", "all"])
        .args(["--select", "EX-30-01", "--select", "L30-0*", "--junit"])
        .arg(&xml)
        .success();
    let names: Vec<String> = verdicts(&parse_junit(&xml))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    for probe in [
        "EX-30-01 audit-sql-duplicate-probe",
        "L30-01 sql-audit-probe",
        "L30-02 integrity-error-propagates",
    ] {
        for backend in ["sqlite", "postgres"] {
            assert!(
                names.contains(&format!("{probe} [{backend}]")),
                "{probe} [{backend}] missing from {names:?}"
            );
        }
    }
    assert!(
        names.contains(&"L30-03 replay-plan-validation".to_owned()),
        "a non-SQL probe runs once"
    );
}

#[test]
fn two_runs_at_once_do_not_interfere_and_leave_no_schema_behind() {
    let Some(url) = services::postgres() else {
        return;
    };
    let dir = Dir::new();
    let spawn = |id: &str| {
        lessonprobe()
            .in_repo()
            .args([
                "--lesson", "30", "--select", "EX-30-01", "--select", "L30-0*",
            ])
            .args([
                "--select", "L30-14", "--db", &url, "--run-id", id, "--junit",
            ])
            .arg(dir.join(format!("{id}.xml")))
            .spawn()
    };
    let (a, b) = (spawn("twin-a"), spawn("twin-b"));
    for run in [a, b] {
        run.success();
    }
    assert_eq!(
        schemas_of(&url, "twin-a") + schemas_of(&url, "twin-b"),
        0,
        "every run drops the schemas it created"
    );
}

#[test]
fn a_database_that_is_down_or_refuses_the_login_is_error_naming_it_without_the_password() {
    let Some(url) = services::postgres() else {
        return;
    };
    let port = net::free_port();
    let place = url
        .rsplit_once('@')
        .map_or(url.as_str(), |(_, p)| p)
        .to_owned();
    for (db, names) in [
        (
            format!("postgres://audit:hunter2@127.0.0.1:{port}/audit"),
            format!("postgres 127.0.0.1:{port}/audit"),
        ),
        (
            format!("postgres://nobody_here:hunter2@{place}"),
            "28000".to_owned(),
        ),
    ] {
        let dir = Dir::new();
        let xml = dir.join("down.xml");
        lessonprobe()
            .in_repo()
            .args([
                "--lesson", "30", "--select", "L30-01", "--db", &db, "--junit",
            ])
            .arg(&xml)
            .within(Duration::from_secs(15))
            .stdout_has("ERROR   environment: ")
            .stdout_has(names)
            .stdout_lacks("hunter2")
            .failure();
        let report = std::fs::read_to_string(&xml).unwrap();
        assert!(!report.contains("hunter2"), "{report}");
        // The preflight's ERROR is a case of its own; the probe that needs the database never
        // starts.
        let verdicts = verdicts(&parse_junit(&xml));
        assert_eq!(verdicts.len(), 2, "{verdicts:?}");
        assert!(
            verdicts[0].0.starts_with("environment: postgres ") && verdicts[0].1 == "ERROR",
            "{verdicts:?}"
        );
        assert_eq!(
            verdicts[1],
            (
                "L30-01 sql-audit-probe [postgres]".to_owned(),
                "NOT RUN".to_owned()
            )
        );
    }
}

#[test]
fn a_server_stopped_under_the_consumer_is_an_error_and_commits_nothing() {
    let Some(pg_ctl) = services::pg_ctl() else {
        return;
    };
    let cluster = OwnCluster::start(&pg_ctl);
    let store = PostgresAuditStore::open(&cluster.url(), T).unwrap();
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    assert!(consumer
        .consume(&Position::sample(41), &AuditEvent::sample_with_id("evt-1"))
        .unwrap());
    cluster.stop();
    let err = consumer
        .consume(&Position::sample(42), &AuditEvent::sample_with_id("evt-2"))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{}", cluster.port)),
        "{err}"
    );
    drop(consumer);
    assert_eq!(commits, vec![42], "only the offset after the durable row");
}
