//! Executing document probes through the lesson's one API ([`Runs`]: chains, sessions, every
//! lesson form), their result told as an outcome; and a probe that the lesson document answers
//! as a whole (`doc = "*"`) when the course has no verifier of its own.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use std::collections::BTreeMap;

use super::{Outcome, RunConfig, Verdict};
use crate::checkpoint::{Checkpoint, Probe, ProbeKind};
use crate::lesson::{self, DocBody, DocProbe, DocVerdict, Runs};

/// One document probe's outcome, run by the lesson's [`Runs`] of the plan (after the step it
/// continues, with its document's other session blocks), its code seeing `env` (the variables of
/// the services it needs); `cancel` stops it.
pub fn run(
    mut outcome: Outcome,
    doc: &DocProbe,
    env: &BTreeMap<String, String>,
    deadline: Duration,
    cancel: &Cancel,
    runs: &Runs,
) -> Outcome {
    let done = runs.run(doc, env, deadline, cancel);
    outcome.verdict = verdict(done.verdict);
    outcome.rewrites = done.rewrites().cloned();
    outcome.output = done.output;
    outcome.message = done.message;
    outcome.diff = done.details;
    outcome.duration = done.duration;
    outcome
}

/// Whether `probe` (a command whose course file is absent) is answered by its checkpoint's
/// lesson document.
pub fn answers_for_document(checkpoint: &Checkpoint, probe: &Probe) -> bool {
    matches!(probe.kind, ProbeKind::Command { .. })
        && probe.doc.as_deref() == Some("*")
        && checkpoint.probes.iter().any(is_code)
}

/// Runs `missing` (code probes of `checkpoint` no case ran) after the steps they continue, in
/// document order: their verdicts by id.
fn run_missing<'a>(
    checkpoint: &Checkpoint,
    missing: &[&'a Probe],
    config: &RunConfig,
    cancel: &Cancel,
) -> HashMap<&'a str, Verdict> {
    let steps: Vec<&DocProbe> = checkpoint
        .with_predecessors(missing)
        .into_iter()
        .filter_map(|p| match &p.kind {
            ProbeKind::Document(doc) if matches!(doc.body, DocBody::Code(_)) => Some(doc.as_ref()),
            _ => None,
        })
        .collect();
    let runs = lesson::run_in_order(&steps, config.default_timeout, cancel);
    missing
        .iter()
        .filter_map(|p| {
            let at = steps.iter().position(|d| d.id == p.id)?;
            Some((p.id.as_str(), verdict(runs[at].verdict)))
        })
        .collect()
}

fn verdict(v: DocVerdict) -> Verdict {
    match v {
        DocVerdict::Pass => Verdict::Pass,
        DocVerdict::Fail => Verdict::Fail,
        DocVerdict::Error => Verdict::Error,
        DocVerdict::Skip => Verdict::Skip,
    }
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
    let earlier = |probe: &Probe| {
        done.iter()
            .find(|o| o.lesson == checkpoint.lesson && o.kind == "document" && o.id == probe.id)
            .map(|o| o.verdict)
    };
    let missing: Vec<&Probe> = checkpoint
        .probes
        .iter()
        .filter(|p| is_code(p) && earlier(p).is_none())
        .collect();
    let ran = run_missing(checkpoint, &missing, config, cancel);
    for probe in checkpoint.probes.iter().filter(|p| is_code(p)) {
        let ProbeKind::Document(doc) = &probe.kind else {
            continue;
        };
        let verdict = earlier(probe)
            .or_else(|| ran.get(probe.id.as_str()).copied())
            .unwrap_or(Verdict::Error);
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
