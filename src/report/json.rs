//! The JSON reporter: one document with the run id, whether the run succeeded (and why not),
//! the counts, the wall time and every outcome in plan order (a retried one with its attempts
//! and the failed ones' output), written when the run is over.

use std::io::Write;

use serde::Serialize;

use super::{Gathered, ReportError, Reporter};
use crate::run::{Counts, Interruption, Outcome, RunEvent};

pub struct Json<W: Write> {
    out: W,
    strict: bool,
    gathered: Gathered,
}

impl Json<std::io::Stdout> {
    pub fn stdout() -> Self {
        Json::to(std::io::stdout())
    }
}

impl<W: Write> Json<W> {
    pub fn to(out: W) -> Self {
        Json {
            out,
            strict: false,
            gathered: Gathered::default(),
        }
    }

    /// Under `--strict`, PENDING and FLAKY cases fail the run.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

impl<W: Write> Reporter for Json<W> {
    fn event(&mut self, event: &RunEvent<'_>) {
        self.gathered.take(event);
    }

    fn report_failed(&mut self, error: &ReportError) {
        self.gathered.report_failed(error);
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let summary = self.gathered.summary;
        let succeeded = self.gathered.succeeded(self.strict);
        let outcomes = self.gathered.outcomes();
        let counts = Counts::of(&outcomes);
        let doc = Document {
            run_id: &self.gathered.run_id,
            succeeded,
            report_error: self.gathered.report_error.as_deref(),
            strict: self.strict,
            interrupted: summary.and_then(|s| s.interrupted).map(Interruption::name),
            wall_seconds: summary.map_or(0.0, |s| (s.wall.as_secs_f64() * 1000.0).round() / 1000.0),
            counts,
            outcomes: &outcomes,
        };
        let text = serde_json::to_string_pretty(&doc)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        let _ = writeln!(self.out, "{text}");
        Ok(())
    }
}

#[derive(Serialize)]
struct Document<'a> {
    run_id: &'a str,
    /// What the exit code says: no FAIL, ERROR or NOT RUN, no PENDING or FLAKY under
    /// `--strict`, not interrupted.
    succeeded: bool,
    /// A report that could not be written (the run then exits 3), if one could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    report_error: Option<&'a str>,
    strict: bool,
    /// The signal that interrupted the run, if one did.
    interrupted: Option<&'static str>,
    wall_seconds: f64,
    counts: Counts,
    outcomes: &'a [Outcome],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::testing;

    #[test]
    fn one_document_in_plan_order_with_interrupted_cases_as_errors() {
        let mut json = Json::to(Vec::new());
        testing::run(Some(1), |e| json.event(e));
        json.finish().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json.out).unwrap();
        assert_eq!(doc["run_id"], "t");
        let cases: Vec<(&str, &str, &str)> = doc["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["id"].as_str().unwrap(),
                    o["verdict"].as_str().unwrap(),
                    o["message"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            cases,
            [
                ("first", "PASS", ""),
                ("second", "ERROR", "interrupted (SIGINT) while it ran"),
                (
                    "prose",
                    "SKIP",
                    "prose exercise: answered in writing, no executable form"
                ),
                ("third", "ERROR", "interrupted (SIGINT) before it started"),
            ]
        );
        assert_eq!(doc["counts"]["errors"], 2);
        assert_eq!(doc["succeeded"], false);
        assert_eq!(doc["interrupted"], "SIGINT");
    }
}
