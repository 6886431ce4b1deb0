//! The audit store on PostgreSQL: the same schema and rule as SQLite — only the conflict on
//! `event_id` is a duplicate — inside a schema of its own, dropped when the store is.

use std::time::Duration;

use postgres::{Client, Config, GenericClient, NoTls};

use super::{
    schema::MIGRATIONS, sqlite::payload_column, AuditStore, BatchOutcome, Quarantined, StoreError,
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
    /// The scratch schema this store created and drops, if any.
    schema: Option<String>,
    place: String,
}

fn connect(url: &str, timeout: Duration) -> Result<(Client, String), StoreError> {
    let mut config: Config = url
        .parse()
        .map_err(|e| StoreError::Unavailable(format!("invalid PostgreSQL URL: {e}")))?;
    let place = describe(&config);
    config
        .connect_timeout(timeout)
        .tcp_user_timeout(timeout)
        .application_name("lessonprobe");
    let client = config.connect(NoTls).map_err(|e| {
        StoreError::Unavailable(format!("cannot connect to {place}: {}", pg_reason(&e)))
    })?;
    Ok((client, place))
}

impl PostgresAuditStore {
    /// Connects to `url` (deadline `timeout`) and creates `schema` for this store alone; the
    /// schema is dropped with the store. For probes.
    pub fn scratch(url: &str, schema: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (client, place) = connect(url, timeout)?;
        let mut store = PostgresAuditStore {
            client,
            schema: Some(schema.to_owned()),
            place,
        };
        let quoted = quote_ident(schema);
        store
            .client
            .batch_execute(&format!(
                "CREATE SCHEMA {quoted}; SET search_path TO {quoted}"
            ))
            .map_err(|e| StoreError::postgres(&store.place, e))?;
        store.migrate()?;
        Ok(store)
    }

    /// Connects to an existing database (its default search_path) and brings its schema up to
    /// date; nothing is dropped. For replays into real data.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (client, place) = connect(url, timeout)?;
        let mut store = PostgresAuditStore {
            client,
            schema: None,
            place,
        };
        store.migrate()?;
        Ok(store)
    }

    /// Applies the missing migrations, each in a transaction under an advisory lock, so
    /// several connections may start at once.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let place = self.place.clone();
        let wrap = |e: postgres::Error| StoreError::postgres(&place, e);
        self.client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY)",
            )
            .map_err(wrap)?;
        for (version, sql) in MIGRATIONS {
            let mut tx = self.client.transaction().map_err(wrap)?;
            tx.execute("SELECT pg_advisory_xact_lock(7302029)", &[])
                .map_err(wrap)?;
            let done = tx
                .query_opt(
                    "SELECT 1 FROM schema_migrations WHERE version = $1",
                    &[version],
                )
                .map_err(wrap)?
                .is_some();
            if !done {
                tx.batch_execute(sql).map_err(wrap)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version) VALUES ($1)",
                    &[version],
                )
                .map_err(wrap)?;
            }
            tx.commit().map_err(wrap)?;
        }
        Ok(())
    }
}

impl Drop for PostgresAuditStore {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.as_deref().filter(|_| !self.client.is_closed()) {
            let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(schema));
            if let Err(e) = self.client.batch_execute(&sql) {
                tracing::warn!("{}: dropping schema {schema}: {e}", self.place);
            }
        }
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

impl crate::live::LiveStore for PostgresAuditStore {
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.client.transaction().map_err(wrap)?;
        let inserted = insert_audit(&mut tx, event).map_err(wrap)?;
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
        let place = self.place.clone();
        let row = self
            .client
            .query_one("SELECT (SELECT COUNT(*) FROM notifications), (SELECT COALESCE(SUM(changes), 0)::BIGINT FROM sla_counts)", &[])
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
    }

    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError> {
        let place = self.place.clone();
        self.client
            .execute(
                "DELETE FROM audit_events WHERE occurred_at >= $1 AND occurred_at < $2",
                &[&from, &to],
            )
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.place.clone();
        let version = event.version().unwrap_or(0);
        let n = self
            .client
            .execute(
                "INSERT INTO ticket_state (tenant_id, ticket_id, version, action) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (tenant_id, ticket_id) DO UPDATE SET version = excluded.version, action = excluded.action
                 WHERE excluded.version > ticket_state.version",
                &[&event.tenant_id, &event.ticket_id, &version, &event.action],
            )
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(n == 1)
    }

    fn ticket_version(
        &mut self,
        tenant_id: &str,
        ticket_id: &str,
    ) -> Result<Option<i64>, StoreError> {
        let place = self.place.clone();
        let row = self
            .client
            .query_opt(
                "SELECT version FROM ticket_state WHERE tenant_id = $1 AND ticket_id = $2",
                &[&tenant_id, &ticket_id],
            )
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(row.map(|r| r.get(0)))
    }
}

/// Inserts the audit row unless its `event_id` exists (ON CONFLICT (event_id) only); `true`
/// when inserted.
fn insert_audit(
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

/// A schema name for a run: `lp_`, a hash of the whole run id, and as much of it as fits.
pub fn schema_for_run(run_id: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in run_id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let tail: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    let tail: String = tail
        .chars()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("lp_{hash:016x}_{tail}")
}

fn quote_ident(name: &str) -> String {
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
    pub(crate) fn postgres(place: &str, e: postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(db) => StoreError::Postgres {
                code: db.code().code().to_owned(),
                message: format!("{}: {}", place, db.message()),
            },
            None => StoreError::Unavailable(format!("{place}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_safe_distinct_and_fit_postgres_identifiers() {
        let a = schema_for_run("20261130-1234-l30-01-postgres");
        let b = schema_for_run("20261130-1235-l30-01-postgres");
        assert_ne!(a, b);
        assert!(
            a.len() <= 63 && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{a}"
        );
        assert!(schema_for_run(&"x".repeat(200)).len() <= 63);
    }

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/audit"
            .parse()
            .unwrap();
        assert_eq!(describe(&config), "postgres db.example:6543/audit");
    }
}
