//! The built-in probes of lessons 29 and 30: what a probe is handed (its context), the registry
//! of probes by name, the checks themselves, and the simulated live service (notifications, SLA
//! counts, the ticket projection) that only probes need. The ticketflow system under test is
//! the `ticketflow` crate.

pub mod case_schema;
pub mod context;
pub mod live;
pub mod registry;

mod checks;

pub use context::{BuiltinProbe, Cancel, DbTarget, ProbeContext, ProbeError};
pub use ticketflow::KafkaTarget;
