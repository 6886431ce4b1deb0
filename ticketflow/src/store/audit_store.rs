//! The consumer's store: what records each audit event at most once, whichever database holds
//! it.

use super::error::StoreError;
use crate::event::AuditEvent;

/// A store that records each audit event at most once.
pub trait AuditStore: Send {
    /// Inserts the event in its own transaction. `Ok(true)`: inserted; `Ok(false)`: a row with
    /// this `event_id` already exists. Every other failure is an error, never `false`.
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError>;

    /// Rows in `audit_events`.
    fn audit_rows(&mut self) -> Result<u64, StoreError>;
}

impl<T: AuditStore + ?Sized> AuditStore for Box<T> {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        (**self).apply_once(event)
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        (**self).audit_rows()
    }
}
