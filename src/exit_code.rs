//! The process's exit codes, one per cause, and how a run of probes ends.

use std::process::ExitCode;

use crate::run::{Interruption, RunSummary};

/// Exit codes, distinct per cause so scripts can tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Every selected probe passed or was skipped (PENDING too, unless `--strict`).
    Ok = 0,
    /// A probe failed or errored (or was PENDING under `--strict`).
    ProbesFailed = 1,
    /// The command line or a manifest is wrong; nothing ran.
    Usage = 2,
    /// A file could not be read or written (a report, a manifest folder).
    Io = 3,
    /// An operational command (`replay`, `broker`, `hosts check`) failed at run time.
    Operation = 4,
    /// A replay completed but found what someone must look at: conflicting versions of an
    /// event, or records that are not audit events (quarantined).
    Findings = 5,
    /// `replay verify` found events of the window missing from the audit table, or stored
    /// with other content.
    Discrepancies = 6,
    /// The run was interrupted with Ctrl-C (128 + SIGINT).
    Interrupted = 130,
    /// The run was stopped with SIGTERM (128 + SIGTERM).
    Terminated = 143,
}

impl Code {
    /// How a run of probes ends: interrupted, failed (PENDING too under `strict`), or not.
    pub fn of_run(summary: &RunSummary, strict: bool) -> Code {
        match summary.interrupted {
            // A restart only ends a run inside `--watch`, which goes on.
            Some(Interruption::Interrupt | Interruption::Restart) => Code::Interrupted,
            Some(Interruption::Terminate) => Code::Terminated,
            None if summary.counts.succeeded(strict) => Code::Ok,
            None => Code::ProbesFailed,
        }
    }
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code as u8)
    }
}
