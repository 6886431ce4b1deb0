//! How a run ended, as the machine-readable reports state it — the JSON document and the NDJSON
//! `run_finished` line alike: what the exit code says and the code itself, a report that could
//! not be written, the signal that interrupted the run, its wall time and its counts.

use serde::Serialize;

use crate::exit_code::Code;
use crate::run::{Counts, Interruption, RunSummary};

#[derive(Debug, Serialize)]
pub(super) struct Ending<'a> {
    /// What the exit code says: no FAIL, ERROR or NOT RUN, no PENDING or FLAKY under
    /// `--strict`, not interrupted, every report written.
    pub succeeded: bool,
    /// The process's exit code; absent when the run never finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// A report that could not be written (the run then exits 3), if one could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report_error: Option<&'a str>,
    /// The signal that interrupted the run, if one did.
    pub interrupted: Option<&'static str>,
    pub wall_seconds: f64,
    pub counts: Counts,
}

impl<'a> Ending<'a> {
    /// The end of a run that finished with `summary` (`None`: it did not finish, which no
    /// exit code calls a success), with `report_error` if a report could not be written.
    pub fn of(summary: Option<&RunSummary>, report_error: Option<&'a str>, strict: bool) -> Self {
        let code = summary.map(|s| match report_error {
            Some(_) => Code::Io,
            None => Code::of_run(s, strict),
        });
        Ending {
            succeeded: code == Some(Code::Ok),
            exit_code: code.map(|c| c as u8),
            report_error,
            interrupted: summary.and_then(|s| s.interrupted).map(Interruption::name),
            wall_seconds: summary.map_or(0.0, |s| (s.wall.as_secs_f64() * 1000.0).round() / 1000.0),
            counts: summary.map(|s| s.counts).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn summary(failed: usize) -> RunSummary {
        RunSummary {
            counts: Counts {
                passed: 2,
                failed,
                ..Counts::default()
            },
            wall: Duration::from_millis(1_234_567),
            interrupted: None,
        }
    }

    #[test]
    fn a_report_that_could_not_be_written_makes_a_clean_run_exit_3() {
        let clean = summary(0);
        let ending = Ending::of(Some(&clean), None, false);
        assert!(ending.succeeded);
        assert_eq!(ending.exit_code, Some(0));
        let ending = Ending::of(Some(&clean), Some("reports: is a folder"), false);
        assert!(!ending.succeeded);
        assert_eq!(ending.exit_code, Some(Code::Io as u8));
        assert_eq!(ending.wall_seconds, 1234.567);
    }

    #[test]
    fn a_run_that_did_not_finish_never_succeeded_and_has_no_exit_code() {
        let ending = Ending::of(None, None, false);
        assert!(!ending.succeeded);
        assert_eq!(ending.exit_code, None);
        let text = serde_json::to_string(&ending).unwrap();
        assert!(!text.contains("exit_code"), "{text}");
        assert!(!Ending::of(Some(&summary(1)), None, false).succeeded);
    }
}
