//! Why a store's effect did not happen, in the store's own words, and what a caller may read
//! from it (a constraint that refused a row, a conflict worth trying again).

use super::inspect::Unfit;

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

impl StoreError {
    /// Whether the link to the database failed — no connection, or one lost or timed out
    /// without an answer — rather than the database refusing the work.
    pub fn lost_the_link(&self) -> bool {
        matches!(self, StoreError::Connect { .. } | StoreError::Lost { .. })
    }

    /// Whether the database is away for a while rather than refusing the work, so that the
    /// same work, begun again from the durable checkpoints once it is back, may succeed: the
    /// link failed (no connection, a reset, a timeout without an answer), or PostgreSQL said
    /// it is shutting down (57P01 admin shutdown, 57P02 crash shutdown), not accepting
    /// connections yet (57P03, a server starting or recovering), or lost the connection
    /// (class 08).
    pub fn is_outage(&self) -> bool {
        match self {
            StoreError::Connect { .. } | StoreError::Lost { .. } => true,
            StoreError::Postgres { code, .. } => {
                matches!(code.as_str(), "57P01" | "57P02" | "57P03") || code.starts_with("08")
            }
            _ => false,
        }
    }

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

    /// Whether the database ended the work only because it ran into another transaction, so
    /// that the same work, done again, may succeed: on PostgreSQL a deadlock (40P01), a
    /// serialization failure (40001) or a lock wait past `lock_timeout` (55P03); on SQLite a
    /// busy or locked file (which the busy timeout does not wait out when waiting could
    /// deadlock, e.g. a read transaction that wants to write after another writer committed).
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Postgres { code, .. } => {
                matches!(code.as_str(), "40P01" | "40001" | "55P03")
            }
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postgres(code: &str) -> StoreError {
        StoreError::Postgres {
            code: code.to_owned(),
            message: "postgres 127.0.0.1:5432/audit: ...".to_owned(),
        }
    }

    #[test]
    fn a_lost_link_is_an_outage() {
        let lost = StoreError::Lost {
            place: "postgres 127.0.0.1:5432/audit".into(),
            reason: "connection reset by peer".into(),
        };
        let refused = StoreError::Connect {
            place: "postgres 127.0.0.1:5432/audit".into(),
            reason: "Connection refused (os error 111)".into(),
        };
        assert!(lost.is_outage() && refused.is_outage());
    }

    #[test]
    fn a_server_shutting_down_or_starting_or_dropping_the_connection_is_an_outage() {
        for code in [
            "57P01", "57P02", "57P03", "08000", "08003", "08006", "08P01",
        ] {
            assert!(postgres(code).is_outage(), "{code}");
        }
    }

    #[test]
    fn a_refusal_of_the_work_is_no_outage() {
        // A constraint, a statement timeout, a permission, a lock wait (patience waits those
        // out itself), a query cancelled: the database answered.
        for code in [
            "23505", "23514", "57014", "42501", "55P03", "40P01", "42P01",
        ] {
            assert!(!postgres(code).is_outage(), "{code}");
        }
        assert!(!StoreError::Unavailable("no such database file".into()).is_outage());
        assert!(!StoreError::InvalidUrl {
            reason: "bad".into()
        }
        .is_outage());
    }
}
