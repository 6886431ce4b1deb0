//! What a run tells its reporters, in order: it started (with every planned case), each case
//! started and finished, it was interrupted, it finished. Reporters know the run only from these.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lessonprobe_probes::Cancel;

use super::{Counts, Outcome, PlannedCase};

/// One step of a run. `index` is a case's place in the plan, `RunStarted`'s `cases`.
#[derive(Debug, Clone, Copy)]
pub enum RunEvent<'a> {
    /// Before any case: the run's id and every planned case, SKIP and PENDING included.
    RunStarted {
        run_id: &'a str,
        cases: &'a [PlannedCase<'a>],
    },
    /// A case decided Run began running (SKIP and PENDING cases only finish).
    CaseStarted {
        index: usize,
        case: &'a PlannedCase<'a>,
    },
    /// A case ended with its outcomes: one, or one per test case of a remote report.
    CaseFinished {
        index: usize,
        case: &'a PlannedCase<'a>,
        outcomes: &'a [Outcome],
    },
    /// The run was asked to stop. No case starts after this; `CaseFinished` follows at once
    /// for every case that had not finished, as ERROR "interrupted" (a case decided SKIP or
    /// PENDING keeps that verdict, since it needed no running).
    RunInterrupted {
        reason: Interruption,
        /// Cases running at that moment.
        running: usize,
        /// Cases decided Run that had not started.
        not_started: usize,
    },
    /// After every case has finished.
    RunFinished { summary: RunSummary },
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSummary {
    pub counts: Counts,
    pub wall: Duration,
    /// Why the run stopped early, if it did.
    pub interrupted: Option<Interruption>,
}

/// Why a run was stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// A file `--watch` looks at changed: the run starts again.
    Restart,
}

impl Interruption {
    /// As reports name it: the signal, or `restart` for a change `--watch` saw.
    pub fn name(self) -> &'static str {
        match self {
            Interruption::Interrupt => "SIGINT",
            Interruption::Terminate => "SIGTERM",
            Interruption::Restart => "restart",
        }
    }

    fn code(self) -> u8 {
        match self {
            Interruption::Interrupt => 1,
            Interruption::Terminate => 2,
            Interruption::Restart => 3,
        }
    }

    fn from_code(code: u8) -> Option<Interruption> {
        match code {
            1 => Some(Interruption::Interrupt),
            2 => Some(Interruption::Terminate),
            3 => Some(Interruption::Restart),
            _ => None,
        }
    }
}

/// A request to stop a run, shared between the run and whatever notices the need (a signal
/// handler): once requested, the runner starts no further case, the running ones are told to
/// stop through [`Interrupt::cancel`], and every unfinished case ends as ERROR "interrupted".
/// The first request wins. A request only stores a byte and a flag, so it may be made from a
/// signal handler.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    why: Arc<AtomicU8>,
    cancel: Cancel,
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn request(&self, why: Interruption) {
        let _ = self
            .why
            .compare_exchange(0, why.code(), Ordering::SeqCst, Ordering::SeqCst);
        self.cancel.cancel();
    }

    pub fn requested(&self) -> Option<Interruption> {
        Interruption::from_code(self.why.load(Ordering::SeqCst))
    }

    /// What the run's probes, commands and remote sessions watch: cancelled by the first
    /// request.
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_request_wins_and_clones_share_it() {
        let interrupt = Interrupt::new();
        assert_eq!(interrupt.requested(), None);
        let handler = interrupt.clone();
        handler.request(Interruption::Terminate);
        handler.request(Interruption::Interrupt);
        assert_eq!(interrupt.requested(), Some(Interruption::Terminate));
        assert!(interrupt.cancel().is_cancelled());
    }
}
