//! What the runner hands a probe (its database, its broker, its deadline, a run id) and how
//! a probe says it did not pass.

use std::path::PathBuf;
use std::time::Duration;

use crate::live::LiveStore;
use crate::store::postgres::schema_for_run;
use crate::store::{AuditStore, PostgresAuditStore, SqliteAuditStore, StoreError};

/// Which SQL database a probe's store lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbTarget {
    SqliteMemory,
    SqliteFile(PathBuf),
    /// A PostgreSQL URL; each probe works in a schema of its own, dropped afterwards.
    Postgres(String),
}

/// Which Kafka-protocol broker a probe talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaTarget {
    /// librdkafka's mock cluster, started inside the probe.
    Embedded,
    /// A broker given by bootstrap address, with extra client properties.
    Bootstrap {
        servers: String,
        properties: Vec<(String, String)>,
    },
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
}

impl ProbeContext {
    pub fn open_store(&self) -> Result<Box<dyn AuditStore>, ProbeError> {
        Ok(self.open_live_store()?)
    }

    /// The store with the live service's business tables, for probes that play the live consumer.
    pub fn open_live_store(&self) -> Result<Box<dyn LiveStore>, ProbeError> {
        let store: Result<Box<dyn LiveStore>, StoreError> = match &self.db {
            DbTarget::SqliteMemory => SqliteAuditStore::in_memory().map(|s| Box::new(s) as _),
            DbTarget::SqliteFile(path) => SqliteAuditStore::open(path).map(|s| Box::new(s) as _),
            DbTarget::Postgres(url) => {
                let timeout = self.deadline.min(std::time::Duration::from_secs(10));
                PostgresAuditStore::scratch(url, &schema_for_run(&self.run_id), timeout)
                    .map(|s| Box::new(s) as _)
            }
        };
        store.map_err(|e| ProbeError::Broken(format!("cannot open the audit store: {e}")))
    }
}

/// A probe that did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// It ran, and the claim did not hold.
    #[error("{0}")]
    Failed(String),
    /// It could not run or finish (a service missing, a connection refused).
    #[error("{0}")]
    Broken(String),
}

/// `Ok(())` when `holds`, else a failed claim with `what`.
pub(crate) fn ensure(holds: bool, what: impl FnOnce() -> String) -> Result<(), ProbeError> {
    if holds {
        Ok(())
    } else {
        Err(ProbeError::Failed(what()))
    }
}

/// A probe written in Rust. It returns what it prints; the manifest pins that text.
pub struct BuiltinProbe {
    pub name: &'static str,
    pub summary: &'static str,
    pub run: fn(&ProbeContext) -> Result<String, ProbeError>,
}
