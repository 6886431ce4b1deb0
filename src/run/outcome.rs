//! The verdict of one probe case and the counts a run closes with.

use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Error,
    Skip,
    Pending,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
            Verdict::Skip => "SKIP",
            Verdict::Pending => "PENDING",
        }
    }
}

/// What happened to one case: a probe, on one backend where it has several.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub lesson: u32,
    pub checkpoint: String,
    pub id: String,
    pub name: String,
    pub claim: String,
    pub kind: &'static str,
    pub backend: Option<&'static str>,
    pub verdict: Verdict,
    /// Why it did not pass, or why it was not run.
    pub message: Option<String>,
    /// A unified diff of expected against actual output, for mismatches.
    pub diff: Option<String>,
    pub output: String,
    pub expected: Option<String>,
    /// The answer key of a prose exercise.
    pub answer: Option<String>,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    /// The remote host that ran the case (its name); what was verified about it is in
    /// `properties`.
    pub host: Option<String>,
    /// The remote test case this outcome reports, when a selector yielded several.
    pub remote_case: Option<String>,
    pub properties: Vec<(String, String)>,
    /// Where the probe is written: its manifest, or its lesson file.
    pub file: Option<String>,
    /// The probe's line in that file, where known.
    pub line: Option<usize>,
}

impl Outcome {
    /// The case's name in reports: id, name, and the backend where the probe has several.
    /// `file:line` (or `file`) of the probe, for messages and annotations.
    pub fn location(&self) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(match self.line {
            Some(line) => format!("{file}:{line}"),
            None => file.to_owned(),
        })
    }

    pub fn display_name(&self) -> String {
        let mut name = format!("{} {}", self.id, self.name);
        if let Some(b) = self.backend {
            name.push_str(&format!(" [{b}]"));
        }
        if let Some(case) = &self.remote_case {
            name.push_str(&format!(" :: {case}"));
        }
        name
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// Cases per verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
    pub pending: usize,
}

impl Counts {
    pub fn of(outcomes: &[Outcome]) -> Counts {
        let mut c = Counts::default();
        for o in outcomes {
            match o.verdict {
                Verdict::Pass => c.passed += 1,
                Verdict::Fail => c.failed += 1,
                Verdict::Error => c.errors += 1,
                Verdict::Skip => c.skipped += 1,
                Verdict::Pending => c.pending += 1,
            }
        }
        c
    }

    /// The run succeeded: nothing failed or errored, and under `strict` nothing is pending.
    pub fn succeeded(&self, strict: bool) -> bool {
        self.failed == 0 && self.errors == 0 && !(strict && self.pending > 0)
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} errors, {} skipped, {} pending",
            self.passed, self.failed, self.errors, self.skipped, self.pending
        )
    }
}
