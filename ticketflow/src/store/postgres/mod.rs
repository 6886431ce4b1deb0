//! PostgreSQL: connecting (bounded in time, TLS as the URL says), the consumer's audit store,
//! a database as a replay's target with its bookkeeping, and the batch writer.

mod audit_store;
mod batch;
mod connect;
mod copy;
mod target;

pub use audit_store::{insert_audit, PostgresAuditStore};
pub(crate) use batch::stored_event;
pub use connect::{answers, connect, connect_bounded, describe, place_of, quote_ident};
pub use target::PostgresTarget;
