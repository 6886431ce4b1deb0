//! The audit store on PostgreSQL: the same schema and rule as SQLite — only the conflict on
//! `event_id` is a duplicate — in the database's default schema or in one the caller names.

use std::time::Duration;

use postgres::{Client, Config, GenericClient, NoTls};

use super::{
    migrations::AUDIT, sqlite::payload_column, AuditStore, BatchOutcome, Quarantined, StoreError,
};
use crate::event::AuditEvent;

/// Where a PostgreSQL target lives, without its password: for messages.
pub fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgres {host}:{port}/{db}")
}

pub struct PostgresAuditStore {
    client: Client,
    place: String,
}

/// Connects to `url` within `timeout`; returns the client and where it is, without password.
pub fn connect(url: &str, timeout: Duration) -> Result<(Client, String), StoreError> {
    let mut config: Config = url
        .parse()
        .map_err(|e: postgres::Error| StoreError::InvalidUrl {
            reason: e.to_string(),
        })?;
    let place = describe(&config);
    config
        .connect_timeout(timeout)
        .tcp_user_timeout(timeout)
        .application_name("lessonprobe");
    let client = config.connect(NoTls).map_err(|e| StoreError::Connect {
        place: place.clone(),
        reason: pg_reason(&e),
    })?;
    Ok((client, place))
}

impl PostgresAuditStore {
    /// Connects to an existing database (its default search_path) and brings the audit tables
    /// up to date; nothing else is created and nothing is dropped.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (client, place) = connect(url, timeout)?;
        let mut store = PostgresAuditStore { client, place };
        AUDIT.apply_postgres(&mut store.client, &store.place)?;
        Ok(store)
    }

    /// As [`open`](Self::open), inside `schema`, which must exist: the store's tables and
    /// every statement it runs live there.
    pub fn open_in_schema(url: &str, schema: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        client
            .batch_execute(&format!("SET search_path TO {}", quote_ident(schema)))
            .map_err(|e| StoreError::postgres(&place, e))?;
        AUDIT.apply_postgres(&mut client, &place)?;
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
    fn apply_batch(
        &mut self,
        events: &[AuditEvent],
        bad: &[Quarantined],
    ) -> Result<BatchOutcome, StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let column = |f: fn(&AuditEvent) -> &str| {
            events
                .iter()
                .map(|e| f(e).to_owned())
                .collect::<Vec<String>>()
        };
        let payloads: Vec<Option<String>> = events.iter().map(payload_column).collect();
        let mut tx = self.client.transaction().map_err(wrap)?;
        // One statement per batch; ON CONFLICT (event_id) also settles duplicates inside it.
        let inserted = tx
            .execute(
                "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                 ON CONFLICT (event_id) DO NOTHING",
                &[
                    &column(|e| &e.event_id),
                    &column(|e| &e.tenant_id),
                    &column(|e| &e.ticket_id),
                    &column(|e| &e.action),
                    &column(|e| &e.occurred_at),
                    &payloads,
                ],
            )
            .map_err(wrap)?;
        if !bad.is_empty() {
            let topics: Vec<&str> = bad.iter().map(|q| q.topic.as_str()).collect();
            let partitions: Vec<i32> = bad.iter().map(|q| q.partition).collect();
            let offsets: Vec<i64> = bad.iter().map(|q| q.offset).collect();
            let raws: Vec<&[u8]> = bad.iter().map(|q| q.raw.as_slice()).collect();
            let reasons: Vec<&str> = bad.iter().map(|q| q.reason.as_str()).collect();
            tx.execute(
                "INSERT INTO quarantined_records (topic, partition, record_offset, raw, reason)
                 SELECT * FROM unnest($1::text[], $2::int4[], $3::int8[], $4::bytea[], $5::text[])
                 ON CONFLICT (topic, partition, record_offset) DO NOTHING",
                &[&topics, &partitions, &offsets, &raws, &reasons],
            )
            .map_err(wrap)?;
        }
        tx.commit().map_err(wrap)?;
        Ok(BatchOutcome {
            inserted,
            duplicates: events.len() as u64 - inserted,
            quarantined: bad.len() as u64,
        })
    }

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

/// `name` as a PostgreSQL identifier, quoted.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The server's own words for a failure: SQLSTATE and message when the server said something.
fn pg_reason(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

impl StoreError {
    /// A failure of the PostgreSQL client at `place`: the server's SQLSTATE when it answered.
    pub fn postgres(place: &str, e: postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(db) => StoreError::Postgres {
                code: db.code().code().to_owned(),
                message: format!("{}: {}", place, db.message()),
            },
            None => StoreError::Lost {
                place: place.to_owned(),
                reason: e.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/audit"
            .parse()
            .unwrap();
        assert_eq!(describe(&config), "postgres db.example:6543/audit");
    }
}
