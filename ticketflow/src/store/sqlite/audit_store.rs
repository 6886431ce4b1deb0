//! The consumer's audit store on SQLite (bundled), in memory or in a file: only the conflict on
//! `event_id` is a duplicate.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection};

use super::connect::tune;
use crate::event::AuditEvent;
use crate::store::audit_store::AuditStore;
use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::schema::{self, payload_column};

pub struct SqliteAuditStore {
    conn: Connection,
}

/// Creates `audit_events` unless a table of that name is there.
pub(super) fn ensure_audit_table(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(&schema::audit_events(Backend::Sqlite).replacen(
        "CREATE TABLE",
        "CREATE TABLE IF NOT EXISTS",
        1,
    ))?;
    Ok(())
}

impl SqliteAuditStore {
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory()?;
        ensure_audit_table(&conn)?;
        Ok(SqliteAuditStore { conn })
    }

    /// Opens (or creates) a database file in WAL mode.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        tune(&conn, Duration::from_secs(5))?;
        ensure_audit_table(&conn)?;
        Ok(SqliteAuditStore { conn })
    }

    /// The connection, for checks that read the database back.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

impl AuditStore for SqliteAuditStore {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let tx = self.conn.transaction()?;
        let inserted = insert_audit(&tx, event)?;
        tx.commit()?;
        Ok(inserted)
    }

    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM audit_events", [], |r| r.get(0))?;
        Ok(n as u64)
    }
}

/// Inserts the audit row unless its `event_id` exists; `true` when inserted. ON CONFLICT
/// (event_id), not INSERT OR IGNORE: the latter also swallows NOT NULL and CHECK failures,
/// which must surface. Public so a caller may add effects of its own in the same transaction.
pub fn insert_audit(conn: &Connection, event: &AuditEvent) -> Result<bool, StoreError> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (event_id) DO NOTHING",
    )?;
    let n = insert.execute(params![
        event.event_id,
        event.tenant_id,
        event.ticket_id,
        event.action,
        event.occurred_at,
        payload_column(event),
    ])?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_apply_of_the_same_event_id_is_a_duplicate() {
        let mut store = SqliteAuditStore::in_memory().unwrap();
        assert!(store.apply_once(&AuditEvent::sample()).unwrap());
        assert!(!store.apply_once(&AuditEvent::sample()).unwrap());
        assert_eq!(store.audit_rows().unwrap(), 1);
    }

    #[test]
    fn check_and_not_null_failures_propagate_instead_of_reading_as_duplicates() {
        let mut store = SqliteAuditStore::in_memory().unwrap();
        let mut empty_tenant = AuditEvent::sample_with_id("evt-check");
        empty_tenant.tenant_id.clear();
        let err = store.apply_once(&empty_tenant).unwrap_err();
        assert!(err.to_string().contains("CHECK constraint failed"), "{err}");

        let mut null_payload = AuditEvent::sample_with_id("evt-null");
        null_payload.payload = serde_json::Value::Null;
        let err = store.apply_once(&null_payload).unwrap_err();
        assert!(
            err.to_string().contains("NOT NULL constraint failed"),
            "{err}"
        );
        assert_eq!(store.audit_rows().unwrap(), 0);
    }

    #[test]
    fn reopening_a_file_keeps_rows_and_creates_nothing_but_the_audit_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        SqliteAuditStore::open(&path)
            .unwrap()
            .apply_once(&AuditEvent::sample())
            .unwrap();
        let mut again = SqliteAuditStore::open(&path).unwrap();
        assert_eq!(again.audit_rows().unwrap(), 1);
        assert!(!again.apply_once(&AuditEvent::sample()).unwrap());
        let tables: Vec<String> = again
            .connection()
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(tables, ["audit_events"]);
    }
}
