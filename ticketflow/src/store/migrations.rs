//! Versioned schema migrations, one list for every SQL backend, each recorded in a ledger table
//! of its own; the audit store's list creates audit tables only.

use postgres::Client;
use rusqlite::Connection;

use super::StoreError;

/// A component's migrations: `(version, statements)` in the common SQL of SQLite and
/// PostgreSQL, applied in order, each once, recorded in the table `ledger`.
#[derive(Debug, Clone, Copy)]
pub struct Migrations {
    pub ledger: &'static str,
    pub steps: &'static [(i64, &'static str)],
}

/// The audit store's tables: the audit rows and the replay's quarantine. Versions 2 and 3 are
/// not reused: databases made before the live service's tables left this list recorded them.
pub const AUDIT: Migrations = Migrations {
    ledger: "schema_migrations",
    steps: &[
        (
            1,
            "CREATE TABLE audit_events (
                event_id    TEXT NOT NULL CONSTRAINT audit_events_event_id_key UNIQUE,
                tenant_id   TEXT NOT NULL CHECK (tenant_id <> ''),
                ticket_id   TEXT NOT NULL CHECK (ticket_id <> ''),
                action      TEXT NOT NULL CHECK (action <> ''),
                occurred_at TEXT NOT NULL,
                payload     TEXT NOT NULL
            )",
        ),
        (
            4,
            "CREATE TABLE quarantined_records (
                topic     TEXT NOT NULL,
                partition INTEGER NOT NULL,
                record_offset BIGINT NOT NULL,
                raw       BYTEA NOT NULL,
                reason    TEXT NOT NULL,
                PRIMARY KEY (topic, partition, record_offset)
            )",
        ),
    ],
};

impl Migrations {
    /// Applies the missing steps on SQLite, each in its own transaction.
    pub fn apply_sqlite(&self, conn: &Connection) -> Result<(), StoreError> {
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {} (version INTEGER PRIMARY KEY)",
            self.ledger
        ))?;
        for (version, sql) in self.steps {
            let done: bool = conn.query_row(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM {} WHERE version = ?1)",
                    self.ledger
                ),
                [version],
                |row| row.get(0),
            )?;
            if !done {
                let tx = conn.unchecked_transaction()?;
                tx.execute_batch(sql)?;
                tx.execute(
                    &format!("INSERT INTO {} (version) VALUES (?1)", self.ledger),
                    [version],
                )?;
                tx.commit()?;
            }
        }
        Ok(())
    }

    /// Applies the missing steps on PostgreSQL (in the connection's search_path), each in a
    /// transaction under an advisory lock per ledger, so several connections may start at once.
    /// `place` names the server in errors.
    pub fn apply_postgres(&self, client: &mut Client, place: &str) -> Result<(), StoreError> {
        let wrap = |e: postgres::Error| StoreError::postgres(place, e);
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {} (version BIGINT PRIMARY KEY)",
                self.ledger
            ))
            .map_err(wrap)?;
        for (version, sql) in self.steps {
            let mut tx = client.transaction().map_err(wrap)?;
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                &[&self.ledger],
            )
            .map_err(wrap)?;
            let done = tx
                .query_opt(
                    &format!("SELECT 1 FROM {} WHERE version = $1", self.ledger),
                    &[version],
                )
                .map_err(wrap)?
                .is_some();
            if !done {
                tx.batch_execute(sql).map_err(wrap)?;
                tx.execute(
                    &format!("INSERT INTO {} (version) VALUES ($1)", self.ledger),
                    &[version],
                )
                .map_err(wrap)?;
            }
            tx.commit().map_err(wrap)?;
        }
        Ok(())
    }
}
