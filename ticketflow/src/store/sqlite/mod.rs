//! SQLite (bundled): opening a file, the consumer's audit store, a file as a replay's target
//! with its bookkeeping, and the batch writer.

mod audit_store;
mod batch;
mod connect;
mod target;

pub use audit_store::{insert_audit, SqliteAuditStore};
pub(crate) use batch::stored_event;
#[cfg(test)]
pub(crate) use target::target_with_plan;
pub use target::SqliteTarget;
