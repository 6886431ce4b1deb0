//! Executing document probes: an exercise or snippet of a lesson run by the lesson module, and
//! a probe that the lesson document answers as a whole (`doc = "*"`) when the course has no
//! verifier of its own.

use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::{Outcome, RunConfig, Verdict};
use crate::checkpoint::{Checkpoint, Probe, ProbeKind};
use crate::lesson::{self, DocBody, DocProbe, DocVerdict};

/// One document probe's outcome; `cancel` stops it.
pub fn run(mut outcome: Outcome, doc: &DocProbe, deadline: Duration, cancel: &Cancel) -> Outcome {
    let started = Instant::now();
    match &doc.body {
        DocBody::Code(code) => {
            let done = lesson::run(doc, code, deadline, cancel);
            outcome.verdict = match done.verdict {
                DocVerdict::Pass => Verdict::Pass,
                DocVerdict::Fail => Verdict::Fail,
                DocVerdict::Error => Verdict::Error,
            };
            outcome.output = done.output();
            outcome.message = done.message;
            outcome.diff = done.details;
        }
        DocBody::Uncollected { lines } => {
            let places: Vec<String> = lines
                .iter()
                .map(|l| format!("{}:{l}", doc.file.display()))
                .collect();
            outcome.verdict = Verdict::Fail;
            outcome.message = Some(format!(
                "not collected: {} (bind each with a label, or mark it no-run)",
                places.join(", ")
            ));
        }
        DocBody::Prose { .. } => {
            outcome.verdict = Verdict::Skip;
            outcome.message = Some("prose exercise: answered in writing".into());
        }
    }
    outcome.duration = started.elapsed();
    outcome
}

/// Whether `probe` (a command whose course file is absent) is answered by its checkpoint's
/// lesson document.
pub fn answers_for_document(checkpoint: &Checkpoint, probe: &Probe) -> bool {
    matches!(probe.kind, ProbeKind::Command { .. })
        && probe.doc.as_deref() == Some("*")
        && checkpoint.probes.iter().any(is_code)
}

fn is_code(probe: &Probe) -> bool {
    matches!(&probe.kind, ProbeKind::Document(d) if matches!(d.body, DocBody::Code(_)))
}

/// The answer of the lesson document: PASS when every code exercise and snippet of it passed,
/// using the outcomes already `done` and running those that were not selected.
pub fn answer(
    mut outcome: Outcome,
    checkpoint: &Checkpoint,
    done: &[Outcome],
    config: &RunConfig,
    cancel: &Cancel,
) -> Outcome {
    let started = Instant::now();
    let mut lines = Vec::new();
    let mut bad = Vec::new();
    let mut errors = 0;
    for probe in checkpoint.probes.iter().filter(|p| is_code(p)) {
        let ProbeKind::Document(doc) = &probe.kind else {
            continue;
        };
        let earlier = done
            .iter()
            .find(|o| o.lesson == checkpoint.lesson && o.kind == "document" && o.id == probe.id);
        let verdict = match earlier {
            Some(o) => o.verdict,
            None => {
                let deadline = probe.timeout.unwrap_or(config.default_timeout);
                run(outcome.clone(), doc, deadline, cancel).verdict
            }
        };
        lines.push(format!(
            "{} {} ({}:{})",
            verdict.label(),
            probe.id,
            doc.file.display(),
            doc.line
        ));
        match verdict {
            Verdict::Pass | Verdict::Flaky | Verdict::Skip => {}
            Verdict::Error => {
                errors += 1;
                bad.push(format!("{} {}", probe.id, verdict.label()));
            }
            _ => bad.push(format!("{} {}", probe.id, verdict.label())),
        }
    }
    let file = checkpoint
        .probes
        .iter()
        .find_map(|p| match &p.kind {
            ProbeKind::Document(d) => Some(d.file.display().to_string()),
            _ => None,
        })
        .unwrap_or_default();
    outcome.output = format!(
        "answered by lessonprobe's verification of {file} (the course has no verifier of its own):\n{}\n",
        lines.join("\n")
    );
    if bad.is_empty() {
        outcome.verdict = Verdict::Pass;
    } else {
        outcome.verdict = if errors == bad.len() {
            Verdict::Error
        } else {
            Verdict::Fail
        };
        outcome.message = Some(format!("{file}: {}", bad.join(", ")));
    }
    outcome.duration = started.elapsed();
    outcome
}
