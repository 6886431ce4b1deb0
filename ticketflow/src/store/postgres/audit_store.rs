//! The consumer's audit store on PostgreSQL — the same rule as SQLite: only the conflict on
//! `event_id` is a duplicate.

use std::time::Duration;

use postgres::{Client, GenericClient};

use super::connect::{connect, quote_ident};
use crate::event::AuditEvent;
use crate::store::audit_store::AuditStore;
use crate::store::backend::Backend;
use crate::store::error::StoreError;
use crate::store::schema::{self, payload_column};

pub struct PostgresAuditStore {
    client: Client,
    place: String,
}

/// Creates `audit_events` in the current schema unless the search path finds one.
fn ensure_audit_table(client: &mut Client, place: &str) -> Result<(), StoreError> {
    client
        .batch_execute(&schema::audit_events(Backend::Postgres).replacen(
            "CREATE TABLE",
            "CREATE TABLE IF NOT EXISTS",
            1,
        ))
        .map_err(|e| StoreError::postgres(place, e))
}

impl PostgresAuditStore {
    /// Connects to an existing database (its default search_path) and creates `audit_events`
    /// when it is absent; nothing else is created and nothing is dropped.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        ensure_audit_table(&mut client, &place)?;
        Ok(PostgresAuditStore { client, place })
    }

    /// As [`open`](Self::open), inside `schema`, which must exist: the store's table and
    /// every statement it runs live there.
    pub fn open_in_schema(url: &str, schema: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        client
            .batch_execute(&format!("SET search_path TO {}", quote_ident(schema)))
            .map_err(|e| StoreError::postgres(&place, e))?;
        ensure_audit_table(&mut client, &place)?;
        Ok(PostgresAuditStore { client, place })
    }

    /// The connection, for effects a caller adds in the same transaction as an audit row.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Host, port and database, without the password: for messages.
    pub fn place(&self) -> &str {
        &self.place
    }
}

impl AuditStore for PostgresAuditStore {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.place.clone();
        // Its own transaction (autocommit); ON CONFLICT (event_id) only: every other
        // constraint error (23502 NOT NULL, 23514 CHECK, ...) propagates.
        insert_audit(&mut self.client, event).map_err(|e| StoreError::postgres(&place, e))
    }

    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        let place = self.place.clone();
        let row = self
            .client
            .query_one("SELECT COUNT(*) FROM audit_events", &[])
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(row.get::<_, i64>(0) as u64)
    }
}

/// Inserts the audit row unless its `event_id` exists (ON CONFLICT (event_id) only); `true`
/// when inserted. Public so a caller may add effects of its own in the same transaction.
pub fn insert_audit(
    client: &mut impl GenericClient,
    event: &AuditEvent,
) -> Result<bool, postgres::Error> {
    let payload = payload_column(event);
    let n = client.execute(
        "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (event_id) DO NOTHING",
        &[
            &event.event_id,
            &event.tenant_id,
            &event.ticket_id,
            &event.action,
            &event.occurred_at,
            &payload,
        ],
    )?;
    Ok(n == 1)
}
