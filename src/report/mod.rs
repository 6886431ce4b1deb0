//! Reporters: one per format (terminal, JSON, JUnit XML), each fed the same stream of run
//! events through [`Reporter`]; what is written whole is written at [`Reporter::finish`].

pub mod json;
pub mod junit;
pub mod terminal;

use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;

use crate::run::{Outcome, RunEvent};

/// What goes to standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per probe as it ends, then a closing count.
    Human,
    /// One JSON document with every outcome and the counts, at the end.
    Json,
}

/// A consumer of a run's events.
pub trait Reporter {
    /// One event, in the order the run emits them.
    fn event(&mut self, event: &RunEvent<'_>);

    /// After `RunFinished`: writes what this reporter writes whole.
    fn finish(&mut self) -> Result<(), ReportError> {
        Ok(())
    }
}

/// Several reporters fed the same events; they finish in the order they were added, and the
/// first that fails stops the others.
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
        self.0.iter_mut().try_for_each(|r| r.finish())
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
}

/// A run's outcomes gathered from its events, for the reports written whole at the end: in
/// plan order, whatever order cases finished in.
#[derive(Debug, Default)]
struct Gathered {
    run_id: String,
    by_case: Vec<Vec<Outcome>>,
    wall: Duration,
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
            RunEvent::RunFinished { summary } => self.wall = summary.wall,
            RunEvent::CaseStarted { .. } | RunEvent::RunInterrupted { .. } => {}
        }
    }

    fn outcomes(&mut self) -> Vec<Outcome> {
        std::mem::take(&mut self.by_case)
            .into_iter()
            .flatten()
            .collect()
    }
}
