//! Reporters: one per format (terminal, JSON, NDJSON, JUnit XML, HTML, GitHub Actions), each
//! fed the same stream of run events through [`Reporter`]; what is written whole is written at
//! [`Reporter::finish`].

mod ending;
pub mod github;
pub mod html;
pub mod json;
pub mod junit;
pub mod ndjson;
pub mod output;
pub mod provenance;
pub mod recap;
pub mod slow;
pub mod terminal;

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::run::{Outcome, RunEvent, RunSummary};

/// What goes to standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per probe as it ends, then a closing count.
    Human,
    /// One JSON document with every outcome and the counts, at the end.
    Json,
    /// One JSON object per line and per event, as the run goes (`list`: one per checkpoint).
    Ndjson,
}

/// A consumer of a run's events.
pub trait Reporter {
    /// One event, in the order the run emits them.
    fn event(&mut self, event: &RunEvent<'_>);

    /// After `RunFinished`: writes what this reporter writes whole.
    fn finish(&mut self) -> Result<(), ReportError> {
        Ok(())
    }

    /// Before [`finish`](Reporter::finish), when a report finished before this one could not
    /// be written: the run then ends with that error (exit 3), whatever its probes did, and a
    /// reporter that states the run's result says so.
    fn report_failed(&mut self, _error: &ReportError) {}
}

/// Several reporters fed the same events; they finish in the order they were added, every one
/// of them even when an earlier one failed (the results are always printed; those after it are
/// told of the failure first), and the first failure is returned.
#[derive(Default)]
pub struct Reporters(Vec<Box<dyn Reporter>>);

impl Reporters {
    pub fn add(&mut self, reporter: impl Reporter + 'static) {
        self.0.push(Box::new(reporter));
    }
}

impl Reporter for Reporters {
    fn event(&mut self, event: &RunEvent<'_>) {
        for reporter in &mut self.0 {
            reporter.event(event);
        }
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let mut first = Ok(());
        for reporter in &mut self.0 {
            if let Err(e) = &first {
                reporter.report_failed(e);
            }
            let result = reporter.finish();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }

    fn report_failed(&mut self, error: &ReportError) {
        for reporter in &mut self.0 {
            reporter.report_failed(error);
        }
    }
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: cannot render JUnit: {source}", path.display())]
    Render {
        path: PathBuf,
        source: quick_junit::SerializeError,
    },
    #[error("{}: cannot create report folder: {source}", dir.display())]
    Folder {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: cannot write JUnit report: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: is a folder; give --junit the path of a file", path.display())]
    IsFolder { path: PathBuf },
    #[error("{}: cannot write {what}: {source}", path.display())]
    WriteOther {
        /// Which report: "the HTML report", "the GitHub step summary".
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Whether a case is shown as a failure of its own (the recap, the annotations, the HTML's
/// failures): one whose verdict fails the run, but not a NOT RUN case, which fails the run
/// without having run and is counted, not shown.
fn failed_itself(verdict: crate::run::Verdict, strict: bool) -> bool {
    verdict != crate::run::Verdict::NotRun && verdict.fails_run(strict)
}

/// A run's outcomes gathered from its events, for the reports written whole at the end: in
/// plan order, whatever order cases finished in.
#[derive(Debug, Default)]
struct Gathered {
    run_id: String,
    by_case: Vec<Vec<Outcome>>,
    summary: Option<RunSummary>,
    /// A report finished before this one that could not be written: the run ends with it.
    report_error: Option<String>,
}

impl Gathered {
    fn take(&mut self, event: &RunEvent<'_>) {
        match event {
            RunEvent::RunStarted { run_id, cases } => {
                self.run_id = (*run_id).to_owned();
                self.by_case = vec![Vec::new(); cases.len()];
            }
            RunEvent::CaseFinished {
                index, outcomes, ..
            } => {
                if let Some(slot) = self.by_case.get_mut(*index) {
                    *slot = outcomes.to_vec();
                }
            }
            RunEvent::RunFinished { summary } => self.summary = Some(*summary),
            RunEvent::CaseStarted { .. } | RunEvent::RunInterrupted { .. } => {}
        }
    }

    /// What the exit code says of the run: finished, nothing failed or errored, nothing
    /// PENDING under `strict`, every report written before this one. False before
    /// `RunFinished`.
    fn succeeded(&self, strict: bool) -> bool {
        self.report_error.is_none()
            && self.summary.is_some_and(|s| {
                crate::exit_code::Code::of_run(&s, strict) == crate::exit_code::Code::Ok
            })
    }

    fn report_failed(&mut self, error: &ReportError) {
        self.report_error = Some(format!("{error} (the run exits 3)"));
    }

    fn wall(&self) -> Duration {
        self.summary.map_or(Duration::ZERO, |s| s.wall)
    }

    fn outcomes(&mut self) -> Vec<Outcome> {
        std::mem::take(&mut self.by_case)
            .into_iter()
            .flatten()
            .collect()
    }
}

/// `reporter` once it was given every event of the test suite's sample run (interrupted after
/// `interrupt_at` cases, when given) and finished.
#[cfg(test)]
fn reported<R: Reporter>(mut reporter: R, interrupt_at: Option<usize>) -> R {
    crate::run::test_support::run(interrupt_at, |e| reporter.event(e));
    reporter.finish().unwrap();
    reporter
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_support;

    /// A reporter that fails to finish, like a JUnit file that cannot be written.
    struct Failing;

    impl Reporter for Failing {
        fn event(&mut self, _: &RunEvent<'_>) {}

        fn finish(&mut self) -> Result<(), ReportError> {
            Err(ReportError::IsFolder {
                path: PathBuf::from("reports"),
            })
        }
    }

    /// Counts the finishes it saw.
    struct Counting(std::rc::Rc<std::cell::Cell<usize>>);

    impl Reporter for Counting {
        fn event(&mut self, _: &RunEvent<'_>) {}

        fn finish(&mut self) -> Result<(), ReportError> {
            self.0.set(self.0.get() + 1);
            Ok(())
        }
    }

    #[test]
    fn every_reporter_finishes_when_an_earlier_one_fails_and_the_failure_is_returned() {
        let finished = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut reporters = Reporters::default();
        reporters.add(Failing);
        reporters.add(Counting(finished.clone()));
        test_support::run(None, |e| reporters.event(e));
        let e = reporters.finish().unwrap_err();
        assert!(matches!(e, ReportError::IsFolder { .. }), "{e}");
        assert_eq!(finished.get(), 1, "the results are still printed");
    }
}
