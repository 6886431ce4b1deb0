//! Bounded replay: the per-partition core (`partition`: one partition's range re-read by its
//! own consumer group, each batch durable before its offset is committed) and the day job built
//! on it (`job`: planning a window of a real topic, executing it, reporting). The audit store
//! is the only effect this crate has: the live service's tables are not part of it.

mod job;
pub(crate) mod partition;

pub use job::*;
pub use partition::*;
