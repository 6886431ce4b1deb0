//! Versioned schema migrations of the audit database, one list for every SQL backend.

/// `(version, statements)`, applied in order, each once, recorded in `schema_migrations`.
/// The SQL is the common subset of SQLite and PostgreSQL.
pub const MIGRATIONS: &[(i64, &str)] = &[
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
        2,
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
        3,
        "CREATE TABLE ticket_state (
            tenant_id TEXT NOT NULL,
            ticket_id TEXT NOT NULL,
            version   BIGINT NOT NULL,
            action    TEXT NOT NULL,
            PRIMARY KEY (tenant_id, ticket_id)
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
];
