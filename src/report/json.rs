//! The JSON reporter: one document with the run id, the counts and every outcome in plan
//! order, written when the run is over.

use std::io::Write;

use serde::Serialize;

use super::{Gathered, ReportError, Reporter};
use crate::run::{Counts, Outcome, RunEvent};

pub struct Json<W: Write> {
    out: W,
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
            gathered: Gathered::default(),
        }
    }
}

impl<W: Write> Reporter for Json<W> {
    fn event(&mut self, event: &RunEvent<'_>) {
        self.gathered.take(event);
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let outcomes = self.gathered.outcomes();
        let _ = writeln!(self.out, "{}", render(&self.gathered.run_id, &outcomes));
        Ok(())
    }
}

#[derive(Serialize)]
struct Document<'a> {
    run_id: &'a str,
    counts: Counts,
    outcomes: &'a [Outcome],
}

pub fn render(run_id: &str, outcomes: &[Outcome]) -> String {
    let doc = Document {
        run_id,
        counts: Counts::of(outcomes),
        outcomes,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
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
    }
}
