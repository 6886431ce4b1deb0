//! The audit store: the consumer's one durable effect, idempotent on `event_id`; and the
//! replay's target database, adopted as found, with the replay's own bookkeeping beside it.

mod audit_db;
mod batch;
pub mod inspect;
pub mod ledger;
pub mod postgres;
pub mod schema;
pub mod schemas;
pub mod snapshot;
pub mod sqlite;
mod tls;

pub use self::postgres::PostgresAuditStore;
pub use audit_db::{AuditDb, AuditDbError, ReplayTarget, Timeouts};
pub use batch::PlanScope;
pub use inspect::{Adoption, Inspection, Unfit};
pub use ledger::{
    Batch, Claim, Counters, Entry, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
pub use snapshot::{Lookup, Scannable, Snapshot, StoredAt};
pub use sqlite::SqliteAuditStore;

use crate::event::AuditEvent;

/// Which SQL database a store speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

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
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The server refused the statement: SQLSTATE and its message.
    #[error("SQLSTATE {code}: {message}")]
    Postgres { code: String, message: String },
    /// The target must not be written to; nothing was.
    #[error(transparent)]
    Unfit(#[from] Unfit),
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

    /// Whether the server ended the statement only because it ran into another transaction —
    /// a deadlock (40P01) or a serialization failure (40001) — so that the same work, done
    /// again, may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Postgres { code, .. } if code == "40P01" || code == "40001")
    }
}
