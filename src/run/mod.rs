//! Running a selection: the plan (what runs, what is SKIP or PENDING and why), execution with
//! deadlines and a concurrency limit, and the run told as events to whatever reports it.

mod dispatch;
mod document;
mod events;
mod execute;
mod outcome;
mod partition;
mod plan;
pub mod preflight;
mod remote;
mod remote_host;
mod retry;
mod schedule;
#[cfg(test)]
pub(crate) mod test_support;

pub use events::{Interrupt, Interruption, RunEvent, RunSummary};
pub use execute::PREFLIGHT;
pub use outcome::{Attempt, Counts, Outcome, Verdict};
pub use partition::{Partition, PartitionError};
pub use plan::{Decision, Plan, PlannedCase, SqlTarget};
pub use preflight::{Check, Need, Problem};
pub use remote_host::{RemoteFlag, RemoteHost};
pub use schedule::execute;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use lessonprobe_probes::KafkaTarget;

/// Everything a run needs to know, decided once from the command line and its variables.
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
    /// When the run stops starting probes, and how often a failing one is tried again.
    pub failure: FailurePolicy,
    /// The preflight checks made before any probe, those that some case needs.
    pub preflight: Vec<Check>,
    /// The services the run has started (their preflight checks start them), stopped when it
    /// ends.
    pub services: std::sync::Arc<crate::services::Running>,
    /// Probes to run before the others, as (lesson, probe id): those that failed in the
    /// previous run, under `--watch`. Empty: the plan keeps the lessons' order.
    pub first: BTreeSet<(u32, String)>,
}

/// What a run does about failing probes: stop starting new ones after some (`--max-fail`),
/// and try a failing one again (`--retries`, a manifest's `retries`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailurePolicy {
    /// Once this many cases have failed or errored, no further case starts.
    pub max_fail: Option<u32>,
    /// Retries of a failing builtin, command or remote probe whose manifest sets none.
    pub retries: u32,
    /// Whether document probes are retried too (they are not unless asked).
    pub retry_documents: bool,
}
