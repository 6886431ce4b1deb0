//! The audit store: the consumer's one durable effect, idempotent on `event_id`.

pub mod postgres;
mod schema;
pub mod sqlite;

pub use self::postgres::PostgresAuditStore;
pub use sqlite::SqliteAuditStore;

use crate::event::AuditEvent;

/// A store that records each audit event at most once.
pub trait AuditStore: Send {
    /// Inserts the event in its own transaction. `Ok(true)`: inserted; `Ok(false)`: a row with
    /// this `event_id` already exists. Every other failure is an error, never `false`.
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;

    /// Rows in `audit_events`.
    fn audit_rows(&mut self) -> Result<u64, StoreError>;
}

/// Why an effect did not happen. Messages pass through unchanged so callers see the cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or refused the work for a reason of its own.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The server refused the statement: SQLSTATE and its message.
    #[error("SQLSTATE {code}: {message}")]
    Postgres { code: String, message: String },
}

impl<T: AuditStore + ?Sized> AuditStore for Box<T> {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        (**self).apply_once(event)
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        (**self).audit_rows()
    }
}

impl StoreError {
    /// `Some("check")` or `Some("not-null")` when a schema constraint other than the
    /// `event_id` uniqueness refused the row.
    pub fn integrity_violation(&self) -> Option<&'static str> {
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, msg)) => {
                let msg = msg.as_deref().unwrap_or_default();
                match e.extended_code {
                    rusqlite::ffi::SQLITE_CONSTRAINT_CHECK => Some("check"),
                    rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL => Some("not-null"),
                    _ if msg.contains("CHECK constraint") => Some("check"),
                    _ => None,
                }
            }
            StoreError::Postgres { code, .. } => match code.as_str() {
                "23514" => Some("check"),
                "23502" => Some("not-null"),
                _ => None,
            },
            _ => None,
        }
    }
}
