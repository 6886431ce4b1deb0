//! Per-case schemas on a real PostgreSQL (LESSONPROBE_TEST_POSTGRES, started by scripts/test.sh):
//! a probe's store holds the audit and the live service's tables in a schema of its own, and
//! the schema goes with the store.

use std::time::Duration;

use lessonprobe_probes::live::{LivePostgres, LiveStore};
use lessonprobe_testkit::postgres::{connect, tables};
use lessonprobe_testkit::services;
use ticketflow::event::AuditEvent;

#[test]
fn a_store_in_a_case_schema_has_both_sets_of_tables_and_its_schema_is_dropped_with_it() {
    let Some(url) = services::postgres() else {
        return;
    };
    let name = format!("t_case_schema_{}", std::process::id());
    let mut store = LivePostgres::in_case_schema(&url, &name, Duration::from_secs(10)).unwrap();
    assert!(store.apply_live(&AuditEvent::sample()).unwrap());
    assert!(!store.apply_live(&AuditEvent::sample()).unwrap());
    assert_eq!(store.business_counts().unwrap(), (1, 1));

    let mut other = connect(&url);
    assert_eq!(
        tables(&mut other, &name),
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
