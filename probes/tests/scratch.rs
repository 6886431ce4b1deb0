//! Scratch schemas on a real PostgreSQL (LESSONPROBE_TEST_POSTGRES, started by scripts/test.sh):
//! a probe's store holds the audit and the live service's tables in a schema of its own, and
//! the schema goes with the store.

use std::time::Duration;

use lessonprobe_probes::live::{LivePostgres, LiveStore};
use ticketflow::event::AuditEvent;

fn url_or_skip() -> Option<String> {
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    match std::env::var("LESSONPROBE_TEST_POSTGRES") {
        Ok(v) if !v.is_empty() => Some(v),
        _ if in_ci => panic!(
            "LESSONPROBE_TEST_POSTGRES is not set: CI must start PostgreSQL (see scripts/test.sh)"
        ),
        _ => {
            eprintln!("skipped: LESSONPROBE_TEST_POSTGRES is not set (run the tests through scripts/test.sh)");
            None
        }
    }
}

#[test]
fn a_scratch_store_has_both_sets_of_tables_and_its_schema_is_dropped_with_it() {
    let Some(url) = url_or_skip() else {
        return;
    };
    let name = format!("t_scratch_{}", std::process::id());
    let mut store = LivePostgres::scratch(&url, &name, Duration::from_secs(10)).unwrap();
    assert!(store.apply_live(&AuditEvent::sample()).unwrap());
    assert!(!store.apply_live(&AuditEvent::sample()).unwrap());
    assert_eq!(store.business_counts().unwrap(), (1, 1));

    let mut other = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let tables: Vec<String> = other
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&name],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "audit_events",
            "live_schema_migrations",
            "notifications",
            "sla_counts",
            "ticket_state"
        ]
    );
    drop(store);
    let left: i64 = other
        .query_one(
            "SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1",
            &[&name],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the store's schema is dropped with it");
}
