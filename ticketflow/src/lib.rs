//! The ticketflow audit system of lessons 29 and 30 as a library: audit events, the SQL audit
//! store (audit tables only), the consumer that commits only after its effect, Kafka adapters,
//! bounded replay, and the replay job that plans, executes and reports a window of a real topic.

// A replay error names its topic, partition, committed offset and cause; it is built once per
// failed partition, so its size costs nothing worth boxing for.
#![allow(clippy::result_large_err)]

pub mod consumer;
pub mod day;
pub mod event;
pub mod kafka;
pub mod replay;
pub mod store;
pub mod verify;

pub use kafka::KafkaTarget;
pub use store::AuditDb;
