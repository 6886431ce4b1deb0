//! The PostgreSQL audit store against a real server (LESSONPROBE_TEST_POSTGRES, started by
//! scripts/test.sh): audit tables only, rows counted through a separate connection, errors with
//! their SQLSTATE and the place, never the password.

use std::time::Duration;

use lessonprobe_testkit::postgres::Schema;
use lessonprobe_testkit::services;
use ticketflow::consumer::{AuditConsumer, Commit, ConsumeError, Position};
use ticketflow::event::AuditEvent;
use ticketflow::store::{AuditStore, PostgresAuditStore, StoreError};

const T: Duration = Duration::from_secs(10);

#[test]
fn the_store_creates_audit_tables_only_and_a_duplicate_leaves_one_row_seen_elsewhere() {
    let Some(url) = services::postgres() else {
        return;
    };
    let mut schema = Schema::new(&url, "dup");
    let mut store = PostgresAuditStore::open_in_schema(&url, &schema.name, T).unwrap();
    assert_eq!(schema.tables(), ["audit_events"]);
    assert!(store.apply_once(&AuditEvent::sample()).unwrap());
    assert!(!store.apply_once(&AuditEvent::sample()).unwrap());

    let name = schema.name.clone();
    let other = &mut schema.client;
    let rows: i64 = other
        .query_one(&format!("SELECT COUNT(*) FROM {name}.audit_events"), &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
    let constraint: i64 = other
        .query_one(
            "SELECT COUNT(*) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
             WHERE n.nspname = $1 AND c.conname = 'audit_events_event_id_key' AND c.contype = 'u'",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        constraint, 1,
        "the unique constraint on event_id exists under its name"
    );
    // Reopening finds the table there and the row kept.
    drop(store);
    let mut again = PostgresAuditStore::open_in_schema(&url, &name, T).unwrap();
    assert_eq!(again.audit_rows().unwrap(), 1);
}

#[test]
fn not_null_and_check_violations_propagate_with_their_sqlstate_and_commit_nothing() {
    let Some(url) = services::postgres() else {
        return;
    };
    let schema = Schema::new(&url, "integrity");
    let store = PostgresAuditStore::open_in_schema(&url, &schema.name, T).unwrap();
    let mut commits = Vec::new();
    let mut consumer = AuditConsumer::new(store, |c: &Commit| {
        commits.push(c.next_offset);
        Ok(())
    });
    let mut null_payload = AuditEvent::sample_with_id("evt-null");
    null_payload.payload = serde_json::Value::Null;
    match consumer.consume(&Position::sample(41), &null_payload) {
        Err(ConsumeError::Store(e @ StoreError::Postgres { .. })) => {
            assert_eq!(e.integrity_violation(), Some("not-null"));
            assert!(
                e.to_string()
                    .starts_with("SQLSTATE 23502: postgres 127.0.0.1:"),
                "{e}"
            );
        }
        other => panic!("expected SQLSTATE 23502, got {other:?}"),
    }
    let mut empty = AuditEvent::sample_with_id("evt-check");
    empty.ticket_id.clear();
    match consumer.consume(&Position::sample(42), &empty) {
        Err(ConsumeError::Store(e)) => assert_eq!(e.integrity_violation(), Some("check"), "{e}"),
        other => panic!("expected SQLSTATE 23514, got {other:?}"),
    }
    assert_eq!(consumer.store_mut().audit_rows().unwrap(), 0);
    drop(consumer);
    assert!(commits.is_empty(), "{commits:?}");
}

#[test]
fn an_unreachable_server_or_refused_login_names_the_place_never_the_password() {
    let Some(url) = services::postgres() else {
        return;
    };
    let port = lessonprobe_testkit::net::free_port();
    let err = PostgresAuditStore::open(&format!("postgres://u:hunter2@127.0.0.1:{port}/audit"), T)
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "cannot connect to postgres 127.0.0.1:{port}/audit"
        )),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");

    let place = url
        .rsplit_once('@')
        .map_or(url.as_str(), |(_, place)| place);
    let refused = format!("postgres://nobody_here:hunter2@{place}");
    let err = PostgresAuditStore::open(&refused, T)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("28000") && err.contains("127.0.0.1"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
