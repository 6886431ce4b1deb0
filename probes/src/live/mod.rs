//! The simulated live service: its consumer applies each event with the business effects a
//! replay must never repeat (a notification, an SLA count), and keeps the ticket projection at
//! the highest business version. Its tables are its own; the ticketflow crate has none of them.

mod consumer;
mod migrations;
mod store;

pub use consumer::{run_live_consumer, LiveError, LiveRun};
pub use store::{LivePostgres, LiveSqlite, LIVE_TABLES};

use ticketflow::event::AuditEvent;
use ticketflow::store::{AuditStore, StoreError};

/// A store that also carries the live service's business effects.
pub trait LiveStore: AuditStore {
    /// In one transaction: the audit row and, only when it is new, one notification and one SLA
    /// change for the tenant. Returns whether the event was new.
    fn apply_live(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;
    /// `(notifications, sum of SLA changes)`.
    fn business_counts(&mut self) -> Result<(u64, u64), StoreError>;
    /// Deletes audit rows whose `occurred_at` lies in `[from, to)` (RFC 3339 text): the lost
    /// projection a replay repairs.
    fn forget_audit_rows(&mut self, from: &str, to: &str) -> Result<u64, StoreError>;
    /// Sets the ticket's state to this event's version only if it is newer than the stored
    /// one. Returns whether it was applied.
    fn project_ticket(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;
    /// The stored version of a ticket.
    fn ticket_version(&mut self, ticket: TicketKey<'_>) -> Result<Option<i64>, StoreError>;
}

/// A ticket as the projection keys it: its tenant, then its id within the tenant (two strings
/// a caller could otherwise swap unnoticed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketKey<'a> {
    pub tenant_id: &'a str,
    pub ticket_id: &'a str,
}
