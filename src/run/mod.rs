//! Running a selection: the plan (what runs, what is SKIP or PENDING and why), execution with
//! deadlines and a concurrency limit, and the outcomes handed to the reporters.

mod command;
mod document;
mod execute;
mod outcome;
mod plan;
mod remote;

pub use execute::execute;
pub use outcome::{Counts, Outcome, Verdict};
pub use plan::{Decision, Plan, PlannedCase, SqlTarget};

use std::path::PathBuf;
use std::time::Duration;

use lessonprobe_probes::KafkaTarget;

use crate::remote::AuthorizedHost;

/// Everything a run needs to know, decided once from the command line and the environment.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub jobs: usize,
    pub default_timeout: Duration,
    /// The course checkout that `command` probes run in.
    pub course_root: PathBuf,
    /// SQL backends selected with `--db`; SQL probes run once per entry they support.
    pub sql: Vec<SqlTarget>,
    pub kafka: KafkaTarget,
    /// `None` unless `TICKETFLOW_REMOTE_TESTS=1`: remote probes are PENDING and nothing
    /// connects. Otherwise the authorized host remote probes run on, or why there is none.
    pub remote: Option<Result<AuthorizedHost, String>>,
}
