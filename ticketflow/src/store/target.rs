//! The audit database a replay writes to, in one grammar: `sqlite:FILE` or `postgres://URL`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::{AuditStore, PostgresAuditStore, SqliteAuditStore, StoreError};

/// An existing (or new) audit database, opened with the audit tables only.
#[derive(Clone, PartialEq, Eq)]
pub enum AuditDb {
    /// A database file, created when missing, in WAL mode.
    Sqlite(PathBuf),
    /// A PostgreSQL database; the tables go into its default schema.
    Postgres(String),
}

/// Why a text names no audit database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditDbError {
    #[error("{text:?}: expected sqlite:PATH or postgres://URL")]
    Unknown { text: String },
    #[error("{text:?}: sqlite: needs a file path (sqlite:PATH)")]
    NoPath { text: String },
    #[error("invalid PostgreSQL URL: {reason}")]
    BadUrl { reason: String },
}

impl FromStr for AuditDb {
    type Err = AuditDbError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            text.parse::<postgres::Config>()
                .map_err(|e| AuditDbError::BadUrl {
                    reason: e.to_string(),
                })?;
            return Ok(AuditDb::Postgres(text.to_owned()));
        }
        match text.strip_prefix("sqlite:") {
            Some("") => Err(AuditDbError::NoPath {
                text: text.to_owned(),
            }),
            Some(path) => Ok(AuditDb::Sqlite(PathBuf::from(path))),
            None => Err(AuditDbError::Unknown {
                text: text.to_owned(),
            }),
        }
    }
}

impl AuditDb {
    /// Connects (PostgreSQL within `timeout`) and brings the audit tables up to date.
    pub fn open(&self, timeout: Duration) -> Result<Box<dyn AuditStore>, StoreError> {
        Ok(match self {
            AuditDb::Sqlite(path) => Box::new(SqliteAuditStore::open(path)?),
            AuditDb::Postgres(url) => Box::new(PostgresAuditStore::open(url, timeout)?),
        })
    }
}

/// For messages: the file, or host, port and database — never a password.
impl fmt::Display for AuditDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditDb::Sqlite(path) => write!(f, "sqlite {}", path.display()),
            AuditDb::Postgres(url) => match url.parse::<postgres::Config>() {
                Ok(config) => f.write_str(&super::postgres::describe(&config)),
                Err(_) => f.write_str("PostgreSQL"),
            },
        }
    }
}

impl fmt::Debug for AuditDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuditDb({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar_for_files_and_servers_and_no_password_in_messages() {
        assert_eq!(
            "sqlite:audit.db".parse(),
            Ok(AuditDb::Sqlite("audit.db".into()))
        );
        let pg: AuditDb = "postgres://a:s3cret@db.example:6543/audit".parse().unwrap();
        assert_eq!(pg.to_string(), "postgres db.example:6543/audit");
        assert!(!format!("{pg:?}").contains("s3cret"));
        assert!(matches!(
            "sqlite:".parse::<AuditDb>(),
            Err(AuditDbError::NoPath { .. })
        ));
        let unknown = "mysql://x".parse::<AuditDb>().unwrap_err().to_string();
        assert_eq!(
            unknown,
            "\"mysql://x\": expected sqlite:PATH or postgres://URL"
        );
    }
}
