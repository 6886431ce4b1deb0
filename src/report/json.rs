//! The JSON reporter: one document with the run id, whether the run succeeded (and why not),
//! the counts, the wall time and every outcome in plan order (a retried one with its attempts
//! and the failed ones' output), written when the run is over.

use std::io::Write;

use serde::Serialize;

use super::ending::Ending;
use super::{Gathered, ReportError, Reporter};
use crate::run::{Outcome, RunEvent};

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
        let outcomes = self.gathered.outcomes();
        let doc = Document {
            run_id: &self.gathered.run_id,
            strict: self.strict,
            ending: Ending::of(
                self.gathered.summary.as_ref(),
                self.gathered.report_error.as_deref(),
                self.strict,
            ),
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
    strict: bool,
    #[serde(flatten)]
    ending: Ending<'a>,
    outcomes: &'a [Outcome],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;

    #[test]
    fn one_document_in_plan_order_with_interrupted_cases_as_errors() {
        let json = reported(Json::to(Vec::new()), Some(1));
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
