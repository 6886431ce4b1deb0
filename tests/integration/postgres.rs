//! The SQL probes on a real PostgreSQL (LESSONPROBE_TEST_POSTGRES, started by scripts/test.sh),
//! chosen with --db, read back through the JUnit report and the server's catalog.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ticketflow::consumer::{AuditConsumer, Commit, Position};
use ticketflow::event::AuditEvent;
use ticketflow::store::PostgresAuditStore;

fn at(offset: i64) -> Position {
    Position {
        topic: "ticketflow.audit".into(),
        partition: 1,
        offset,
    }
}

const T: Duration = Duration::from_secs(10);

/// Schemas left by runs whose id starts with `run`.
fn schemas_of(url: &str, run: &str) -> i64 {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
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
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("pg.xml");
    let out = lessonprobe(&repo())
        .args(["--lesson", "30", "--db", &url, "--junit"])
        .arg(&xml)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
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
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("all.xml");
    let out = lessonprobe(&repo())
        .env("LESSONPROBE_POSTGRES", &url)
        .args([
            "--lesson", "30", "--db", "all", "--select", "EX-30-01", "--select", "L30-0*",
            "--junit",
        ])
        .arg(&xml)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
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
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let spawn = |id: &str| {
        lessonprobe(&repo())
            .args([
                "--lesson", "30", "--select", "EX-30-01", "--select", "L30-0*", "--select",
                "L30-14", "--db", &url, "--run-id", id, "--junit",
            ])
            .arg(dir.path().join(format!("{id}.xml")))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("twin-a"), spawn("twin-b"));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_eq!(
        schemas_of(&url, "twin-a") + schemas_of(&url, "twin-b"),
        0,
        "every run drops the schemas it created"
    );
}

#[test]
fn a_database_that_is_down_or_refuses_the_login_is_error_naming_it_without_the_password() {
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
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
        let dir = tempfile::tempdir().unwrap();
        let xml = dir.path().join("down.xml");
        let started = Instant::now();
        let out = lessonprobe(&repo())
            .args([
                "--lesson", "30", "--select", "L30-01", "--db", &db, "--junit",
            ])
            .arg(&xml)
            .output()
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "took {:?}",
            started.elapsed()
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        assert!(
            stdout.contains("ERROR") && stdout.contains(&names),
            "{stdout}"
        );
        let report = std::fs::read_to_string(&xml).unwrap();
        assert!(
            !stdout.contains("hunter2") && !report.contains("hunter2"),
            "{stdout}"
        );
        assert_eq!(
            verdicts(&parse_junit(&xml)),
            vec![(
                "L30-01 sql-audit-probe [postgres]".to_owned(),
                "ERROR".to_owned()
            )]
        );
    }
}

#[test]
fn a_server_stopped_under_the_consumer_is_an_error_and_commits_nothing() {
    let Some(pg_ctl) = service("LESSONPROBE_TEST_PG_CTL", "PostgreSQL server binaries") else {
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
        .consume(&at(41), &AuditEvent::sample_with_id("evt-1"))
        .unwrap());
    cluster.stop();
    let err = consumer
        .consume(&at(42), &AuditEvent::sample_with_id("evt-2"))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{}", cluster.port)),
        "{err}"
    );
    drop(consumer);
    assert_eq!(commits, vec![42], "only the offset after the durable row");
}
