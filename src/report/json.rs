//! The JSON reporter: one document with the counts and every outcome.

use serde::Serialize;

use crate::run::{Counts, Outcome};

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
