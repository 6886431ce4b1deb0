//! The audit database a replay writes to: one grammar (`sqlite:FILE` or `postgres://URL`), the
//! bounds on every wait there, and what a replay does in it (inspect, prepare, record plans,
//! write batches with their checkpoint).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::batch::PlanScope;
use super::inspect::{Adoption, Inspection};
use super::ledger::{Batch, Claim, Counters, PlanStatus, RecordedPlan, Recording, WriteError};
use super::postgres::PostgresTarget;
use super::sqlite::SqliteTarget;
use super::StoreError;

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

/// How long the database may keep the replay waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a connection, the server's first answers and the TLS handshake included.
    pub connect: Duration,
    /// Any one statement, and any wait for a lock (PostgreSQL) or for the file (SQLite).
    pub statement: Duration,
}

impl Timeouts {
    /// The same bound for both.
    pub fn all(bound: Duration) -> Timeouts {
        Timeouts {
            connect: bound,
            statement: bound,
        }
    }
}

impl FromStr for AuditDb {
    type Err = AuditDbError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            super::tls::ConnectSpec::parse(text).map_err(|e| AuditDbError::BadUrl {
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

/// What a replay does in its target database. Every call is bounded by the [`Timeouts`] it
/// was opened with.
pub trait ReplayTarget: Send {
    /// The database, without a password: for messages.
    fn place(&self) -> &str;
    /// What the target holds; writes nothing.
    fn inspect(&mut self) -> Result<Inspection, StoreError>;
    /// Creates what `adoption` says is missing (`audit_events` when absent, the bookkeeping
    /// tables), and remembers how to write the adopted table.
    fn prepare(&mut self, adoption: &Adoption) -> Result<(), StoreError>;
    /// Every recorded plan with its partitions (none when there is no bookkeeping yet).
    fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError>;
    /// Records a new plan and its partitions, each with its checkpoint at its start.
    fn record_plan(&mut self, plan: &RecordedPlan) -> Result<(), StoreError>;
    /// Makes `owner` the owner of every partition of the plan (a writer that owned them before
    /// fails its next checkpoint), and marks the plan running.
    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError>;
    /// Records `plan` unless it, or another plan of its replay group, is recorded already —
    /// decided under a lock, so workers starting at once record it exactly once.
    fn record_plan_once(&mut self, plan: &RecordedPlan) -> Result<Recording, StoreError>;
    /// Makes `owner` the owner of one unfinished partition of the plan (the writer that owned
    /// it before fails its next checkpoint); waits for a batch of that partition in flight.
    /// `None`: the plan has no such partition.
    fn claim_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<Option<Claim>, StoreError>;
    /// Clears the owner of an unfinished partition where it is still `owner`.
    fn release_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<(), StoreError>;
    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError>;
    /// Conflicts recorded for the plan, per partition of the version not kept.
    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError>;
    /// Makes `batch` durable in one transaction together with its checkpoint — or, after
    /// [`begin`](Self::begin), writes it into the shared transaction inside a savepoint of its
    /// own (a batch that fails leaves no trace and the others stand), durable at
    /// [`commit`](Self::commit).
    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError>;
    /// This connection is one of `writers` writing at once: a memory budget for the whole run
    /// (SQLite's page cache) is split among them.
    fn share_with(&mut self, _writers: usize) -> Result<(), StoreError> {
        Ok(())
    }
    /// Opens one transaction for the batches written until [`commit`](Self::commit), of one
    /// partition or of several: fewer commits, each of more rows.
    fn begin(&mut self) -> Result<(), StoreError>;
    /// Commits the transaction [`begin`](Self::begin) opened: every batch written since is
    /// durable, with its checkpoint, or (on `Err`) none is.
    fn commit(&mut self) -> Result<(), StoreError>;
}

impl AuditDb {
    /// Opens the target for a replay: a SQLite file is created when missing.
    pub fn open_target(&self, timeouts: Timeouts) -> Result<Box<dyn ReplayTarget>, StoreError> {
        Ok(match self {
            AuditDb::Sqlite(path) => Box::new(SqliteTarget::open(path, timeouts, false)?),
            AuditDb::Postgres(url) => Box::new(PostgresTarget::open(url, timeouts)?),
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
            AuditDb::Sqlite(path) => Some(Box::new(SqliteTarget::open(path, timeouts, true)?)),
            AuditDb::Postgres(url) => Some(Box::new(PostgresTarget::open(url, timeouts)?)),
        })
    }

    /// What a target that does not exist yet holds: nothing.
    pub fn nothing_yet(&self) -> Inspection {
        Inspection {
            backend: match self {
                AuditDb::Sqlite(_) => super::Backend::Sqlite,
                AuditDb::Postgres(_) => super::Backend::Postgres,
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
            AuditDb::Postgres(url) => super::tls::ConnectSpec::parse(url)
                .ok()
                .and_then(|spec| spec.config.get_connect_timeout().copied()),
        }
    }
}

/// For messages: the file, or host, port and database — never a password.
impl fmt::Display for AuditDb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditDb::Sqlite(path) => write!(f, "sqlite {}", path.display()),
            AuditDb::Postgres(url) => match super::tls::ConnectSpec::parse(url) {
                Ok(spec) => f.write_str(&super::postgres::describe(&spec.config)),
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
