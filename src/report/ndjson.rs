//! The NDJSON reporter (`--format ndjson`): one JSON object per line and per event, written
//! and flushed as the run goes, for editors and dashboards. Every object has an `event`:
//! `run_started` (the planned cases), `case_started`, `case_finished` (its outcomes, as the
//! JSON report writes them), `run_interrupted`, and last `run_finished` with the counts and
//! `succeeded`, which is what the exit code says (written when the reports finish, so that a
//! report that could not be written is in it).

use std::io::Write;

use serde::Serialize;

use super::ending::Ending;
use super::{ReportError, Reporter};
use crate::run::{Decision, Outcome, PlannedCase, RunEvent, RunSummary};

pub struct Ndjson<W: Write> {
    out: W,
    strict: bool,
    /// The run's end, written at [`Reporter::finish`].
    finished: Option<RunSummary>,
    report_error: Option<String>,
}

impl Ndjson<std::io::Stdout> {
    pub fn stdout() -> Self {
        Ndjson::to(std::io::stdout())
    }
}

impl<W: Write> Ndjson<W> {
    pub fn to(out: W) -> Self {
        Ndjson {
            out,
            strict: false,
            finished: None,
            report_error: None,
        }
    }

    /// Under `--strict`, PENDING cases fail the run.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    RunStarted {
        run_id: &'a str,
        strict: bool,
        cases: Vec<Case<'a>>,
    },
    CaseStarted {
        #[serde(flatten)]
        case: Case<'a>,
    },
    CaseFinished {
        index: usize,
        outcomes: &'a [Outcome],
    },
    RunInterrupted {
        signal: &'static str,
        running: usize,
        not_started: usize,
    },
    RunFinished {
        #[serde(flatten)]
        ending: Ending<'a>,
    },
}

/// A planned case: its place in the plan and what it is.
#[derive(Serialize)]
struct Case<'a> {
    index: usize,
    lesson: u32,
    id: &'a str,
    name: &'a str,
    backend: Option<&'static str>,
    /// `run`, `skip` or `pending` (with `reason`), `from_document`; `not_run` (a case whose
    /// environment failed the preflight) and `environment_error` (that check), with `reason`.
    plan: &'static str,
    reason: Option<&'a str>,
}

impl<'a> Case<'a> {
    fn of(index: usize, case: &'a PlannedCase<'a>) -> Case<'a> {
        let (plan, reason) = match &case.decision {
            Decision::Run => ("run", None),
            Decision::Skip(why) => ("skip", Some(why.as_str())),
            Decision::Pending(why) => ("pending", Some(why.as_str())),
            Decision::FromDocument => ("from_document", None),
            Decision::NotRun(why) => ("not_run", Some(why.as_str())),
            Decision::Broken(why) => ("environment_error", Some(why.as_str())),
        };
        Case {
            index,
            lesson: case.checkpoint.lesson,
            id: &case.probe.id,
            name: &case.probe.name,
            backend: case.backend(),
            plan,
            reason,
        }
    }
}

impl<W: Write> Reporter for Ndjson<W> {
    fn event(&mut self, event: &RunEvent<'_>) {
        let line = match event {
            RunEvent::RunStarted { run_id, cases } => Line::RunStarted {
                run_id,
                strict: self.strict,
                cases: cases
                    .iter()
                    .enumerate()
                    .map(|(i, c)| Case::of(i, c))
                    .collect(),
            },
            RunEvent::CaseStarted { index, case } => Line::CaseStarted {
                case: Case::of(*index, case),
            },
            RunEvent::CaseFinished {
                index, outcomes, ..
            } => Line::CaseFinished {
                index: *index,
                outcomes,
            },
            RunEvent::RunInterrupted {
                reason,
                running,
                not_started,
            } => Line::RunInterrupted {
                signal: reason.name(),
                running: *running,
                not_started: *not_started,
            },
            RunEvent::RunFinished { summary } => {
                self.finished = Some(*summary);
                return;
            }
        };
        self.write(&line);
    }

    fn report_failed(&mut self, error: &ReportError) {
        self.report_error = Some(format!("{error} (the run exits 3)"));
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let Some(summary) = self.finished else {
            return Ok(());
        };
        let report_error = self.report_error.take();
        self.write(&Line::RunFinished {
            ending: Ending::of(Some(&summary), report_error.as_deref(), self.strict),
        });
        Ok(())
    }
}

impl<W: Write> Ndjson<W> {
    fn write(&mut self, line: &Line<'_>) {
        let text = serde_json::to_string(line)
            .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"error\":\"{e}\"}}"));
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;

    #[test]
    fn one_object_per_event_in_order_ending_with_the_counts() {
        let nd = reported(Ndjson::to(Vec::new()), Some(1));
        let lines: Vec<serde_json::Value> = String::from_utf8(nd.out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(kinds.first(), Some(&"run_started"));
        assert_eq!(kinds.last(), Some(&"run_finished"));
        assert!(kinds.contains(&"run_interrupted"), "{kinds:?}");
        assert_eq!(lines[0]["cases"].as_array().unwrap().len(), 4);
        let last = lines.last().unwrap();
        assert_eq!(last["succeeded"], false);
        assert_eq!(last["exit_code"], 130);
        assert_eq!(last["counts"]["errors"], 2);
    }
}
