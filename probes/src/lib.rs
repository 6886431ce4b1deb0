//! The ticketflow audit system taught in lessons 29 and 30 — events, the SQL audit store,
//! the consumer that commits only after its effect, bounded replay — and the built-in probes
//! that check the lessons' claims against it.

pub mod consumer;
pub mod context;
pub mod day;
pub mod event;
pub mod kafka;
pub mod live;
pub mod registry;
pub mod replay;
pub mod store;

mod checks;

pub use context::{BuiltinProbe, DbTarget, KafkaTarget, ProbeContext, ProbeError};
