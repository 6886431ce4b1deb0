//! What one run of a document probe gives, whatever its form: one result, [`DocRun`], with one
//! verdict, [`DocVerdict`], that the runner tells as an outcome.

use std::time::Duration;

use super::bless::Rewrite;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocVerdict {
    Pass,
    Fail,
    Error,
    /// Not run for a static reason: a prose exercise, answered in writing.
    Skip,
}

/// What one run of a document probe gave.
#[derive(Debug, Clone)]
pub struct DocRun {
    pub verdict: DocVerdict,
    /// Why it did not pass; names the lesson file and line.
    pub message: Option<String>,
    /// A diff of expected against actual output, the tails of a failed command, or doctest's
    /// reports.
    pub details: Option<String>,
    /// What it printed, as the report shows it (a hidden setup's transcript first).
    pub output: String,
    /// Its own time: not the time it waited for the step it continues, nor its document's.
    pub duration: Duration,
    /// On a FAIL whose every fault is an expected form (a block, an exit code, a session's
    /// lines): the rewrites of the lesson that would make it pass.
    pub blessable: Option<Vec<Rewrite>>,
}

impl DocRun {
    /// An ERROR for a probe that could not run or finish.
    pub fn error(message: String) -> DocRun {
        DocRun {
            verdict: DocVerdict::Error,
            message: Some(message),
            details: None,
            output: String::new(),
            duration: Duration::ZERO,
            blessable: None,
        }
    }

    /// An ERROR for a probe that was not run at all.
    pub fn not_run(why: &str) -> DocRun {
        DocRun::error(why.to_owned())
    }

    /// The rewrites bless may apply: those of a FAIL only (an ERROR's are not trusted).
    pub fn rewrites(&self) -> Option<&Vec<Rewrite>> {
        self.blessable
            .as_ref()
            .filter(|_| self.verdict == DocVerdict::Fail)
    }
}
