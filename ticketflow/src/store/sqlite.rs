//! The audit store on SQLite (bundled), in memory or in a file.

use std::path::Path;

use rusqlite::{params, Connection};

use super::{migrations::AUDIT, AuditStore, BatchOutcome, Quarantined, StoreError};
use crate::event::AuditEvent;

pub struct SqliteAuditStore {
    conn: Connection,
}

impl SqliteAuditStore {
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory()?)
    }

    /// Opens (or creates) a database file in WAL mode, as a replay into a file wants.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // synchronous stays FULL: an offset is committed to Kafka right after the SQL commit,
        // so that commit must survive power loss too. A 64 MiB page cache keeps the event_id
        // index of a large replay in memory, where inserts in partition order land at random.
        conn.pragma_update(None, "cache_size", -65_536)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::init(conn)
    }

    fn init(conn: Connection) -> Result<Self, StoreError> {
        AUDIT.apply_sqlite(&conn)?;
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

    fn apply_batch(
        &mut self,
        events: &[AuditEvent],
        bad: &[Quarantined],
    ) -> Result<BatchOutcome, StoreError> {
        let tx = self.conn.transaction()?;
        let mut outcome = BatchOutcome::default();
        {
            for event in events {
                if insert_audit(&tx, event)? {
                    outcome.inserted += 1;
                } else {
                    outcome.duplicates += 1;
                }
            }
            let mut quarantine = tx.prepare_cached(
                "INSERT INTO quarantined_records (topic, partition, record_offset, raw, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (topic, partition, record_offset) DO NOTHING",
            )?;
            for q in bad {
                quarantine.execute(params![q.topic, q.partition, q.offset, q.raw, q.reason])?;
                outcome.quarantined += 1;
            }
        }
        tx.commit()?;
        Ok(outcome)
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

/// A JSON `null` payload is stored as SQL NULL, which the schema refuses.
pub(crate) fn payload_column(event: &AuditEvent) -> Option<String> {
    (!event.payload.is_null()).then(|| event.payload.to_string())
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
    fn reopening_a_file_keeps_rows_and_does_not_rerun_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        SqliteAuditStore::open(&path)
            .unwrap()
            .apply_once(&AuditEvent::sample())
            .unwrap();
        let mut again = SqliteAuditStore::open(&path).unwrap();
        assert_eq!(again.audit_rows().unwrap(), 1);
        assert!(!again.apply_once(&AuditEvent::sample()).unwrap());
    }
}
