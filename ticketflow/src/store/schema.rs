//! The tables the audit store may create, in the SQL of each backend: `audit_events` (only when
//! absent) and the replay's own bookkeeping, every one of them named `lessonprobe_replay_*`.

use super::backend::Backend;
use crate::event::AuditEvent;

/// The audit table's name, fixed by the lesson.
pub const AUDIT_TABLE: &str = "audit_events";

/// The columns every audit row has; an adopted table must have them all.
pub const REQUIRED_COLUMNS: [&str; 6] = [
    "event_id",
    "tenant_id",
    "ticket_id",
    "action",
    "occurred_at",
    "payload",
];

/// Where a row came from and what exactly arrived: written only when the table has them.
pub const RECORD_COLUMNS: [&str; 5] = [
    "record",
    "topic",
    "partition",
    "record_offset",
    "record_timestamp",
];

/// The replay's bookkeeping tables, in the order they are created.
pub const BOOKKEEPING: [&str; 5] = [
    "lessonprobe_replay_plans",
    "lessonprobe_replay_partitions",
    "lessonprobe_replay_batches",
    "lessonprobe_replay_quarantine",
    "lessonprobe_replay_conflicts",
];

/// Tables an earlier lessonprobe created in replay targets; never created or written again.
pub const LEGACY: [&str; 2] = ["schema_migrations", "quarantined_records"];

fn bytes(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "BLOB",
        Backend::Postgres => "BYTEA",
    }
}

/// `CREATE TABLE audit_events`: text columns that hold an event as received, the raw record
/// and its place in the log. The record columns are nullable so the lesson's consumer, which
/// knows no record, writes the same table.
pub fn audit_events(backend: Backend) -> String {
    format!(
        "CREATE TABLE audit_events (
            event_id         TEXT NOT NULL CONSTRAINT audit_events_event_id_key UNIQUE,
            tenant_id        TEXT NOT NULL CHECK (tenant_id <> ''),
            ticket_id        TEXT NOT NULL CHECK (ticket_id <> ''),
            action           TEXT NOT NULL CHECK (action <> ''),
            occurred_at      TEXT NOT NULL,
            payload          TEXT NOT NULL,
            record           {bytes},
            topic            TEXT,
            partition        INTEGER,
            record_offset    BIGINT,
            record_timestamp BIGINT
        )",
        bytes = bytes(backend)
    )
}

/// `CREATE TABLE` of one bookkeeping table.
pub fn bookkeeping(table: &str, backend: Backend) -> String {
    let columns = match table {
        "lessonprobe_replay_plans" => "plan_id      TEXT NOT NULL PRIMARY KEY,
            topic        TEXT NOT NULL,
            replay_group TEXT NOT NULL,
            live_group   TEXT NOT NULL,
            window_kind  TEXT NOT NULL,
            since_ms     BIGINT,
            until_ms     BIGINT,
            start_offset BIGINT,
            stop_offset  BIGINT,
            partitions   TEXT NOT NULL,
            created_at   TEXT NOT NULL,
            created_by   TEXT NOT NULL,
            status       TEXT NOT NULL,
            finished_at  TEXT"
            .to_owned(),
        "lessonprobe_replay_partitions" => "plan_id      TEXT NOT NULL,
            partition    INTEGER NOT NULL,
            start_offset BIGINT NOT NULL,
            stop_offset  BIGINT NOT NULL,
            captured_end BIGINT NOT NULL,
            next_offset  BIGINT NOT NULL,
            owner        TEXT,
            records      BIGINT NOT NULL DEFAULT 0,
            inserted     BIGINT NOT NULL DEFAULT 0,
            duplicates   BIGINT NOT NULL DEFAULT 0,
            conflicts    BIGINT NOT NULL DEFAULT 0,
            quarantined  BIGINT NOT NULL DEFAULT 0,
            markers      BIGINT NOT NULL DEFAULT 0,
            aborted      BIGINT NOT NULL DEFAULT 0,
            updated_at   TEXT NOT NULL,
            PRIMARY KEY (plan_id, partition)"
            .to_owned(),
        "lessonprobe_replay_batches" => "plan_id      TEXT NOT NULL,
            partition    INTEGER NOT NULL,
            first_offset BIGINT NOT NULL,
            next_offset  BIGINT NOT NULL,
            records      BIGINT NOT NULL,
            owner        TEXT,
            applied_at   TEXT NOT NULL,
            PRIMARY KEY (plan_id, partition, first_offset)"
            .to_owned(),
        "lessonprobe_replay_quarantine" => format!(
            "plan_id        TEXT NOT NULL,
            topic          TEXT NOT NULL,
            partition      INTEGER NOT NULL,
            record_offset  BIGINT NOT NULL,
            record         {} NOT NULL,
            reason         TEXT NOT NULL,
            quarantined_at TEXT NOT NULL,
            PRIMARY KEY (plan_id, topic, partition, record_offset)",
            bytes(backend)
        ),
        "lessonprobe_replay_conflicts" => "plan_id            TEXT NOT NULL,
            event_id           TEXT NOT NULL,
            stored_topic       TEXT,
            stored_partition   INTEGER,
            stored_offset      BIGINT,
            stored_hash        TEXT NOT NULL,
            incoming_topic     TEXT NOT NULL,
            incoming_partition INTEGER NOT NULL,
            incoming_offset    BIGINT NOT NULL,
            incoming_hash      TEXT NOT NULL,
            found_at           TEXT NOT NULL,
            PRIMARY KEY (plan_id, incoming_topic, incoming_partition, incoming_offset)"
            .to_owned(),
        _ => return String::new(),
    };
    format!("CREATE TABLE {table} (\n            {columns}\n        )")
}

/// The statement that gives an adopted `audit_events` the unique key the replay needs.
pub fn add_unique_key(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => {
            "CREATE UNIQUE INDEX audit_events_event_id_key ON audit_events (event_id);"
        }
        Backend::Postgres => {
            "ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_id_key UNIQUE (event_id);"
        }
    }
}

/// The statements that add the record columns `missing` to an adopted `audit_events`.
pub fn add_record_columns(backend: Backend, missing: &[&str]) -> Vec<String> {
    missing
        .iter()
        .map(|column| {
            let ty = match *column {
                "record" => bytes(backend),
                "topic" => "TEXT",
                "partition" => "INTEGER",
                _ => "BIGINT",
            };
            format!("ALTER TABLE audit_events ADD COLUMN {column} {ty};")
        })
        .collect()
}

/// The `payload` column's value for `event`: a JSON `null` payload is stored as SQL NULL, which
/// the schema refuses.
pub(crate) fn payload_column(event: &AuditEvent) -> Option<String> {
    (!event.payload.is_null()).then(|| event.payload.to_string())
}
