//! Running a selection: the plan (what runs, what is SKIP or PENDING and why), execution with
//! deadlines and a concurrency limit, and the run told as events to whatever reports it.

mod command;
mod document;
mod events;
mod execute;
mod outcome;
mod plan;
mod remote;
mod remote_host;
mod schedule;
#[cfg(test)]
pub(crate) mod testing;

pub use events::{Interrupt, Interruption, RunEvent, RunSummary};
pub use outcome::{Counts, Outcome, Verdict};
pub use plan::{Decision, Plan, PlannedCase, SqlTarget};
pub use remote_host::{RemoteFlag, RemoteHost};
pub use schedule::execute;

use std::path::PathBuf;
use std::time::Duration;

use lessonprobe_probes::KafkaTarget;

/// Everything a run needs to know, decided once from the command line and the environment.
#[derive(Debug)]
pub struct RunConfig {
    pub jobs: usize,
    pub default_timeout: Duration,
    /// The course checkout that `command` probes run in.
    pub course_root: PathBuf,
    /// SQL backends selected with `--db`; SQL probes run once per entry they support.
    pub sql: Vec<SqlTarget>,
    pub kafka: KafkaTarget,
    /// Whether remote probes run, and where.
    pub remote: RemoteHost,
}
