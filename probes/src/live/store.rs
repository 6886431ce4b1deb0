//! The live service's tables (notifications, SLA counts, ticket state) beside the audit store,
//! on SQLite and on PostgreSQL, with migrations of their own.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, OptionalExtension};
use ticketflow::event::AuditEvent;
use ticketflow::store::{
    postgres, sqlite, AuditStore, PostgresAuditStore, SqliteAuditStore, StoreError,
};

use super::migrations::Migrations;
use super::{LiveStore, TicketKey};
use crate::case_schema::CaseSchema;

/// The live service's business tables, recorded apart from the audit store's migrations.
pub const LIVE_TABLES: Migrations = Migrations {
    ledger: "live_schema_migrations",
    steps: &[
        (
            1,
            "CREATE TABLE notifications (
                event_id  TEXT NOT NULL,
                tenant_id TEXT NOT NULL,
                ticket_id TEXT NOT NULL
            );
            CREATE TABLE sla_counts (
                tenant_id TEXT NOT NULL PRIMARY KEY,
                changes   BIGINT NOT NULL
            )",
        ),
        (
            2,
            "CREATE TABLE ticket_state (
                tenant_id TEXT NOT NULL,
                ticket_id TEXT NOT NULL,
                version   BIGINT NOT NULL,
                action    TEXT NOT NULL,
                PRIMARY KEY (tenant_id, ticket_id)
            )",
        ),
    ],
};

/// The audit store's own operations, passed through to the store inside `$field`.
macro_rules! audit_store_via {
    ($type:ty, $field:ident) => {
        impl AuditStore for $type {
            fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
                self.$field.apply_once(event)
            }
            fn audit_rows(&mut self) -> Result<u64, StoreError> {
                self.$field.audit_rows()
            }
        }
    };
}

/// The live service on SQLite, in memory or in a file.
pub struct LiveSqlite {
    audit: SqliteAuditStore,
}

impl LiveSqlite {
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::with_tables(SqliteAuditStore::in_memory()?)
    }

    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::with_tables(SqliteAuditStore::open(path)?)
    }

    fn with_tables(audit: SqliteAuditStore) -> Result<Self, StoreError> {
        LIVE_TABLES.apply_sqlite(audit.connection())?;
        Ok(LiveSqlite { audit })
    }
}

audit_store_via!(LiveSqlite, audit);

impl LiveStore for LiveSqlite {
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let tx = self.audit.connection().unchecked_transaction()?;
        let inserted = sqlite::insert_audit(&tx, event)?;
        if inserted {
            tx.execute(
                "INSERT INTO notifications (event_id, tenant_id, ticket_id) VALUES (?1, ?2, ?3)",
                params![event.event_id, event.tenant_id, event.ticket_id],
            )?;
            tx.execute(
                "INSERT INTO sla_counts (tenant_id, changes) VALUES (?1, 1)
                 ON CONFLICT (tenant_id) DO UPDATE SET changes = sla_counts.changes + 1",
                params![event.tenant_id],
            )?;
        }
        tx.commit()?;
        Ok(inserted)
    }

    fn business_counts(&mut self) -> Result<(u64, u64), StoreError> {
        let conn = self.audit.connection();
        let n: i64 = conn.query_row("SELECT COUNT(*) FROM notifications", [], |r| r.get(0))?;
        let sla: i64 = conn.query_row(
            "SELECT COALESCE(SUM(changes), 0) FROM sla_counts",
            [],
            |r| r.get(0),
        )?;
        Ok((n as u64, sla as u64))
    }

    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError> {
        let n = self.audit.connection().execute(
            "DELETE FROM audit_events WHERE occurred_at >= ?1 AND occurred_at < ?2",
            params![from, to],
        )?;
        Ok(n as u64)
    }

    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let version = event.version().unwrap_or(0);
        let n = self.audit.connection().execute(
            "INSERT INTO ticket_state (tenant_id, ticket_id, version, action) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (tenant_id, ticket_id) DO UPDATE SET version = excluded.version, action = excluded.action
             WHERE excluded.version > ticket_state.version",
            params![event.tenant_id, event.ticket_id, version, event.action],
        )?;
        Ok(n == 1)
    }

    fn ticket_version(&mut self, ticket: TicketKey<'_>) -> Result<Option<i64>, StoreError> {
        Ok(self
            .audit
            .connection()
            .query_row(
                "SELECT version FROM ticket_state WHERE tenant_id = ?1 AND ticket_id = ?2",
                params![ticket.tenant_id, ticket.ticket_id],
                |r| r.get(0),
            )
            .optional()?)
    }
}

/// The live service on PostgreSQL, inside a case schema dropped after the store closes.
pub struct LivePostgres {
    // Declared first so its connection closes before the schema is dropped.
    audit: PostgresAuditStore,
    _schema: CaseSchema,
}

impl LivePostgres {
    /// Creates the case schema `schema` on `url` and opens both sets of tables in it.
    pub fn in_case_schema(url: &str, schema: &str, timeout: Duration) -> Result<Self, StoreError> {
        let schema_of_case = CaseSchema::create(url, schema, timeout)?;
        let mut audit = PostgresAuditStore::open_in_schema(url, schema_of_case.name(), timeout)?;
        let place = audit.place().to_owned();
        LIVE_TABLES.apply_postgres(audit.client(), &place)?;
        Ok(LivePostgres {
            audit,
            _schema: schema_of_case,
        })
    }
}

audit_store_via!(LivePostgres, audit);

impl LiveStore for LivePostgres {
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.audit.place().to_owned();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.audit.client().transaction().map_err(wrap)?;
        let inserted = postgres::insert_audit(&mut tx, event).map_err(wrap)?;
        if inserted {
            tx.execute(
                "INSERT INTO notifications (event_id, tenant_id, ticket_id) VALUES ($1, $2, $3)",
                &[&event.event_id, &event.tenant_id, &event.ticket_id],
            )
            .map_err(wrap)?;
            tx.execute(
                "INSERT INTO sla_counts (tenant_id, changes) VALUES ($1, 1)
                 ON CONFLICT (tenant_id) DO UPDATE SET changes = sla_counts.changes + 1",
                &[&event.tenant_id],
            )
            .map_err(wrap)?;
        }
        tx.commit().map_err(wrap)?;
        Ok(inserted)
    }

    fn business_counts(&mut self) -> Result<(u64, u64), StoreError> {
        let place = self.audit.place().to_owned();
        let row = self
            .audit
            .client()
            .query_one("SELECT (SELECT COUNT(*) FROM notifications), (SELECT COALESCE(SUM(changes), 0)::BIGINT FROM sla_counts)", &[])
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
    }

    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError> {
        let place = self.audit.place().to_owned();
        self.audit
            .client()
            .execute(
                "DELETE FROM audit_events WHERE occurred_at >= $1 AND occurred_at < $2",
                &[&from, &to],
            )
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.audit.place().to_owned();
        let version = event.version().unwrap_or(0);
        let n = self
            .audit
            .client()
            .execute(
                "INSERT INTO ticket_state (tenant_id, ticket_id, version, action) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (tenant_id, ticket_id) DO UPDATE SET version = excluded.version, action = excluded.action
                 WHERE excluded.version > ticket_state.version",
                &[&event.tenant_id, &event.ticket_id, &version, &event.action],
            )
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(n == 1)
    }

    fn ticket_version(&mut self, ticket: TicketKey<'_>) -> Result<Option<i64>, StoreError> {
        let place = self.audit.place().to_owned();
        let row = self
            .audit
            .client()
            .query_opt(
                "SELECT version FROM ticket_state WHERE tenant_id = $1 AND ticket_id = $2",
                &[&ticket.tenant_id, &ticket.ticket_id],
            )
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(row.map(|r| r.get(0)))
    }
}
