//! The audit database a replay writes to: one grammar (`sqlite:FILE` or `postgres://URL`), and
//! the backend's target it opens.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::backend::Backend;
use super::error::StoreError;
use super::inspect::Inspection;
use super::patience::{Patience, Patient};
use super::postgres::{describe, PostgresTarget};
use super::replay_target::{ReplayTarget, Timeouts, ANSWER_TIMEOUT, CONNECT_TIMEOUT};
use super::sqlite::SqliteTarget;
use super::tls::ConnectSpec;

/// An existing (or new) audit database.
#[derive(Clone, PartialEq, Eq)]
pub enum AuditDb {
    /// A database file, created when missing, in WAL mode.
    Sqlite(PathBuf),
    /// A PostgreSQL database; new tables go into its current schema.
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
            ConnectSpec::parse(text).map_err(|e| AuditDbError::BadUrl {
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
    /// Opens the target for a replay: a SQLite file is created when missing.
    /// Its calls wait out other writers until `timeouts.contention` from now (see [`Patient`]).
    pub fn open_target(&self, timeouts: Timeouts) -> Result<Box<dyn ReplayTarget>, StoreError> {
        let patience = Patience::within(timeouts.contention);
        Ok(match self {
            AuditDb::Sqlite(path) => Box::new(Patient::new(
                SqliteTarget::open(path, timeouts, false)?,
                patience,
            )),
            AuditDb::Postgres(url) => {
                Box::new(Patient::new(PostgresTarget::open(url, timeouts)?, patience))
            }
        })
    }

    /// Opens the target to look only: `None` for a SQLite file that does not exist (and is
    /// not created).
    pub fn open_to_look(
        &self,
        timeouts: Timeouts,
    ) -> Result<Option<Box<dyn ReplayTarget>>, StoreError> {
        Ok(match self {
            AuditDb::Sqlite(path) if !path.exists() => None,
            AuditDb::Sqlite(path) => Some(Box::new(Patient::new(
                SqliteTarget::open(path, timeouts, true)?,
                Patience::within(timeouts.contention),
            ))),
            AuditDb::Postgres(url) => Some(Box::new(Patient::new(
                PostgresTarget::open(url, timeouts)?,
                Patience::within(timeouts.contention),
            ))),
        })
    }

    /// What a target that does not exist yet holds: nothing.
    pub fn nothing_yet(&self) -> Inspection {
        Inspection {
            backend: match self {
                AuditDb::Sqlite(_) => Backend::Sqlite,
                AuditDb::Postgres(_) => Backend::Postgres,
            },
            place: self.to_string(),
            schema: None,
            exists: false,
            audit_events: None,
            bookkeeping: Vec::new(),
            legacy: Vec::new(),
        }
    }

    /// The connect timeout the URL asks for (`connect_timeout=N`), if any.
    pub fn connect_timeout(&self) -> Option<Duration> {
        match self {
            AuditDb::Sqlite(_) => None,
            AuditDb::Postgres(url) => ConnectSpec::parse(url)
                .ok()
                .and_then(|spec| spec.config.get_connect_timeout().copied()),
        }
    }
}

// The bounds that depend on the URL's `connect_timeout`; the rest of `Timeouts` stands with
// `ReplayTarget`, whose calls it bounds.
impl Timeouts {
    /// A replay's, with `remaining` of its deadline left: connecting within the URL's
    /// `connect_timeout` (else [`CONNECT_TIMEOUT`]), each statement and lock wait within
    /// [`ANSWER_TIMEOUT`], contention waited out until the deadline; none past the deadline.
    pub fn replay(db: &AuditDb, remaining: Duration) -> Timeouts {
        Timeouts {
            connect: connect_within(db, remaining),
            statement: ANSWER_TIMEOUT.min(remaining),
            contention: remaining,
        }
    }

    /// For reading a target whole (`replay verify`, `replay status`): each statement may take
    /// the whole `deadline`, a scan of every row being one statement.
    pub fn reading(db: &AuditDb, deadline: Duration) -> Timeouts {
        Timeouts {
            connect: connect_within(db, deadline),
            statement: deadline,
            contention: deadline,
        }
    }
}

fn connect_within(db: &AuditDb, remaining: Duration) -> Duration {
    db.connect_timeout()
        .unwrap_or(CONNECT_TIMEOUT)
        .min(remaining)
}

/// For messages: the file, or host, port and database — never a password.
impl fmt::Display for AuditDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditDb::Sqlite(path) => write!(f, "sqlite {}", path.display()),
            AuditDb::Postgres(url) => match ConnectSpec::parse(url) {
                Ok(spec) => f.write_str(&describe(&spec.config)),
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
        let tls: AuditDb =
            "postgres://a@h/d?sslmode=verify-full&sslrootcert=/ca.pem&connect_timeout=3"
                .parse()
                .unwrap();
        assert_eq!(tls.connect_timeout(), Some(Duration::from_secs(3)));
        assert!("postgres://a@h/d?sslmode=sometimes"
            .parse::<AuditDb>()
            .is_err());
    }
}
