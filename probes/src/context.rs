//! What the runner hands a probe (its database, its broker, its deadline, a run id) and how
//! a probe says it did not pass.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ticketflow::kafka::KafkaError;
use ticketflow::store::StoreError;
use ticketflow::KafkaTarget;

use crate::case_schema::schema_for_run;
use crate::live::{LiveError, LivePostgres, LiveSqlite, LiveStore};

/// Which SQL database a probe's store lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbTarget {
    SqliteMemory,
    SqliteFile(PathBuf),
    /// A PostgreSQL URL; each probe works in a schema of its own, dropped afterwards.
    Postgres(String),
}

/// Everything a probe may use; nothing else reaches it.
#[derive(Debug, Clone)]
pub struct ProbeContext {
    pub db: DbTarget,
    pub kafka: KafkaTarget,
    /// The probe's deadline; a probe bounds its own waits by it.
    pub deadline: Duration,
    /// Unique per run, for names on shared services (topics, groups, schemas).
    pub run_id: String,
    /// Set when the run is cancelled: the probe stops at its next step.
    pub cancel: Cancel,
}

impl ProbeContext {
    /// `Err` once the run is cancelled. A probe calls it between its steps and returns the
    /// error, so what it holds (schemas, topics) is released on the way out.
    pub fn proceed(&self) -> Result<(), ProbeError> {
        if self.cancel.is_cancelled() {
            Err(ProbeError::broken("cancelled: the run was interrupted"))
        } else {
            Ok(())
        }
    }

    /// The audit store, beside the live service's business tables (for probes that play the
    /// live consumer).
    pub fn open_live_store(&self) -> Result<Box<dyn LiveStore>, ProbeError> {
        self.proceed()?;
        let store: Result<Box<dyn LiveStore>, StoreError> = match &self.db {
            DbTarget::SqliteMemory => LiveSqlite::in_memory().map(|s| Box::new(s) as _),
            DbTarget::SqliteFile(path) => LiveSqlite::open(path).map(|s| Box::new(s) as _),
            DbTarget::Postgres(url) => {
                let timeout = self.deadline.min(Duration::from_secs(10));
                LivePostgres::in_case_schema(url, &schema_for_run(&self.run_id), timeout)
                    .map(|s| Box::new(s) as _)
            }
        };
        store.map_err(|source| ProbeError::Store {
            doing: "cannot open the audit store".into(),
            source,
        })
    }
}

/// A run's cancellation, shared by everything the run started. Cancelling only stores a flag,
/// so it may be done from a signal handler.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A probe that did not pass: FAIL when the claim did not hold, ERROR for everything else.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// It ran, and the claim did not hold: what it saw instead.
    #[error("{observed}")]
    Failed { observed: String },
    /// The store failed at a step the claim does not test.
    #[error("{doing}: {source}")]
    Store { doing: String, source: StoreError },
    /// The broker failed at a step the claim does not test.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The simulated live service stopped before it consumed what it was given.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// Anything else that kept it from running or finishing, in the words of who saw it.
    #[error("{reason}")]
    Broken { reason: String },
}

impl ProbeError {
    pub fn failed(observed: impl Into<String>) -> Self {
        ProbeError::Failed {
            observed: observed.into(),
        }
    }

    pub fn broken(reason: impl Display) -> Self {
        ProbeError::Broken {
            reason: reason.to_string(),
        }
    }

    /// A failed claim (FAIL), as opposed to a probe that could not run or finish (ERROR).
    pub fn is_failure(&self) -> bool {
        matches!(self, ProbeError::Failed { .. })
    }
}

/// `Ok(())` when `holds`, else a failed claim with `what`.
pub(crate) fn ensure(holds: bool, what: impl FnOnce() -> String) -> Result<(), ProbeError> {
    if holds {
        Ok(())
    } else {
        Err(ProbeError::failed(what()))
    }
}

/// A probe written in Rust. It returns what it prints; the manifest pins that text.
pub struct BuiltinProbe {
    pub name: &'static str,
    pub summary: &'static str,
    pub run: fn(&ProbeContext) -> Result<String, ProbeError>,
}
