//! The verdict of one probe case and the counts a run closes with.

use std::time::Duration;

use serde::Serialize;

use super::PlannedCase;
use crate::checkpoint::ProbeKind;
use crate::lesson::{DocBody, Rewrite};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Error,
    Skip,
    Pending,
    /// Failed, then passed when retried: the claim holds only sometimes.
    Flaky,
    /// Never started: the run stopped starting probes (`--max-fail`).
    #[serde(rename = "NOT_RUN")]
    NotRun,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Error => "ERROR",
            Verdict::Skip => "SKIP",
            Verdict::Pending => "PENDING",
            Verdict::Flaky => "FLAKY",
            Verdict::NotRun => "NOT RUN",
        }
    }

    /// FAIL or ERROR: the claim did not hold, or the case could not run.
    pub fn failed(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::Error)
    }

    /// Whether a case of this verdict fails the run (and so the exit code): FAIL, ERROR and
    /// NOT RUN; PENDING and FLAKY under `strict`.
    pub fn fails_run(self, strict: bool) -> bool {
        match self {
            Verdict::Fail | Verdict::Error | Verdict::NotRun => true,
            Verdict::Pending | Verdict::Flaky => strict,
            Verdict::Pass | Verdict::Skip => false,
        }
    }
}

/// An earlier attempt of a retried case that failed, kept beside the case's final outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    pub verdict: Verdict,
    pub message: Option<String>,
    pub diff: Option<String>,
    pub output: String,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
}

impl Attempt {
    pub fn of(outcome: &Outcome, number: u32) -> Attempt {
        Attempt {
            number,
            verdict: outcome.verdict,
            message: outcome.message.clone(),
            diff: outcome.diff.clone(),
            output: outcome.output.clone(),
            duration: outcome.duration,
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
    /// Where its checkpoint is written: the manifest, or the lesson file of a lesson without
    /// one (the JUnit suite's `file`).
    #[serde(skip)]
    pub checkpoint_file: String,
    /// The probe's line in that file, where known.
    pub line: Option<usize>,
    /// A notebook cell's index in its notebook's `cells` (0-based, Markdown cells counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<usize>,
    /// The code the probe runs as its document writes it (a notebook cell's source), which
    /// the HTML report shows.
    #[serde(skip)]
    pub code: Option<String>,
    /// Attempts made: 1, or more when the case was retried after failing.
    pub attempts: u32,
    /// The earlier attempts that failed, in order (the outcome itself is the last attempt).
    pub failed_attempts: Vec<Attempt>,
    /// A document probe's FAIL whose every fault is an expected form: the rewrites of its
    /// lesson that would make it pass, for `bless`.
    #[serde(skip)]
    pub rewrites: Option<Vec<Rewrite>>,
}

impl Outcome {
    /// A planned case's outcome before it is decided: ERROR until something sets the verdict.
    pub fn of(case: &PlannedCase<'_>) -> Outcome {
        let probe = case.probe;
        let cell = match &probe.kind {
            ProbeKind::Document(doc) => match &doc.body {
                DocBody::Cell(cell) => Some(cell.cell()),
                _ => None,
            },
            _ => None,
        };
        Outcome {
            lesson: case.checkpoint.lesson,
            checkpoint: case.checkpoint.title.clone(),
            id: probe.id.clone(),
            name: probe.name.clone(),
            claim: probe.claim.clone(),
            kind: probe.kind.label(),
            backend: case.backend(),
            verdict: Verdict::Error,
            message: None,
            diff: None,
            output: String::new(),
            expected: probe.expect.clone(),
            answer: match &probe.kind {
                ProbeKind::Prose { answer, .. } | ProbeKind::Builtin { answer, .. } => {
                    answer.clone()
                }
                ProbeKind::Document(doc) => match &doc.body {
                    DocBody::Prose { answer } => Some(answer.clone()),
                    _ => None,
                },
                _ => None,
            },
            duration: Duration::ZERO,
            host: None,
            remote_case: None,
            properties: Vec::new(),
            file: Some(
                match &probe.kind {
                    ProbeKind::Document(doc) => doc.file.display(),
                    _ => case.checkpoint.source.display(),
                }
                .to_string(),
            ),
            line: probe.line,
            cell: cell.map(|c| c.index),
            code: cell.map(|c| c.source.clone()),
            checkpoint_file: case.checkpoint.source.display().to_string(),
            attempts: 1,
            failed_attempts: Vec::new(),
            rewrites: None,
        }
    }

    /// A failure's message starts with where the probe is written, unless it names it already.
    pub fn locate_message(&mut self) {
        if !self.verdict.failed() {
            return;
        }
        let (Some(location), Some(file)) = (self.location(), self.file.as_deref()) else {
            return;
        };
        match &self.message {
            Some(m) if m.contains(file) => {}
            Some(m) => self.message = Some(format!("{location}: {m}")),
            None => self.message = Some(location),
        }
    }

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
        display_name(
            &self.id,
            &self.name,
            self.backend,
            self.remote_case.as_deref(),
        )
    }
}

/// `ID NAME [backend] :: remote case`, the one way reports name a case.
pub(super) fn display_name(
    id: &str,
    name: &str,
    backend: Option<&str>,
    remote_case: Option<&str>,
) -> String {
    let mut text = format!("{id} {name}");
    if let Some(b) = backend {
        text.push_str(&format!(" [{b}]"));
    }
    if let Some(case) = remote_case {
        text.push_str(&format!(" :: {case}"));
    }
    text
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
    pub flaky: usize,
    pub not_run: usize,
}

impl Counts {
    pub fn of(outcomes: &[Outcome]) -> Counts {
        let mut c = Counts::default();
        c.add(outcomes);
        c
    }

    pub fn add(&mut self, outcomes: &[Outcome]) {
        for o in outcomes {
            match o.verdict {
                Verdict::Pass => self.passed += 1,
                Verdict::Fail => self.failed += 1,
                Verdict::Error => self.errors += 1,
                Verdict::Skip => self.skipped += 1,
                Verdict::Pending => self.pending += 1,
                Verdict::Flaky => self.flaky += 1,
                Verdict::NotRun => self.not_run += 1,
            }
        }
    }

    /// The run succeeded: no case has a verdict that [fails the run](Verdict::fails_run).
    pub fn succeeded(&self, strict: bool) -> bool {
        [
            (self.passed, Verdict::Pass),
            (self.failed, Verdict::Fail),
            (self.errors, Verdict::Error),
            (self.skipped, Verdict::Skip),
            (self.pending, Verdict::Pending),
            (self.flaky, Verdict::Flaky),
            (self.not_run, Verdict::NotRun),
        ]
        .iter()
        .all(|&(cases, verdict)| cases == 0 || !verdict.fails_run(strict))
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} errors, {} skipped, {} pending",
            self.passed, self.failed, self.errors, self.skipped, self.pending
        )?;
        // Named only when there are some, so runs without retries or --max-fail read as before.
        if self.flaky > 0 {
            write!(f, ", {} flaky", self.flaky)?;
        }
        if self.not_run > 0 {
            write!(f, ", {} not run", self.not_run)?;
        }
        Ok(())
    }
}
