//! The audit store: the consumer's one durable effect, idempotent on `event_id`; and the
//! replay's target database, adopted as found, with the replay's own bookkeeping beside it.

mod audit_db;
mod audit_store;
mod backend;
mod batch;
mod bookkeeping_sql;
mod error;
pub mod inspect;
pub mod ledger;
mod param;
mod patience;
pub mod postgres;
pub mod preflight;
mod replay_target;
pub mod schema;
pub mod schemas;
pub mod snapshot;
pub mod sqlite;
mod tls;
pub mod unanswered;

pub use self::postgres::PostgresAuditStore;
pub use audit_db::{AuditDb, AuditDbError};
pub use audit_store::AuditStore;
pub use backend::Backend;
pub use batch::PlanScope;
pub use error::StoreError;
pub use inspect::{Adoption, Inspection, Unfit};
pub use ledger::{
    Batch, Claim, Counters, Entry, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
pub use replay_target::{PartitionClaim, ReplayTarget, Timeouts, ANSWER_TIMEOUT, CONNECT_TIMEOUT};
pub use snapshot::{Lookup, Scannable, Snapshot, StoredAt};
pub use sqlite::SqliteAuditStore;
