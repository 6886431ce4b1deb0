//! The audit store: the consumer's one durable effect, idempotent on `event_id`.

pub mod migrations;
pub mod postgres;
pub mod sqlite;
mod target;

pub use self::postgres::PostgresAuditStore;
pub use sqlite::SqliteAuditStore;
pub use target::{AuditDb, AuditDbError};

use crate::event::AuditEvent;

/// A record that is not an audit event, kept with the reason instead of being applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub raw: Vec<u8>,
    pub reason: String,
}

/// What one batch did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    pub inserted: u64,
    pub duplicates: u64,
    pub quarantined: u64,
}

/// A store that records each audit event at most once.
pub trait AuditStore: Send {
    /// Inserts the event in its own transaction. `Ok(true)`: inserted; `Ok(false)`: a row with
    /// this `event_id` already exists. Every other failure is an error, never `false`.
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;

    /// Applies `events` and records `bad` in `quarantined_records`, all in one transaction:
    /// when it returns `Ok`, every row is durable; on error, none is. The default applies
    /// events one by one (each idempotent) and has no quarantine.
    fn apply_batch(
        &mut self,
        events: &[AuditEvent],
        bad: &[Quarantined],
    ) -> Result<BatchOutcome, StoreError> {
        if !bad.is_empty() {
            return Err(StoreError::NoQuarantine);
        }
        let mut outcome = BatchOutcome::default();
        for event in events {
            if self.apply_once(event)? {
                outcome.inserted += 1;
            } else {
                outcome.duplicates += 1;
            }
        }
        Ok(outcome)
    }

    /// Rows in `audit_events`.
    fn audit_rows(&mut self) -> Result<u64, StoreError>;
}

/// Why an effect did not happen. Messages pass through unchanged so callers see the cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store refused the work for a reason of its own, in its own words.
    #[error("{0}")]
    Unavailable(String),
    #[error("invalid PostgreSQL URL: {reason}")]
    InvalidUrl { reason: String },
    /// No connection could be made; `place` is host, port and database, never a password.
    #[error("cannot connect to {place}: {reason}")]
    Connect { place: String, reason: String },
    /// The client failed without an answer from the server (a lost connection, a timeout).
    #[error("{place}: {reason}")]
    Lost { place: String, reason: String },
    #[error("this store has no quarantine for undecodable records")]
    NoQuarantine,
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
    fn apply_batch(
        &mut self,
        events: &[AuditEvent],
        bad: &[Quarantined],
    ) -> Result<BatchOutcome, StoreError> {
        (**self).apply_batch(events, bad)
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
