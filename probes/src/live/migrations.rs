//! Versioned migrations of the live service's tables, one list for SQLite and PostgreSQL,
//! recorded in a ledger table of the service's own (the audit store creates its table itself).

use postgres::Client;
use rusqlite::Connection;

use ticketflow::store::StoreError;

/// A component's migrations: `(version, statements)` in the common SQL of SQLite and
/// PostgreSQL, applied in order, each once, recorded in the table `ledger`.
#[derive(Debug, Clone, Copy)]
pub struct Migrations {
    pub ledger: &'static str,
    pub steps: &'static [(i64, &'static str)],
}

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
