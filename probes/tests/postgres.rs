//! The PostgreSQL audit store against a real server (LESSONPROBE_TEST_POSTGRES, started by
//! scripts/test.sh): rows counted through a separate connection, errors with their SQLSTATE,
//! schemas dropped, and a server stopped under a consumer.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lessonprobe_probes::consumer::{AuditConsumer, Commit, ConsumeError, Position};
use lessonprobe_probes::event::AuditEvent;
use lessonprobe_probes::store::{AuditStore, PostgresAuditStore, StoreError};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn env_or_skip(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if in_ci() => panic!("{var} is not set: CI must start PostgreSQL (see scripts/test.sh)"),
        _ => {
            eprintln!("skipped: {var} is not set (run the tests through scripts/test.sh)");
            None
        }
    }
}

fn schema(name: &str) -> String {
    format!("t_{name}_{}", std::process::id())
}

fn at(offset: i64) -> Position {
    Position { topic: "ticketflow.audit".into(), partition: 1, offset }
}

const T: Duration = Duration::from_secs(10);

#[test]
fn a_duplicate_leaves_one_row_seen_through_another_connection_and_the_schema_is_dropped() {
    let Some(url) = env_or_skip("LESSONPROBE_TEST_POSTGRES") else { return };
    let name = schema("dup");
    let mut store = PostgresAuditStore::scratch(&url, &name, T).unwrap();
    assert!(store.apply_once(&AuditEvent::sample()).unwrap());
    assert!(!store.apply_once(&AuditEvent::sample()).unwrap());

    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let rows: i64 = other.query_one(&format!("SELECT COUNT(*) FROM {name}.audit_events"), &[]).unwrap().get(0);
    assert_eq!(rows, 1);
    let constraint: i64 = other
        .query_one(
            "SELECT COUNT(*) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
             WHERE n.nspname = $1 AND c.conname = 'audit_events_event_id_key' AND c.contype = 'u'",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(constraint, 1, "the unique constraint on event_id exists under its name");

    drop(store);
    let left: i64 = other.query_one("SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1", &[&name]).unwrap().get(0);
    assert_eq!(left, 0, "the store's schema is dropped with it");
}

#[test]
fn not_null_and_check_violations_propagate_with_their_sqlstate_and_commit_nothing() {
    let Some(url) = env_or_skip("LESSONPROBE_TEST_POSTGRES") else { return };
    let store = PostgresAuditStore::scratch(&url, &schema("integrity"), T).unwrap();
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    let mut null_payload = AuditEvent::sample_with_id("evt-null");
    null_payload.payload = serde_json::Value::Null;
    match consumer.consume(&at(41), &null_payload) {
        Err(ConsumeError::Store(e @ StoreError::Postgres { .. })) => {
            assert_eq!(e.integrity_violation(), Some("not-null"));
            assert!(e.to_string().starts_with("SQLSTATE 23502: postgres 127.0.0.1:"), "{e}");
        }
        other => panic!("expected SQLSTATE 23502, got {other:?}"),
    }
    let mut empty = AuditEvent::sample_with_id("evt-check");
    empty.ticket_id.clear();
    match consumer.consume(&at(42), &empty) {
        Err(ConsumeError::Store(e)) => assert_eq!(e.integrity_violation(), Some("check"), "{e}"),
        other => panic!("expected SQLSTATE 23514, got {other:?}"),
    }
    assert_eq!(consumer.store_mut().audit_rows().unwrap(), 0);
    drop(consumer);
    assert!(commits.is_empty(), "{commits:?}");
}

/// A cluster of this test's own, so stopping it disturbs no other test.
struct OwnCluster {
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    runas: Option<String>,
    port: u16,
}

impl OwnCluster {
    fn start(pg_ctl: &str) -> OwnCluster {
        let pg_ctl = PathBuf::from(pg_ctl);
        let initdb = pg_ctl.with_file_name("initdb");
        let runas = std::env::var("LESSONPROBE_TEST_PG_RUNAS").ok().filter(|s| !s.is_empty());
        let dir = tempfile::tempdir().unwrap();
        if let Some(user) = &runas {
            assert!(Command::new("chown").arg(user).arg(dir.path()).status().unwrap().success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let data = dir.path().join("data");
        let user = runas.clone().unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".into()));
        let c = OwnCluster { dir, pg_ctl, runas, port };
        c.run(&initdb, &["-D", data.to_str().unwrap(), "-U", &user, "--auth=trust"]);
        let opts = format!("-k {} -p {port} -h 127.0.0.1", c.dir.path().display());
        c.run(&c.pg_ctl, &["-D", data.to_str().unwrap(), "-w", "-l", c.dir.path().join("log").to_str().unwrap(), "-o", &opts, "start"]);
        c
    }

    fn run(&self, program: &Path, args: &[&str]) {
        let mut cmd = match &self.runas {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        let out = cmd.args(args).output().unwrap();
        assert!(out.status.success(), "{}: {}", program.display(), String::from_utf8_lossy(&out.stderr));
    }

    fn url(&self) -> String {
        let user = self.runas.clone().unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".into()));
        format!("postgres://{user}@127.0.0.1:{}/postgres", self.port)
    }

    fn stop(&self) {
        let data = self.dir.path().join("data");
        self.run(&self.pg_ctl, &["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"]);
    }
}

#[test]
fn a_server_stopped_under_the_consumer_is_an_error_and_commits_nothing() {
    let Some(pg_ctl) = env_or_skip("LESSONPROBE_TEST_PG_CTL") else { return };
    let cluster = OwnCluster::start(&pg_ctl);
    let store = PostgresAuditStore::scratch(&cluster.url(), "stopped", T).unwrap();
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    assert!(consumer.consume(&at(41), &AuditEvent::sample_with_id("evt-1")).unwrap());
    cluster.stop();
    let err = consumer.consume(&at(42), &AuditEvent::sample_with_id("evt-2")).unwrap_err();
    assert!(err.to_string().contains(&format!("127.0.0.1:{}", cluster.port)), "{err}");
    drop(consumer);
    assert_eq!(commits, vec![42], "only the offset after the durable row");
}

#[test]
fn an_unreachable_server_or_refused_login_names_the_place_never_the_password() {
    let Some(url) = env_or_skip("LESSONPROBE_TEST_POSTGRES") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = PostgresAuditStore::scratch(&format!("postgres://u:hunter2@127.0.0.1:{port}/audit"), "x", T).err().unwrap();
    let text = err.to_string();
    assert!(text.contains(&format!("cannot connect to postgres 127.0.0.1:{port}/audit")), "{text}");
    assert!(!text.contains("hunter2"), "{text}");

    let place = url.rsplit_once('@').map_or(url.as_str(), |(_, place)| place);
    let refused = format!("postgres://nobody_here:hunter2@{place}");
    let err = PostgresAuditStore::scratch(&refused, "x", T).err().unwrap().to_string();
    assert!(err.contains("28000") && err.contains("127.0.0.1"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
