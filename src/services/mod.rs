//! Services a course declares in `lessonprobe.toml` (`[services.NAME]`): their declaration,
//! parsed once into typed values, and their lifecycle (start, ready, stop, logs) in a run.

mod builtin;
mod declaration;
mod lifecycle;
mod service;

pub use declaration::{declare_all, RawService};
pub use lifecycle::{kill_all_now, Faults, Running, StartError};
pub use service::{Ready, Service, StopSignal};
