//! Remote selectors: authorized host profiles, an SSH connection that verifies the host key
//! against known_hosts before anything else and never hangs, and the remote JUnit brought back.

mod hosts;
mod junit_in;
mod run_selector;
mod selector;
mod ssh;

pub use hosts::{AuthorizedHost, HostsError, HostsFile, NoHostsFile};
pub use run_selector::{answers, check_host, run_selector, HostFacts, UNANSWERED_FIX};
pub use selector::CommandSet;

/// The verdict of one remote test case, as its JUnit said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteVerdict {
    Pass,
    Fail,
    Error,
    Skip,
}

/// One test case of the remote report.
#[derive(Debug, Clone)]
pub struct RemoteCase {
    pub name: String,
    pub verdict: RemoteVerdict,
    pub message: Option<String>,
    pub output: String,
    /// The case's own time, as the report gives it.
    pub time: Option<std::time::Duration>,
}

/// What a remote selector run brought back.
#[derive(Debug, Clone)]
pub struct RemoteReport {
    pub facts: HostFacts,
    pub cases: Vec<RemoteCase>,
    /// What the run command printed (stdout and stderr together).
    pub output: String,
}

/// Why a remote run did not produce a report. Messages name `host:port` and the reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{place}: {reason}")]
pub struct RemoteError {
    pub place: String,
    pub reason: String,
    /// What the host was found to be before it failed, when that far.
    pub facts: Option<HostFacts>,
    pub output: String,
}
