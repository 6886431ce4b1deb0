//! The `audit_events` every target of a run has, and where it stands.

use std::path::Path;

use ticketflow::store::schema::{self, RECORD_COLUMNS, REQUIRED_COLUMNS};
use ticketflow::store::Backend;

/// The `audit_events` every target of a run has.
#[derive(Clone, Copy, PartialEq)]
pub enum Table {
    /// The store's own, of 11 columns, created by the replay in a fresh target.
    Store,
    /// The lesson's six columns, created before the replay, which adopts it as it is.
    Lesson,
}

/// The first `k` columns of the store's own table, in its order, joined for SQL: the columns
/// every audit row has (the lesson's table, of six), then where each record came from.
pub fn column_list(k: usize) -> String {
    REQUIRED_COLUMNS
        .iter()
        .chain(&RECORD_COLUMNS)
        .take(k)
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

impl Table {
    pub fn from_env() -> Table {
        super::choice(
            "LESSONPROBE_BENCH_TABLE",
            &[("store", Table::Store), ("lesson", Table::Lesson)],
        )
    }

    pub fn columns(self) -> usize {
        match self {
            Table::Store => REQUIRED_COLUMNS.len() + RECORD_COLUMNS.len(),
            Table::Lesson => REQUIRED_COLUMNS.len(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Store => "store",
            Table::Lesson => "lesson",
        }
    }

    /// `CREATE TABLE` of `audit_events` as `qualified` (a table name, with its schema or not).
    pub fn create(self, backend: Backend, qualified: &str) -> String {
        match self {
            Table::Store => schema::audit_events(backend).replacen(
                "CREATE TABLE audit_events",
                &format!("CREATE TABLE {qualified}"),
                1,
            ),
            // The lesson's table: the event's six fields as text, a unique key on event_id.
            Table::Lesson => format!(
                "CREATE TABLE {qualified} (
                    event_id    TEXT NOT NULL CONSTRAINT audit_events_event_id_key UNIQUE,
                    tenant_id   TEXT NOT NULL,
                    ticket_id   TEXT NOT NULL,
                    action      TEXT NOT NULL,
                    occurred_at TEXT NOT NULL,
                    payload     TEXT NOT NULL
                )"
            ),
        }
    }

    /// Before a replay into the SQLite file `path`: the lesson's table there, or nothing (the
    /// replay makes its own).
    pub fn before_replay_sqlite(self, path: &Path) {
        if self == Table::Lesson {
            rusqlite::Connection::open(path)
                .and_then(|c| c.execute_batch(&self.create(Backend::Sqlite, "audit_events")))
                .expect("the lesson's audit_events in SQLite");
        }
    }

    /// Before a replay into the PostgreSQL schema `schema_name`: the schema made fresh, with
    /// the lesson's table in it, or empty (the replay makes its own).
    pub fn fresh_postgres_schema(self, client: &mut postgres::Client, schema_name: &str) {
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {schema_name} CASCADE; CREATE SCHEMA {schema_name}"
            ))
            .expect("a fresh schema");
        if self == Table::Lesson {
            client
                .batch_execute(
                    &self.create(Backend::Postgres, &format!("{schema_name}.audit_events")),
                )
                .expect("the lesson's audit_events in PostgreSQL");
        }
    }
}

/// `url` with its search path set to `schema`.
pub fn in_schema(url: &str, schema: &str) -> String {
    let glue = if url.contains('?') { '&' } else { '?' };
    format!("{url}{glue}options=-csearch_path%3D{schema}")
}
