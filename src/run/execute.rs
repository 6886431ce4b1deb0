//! Executes a plan: cases decided Run are run with a deadline each, at most `jobs` at once;
//! every case, run or not, yields at least one outcome (a remote selector one per remote test
//! case), in plan order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lessonprobe_probes::{registry, DbTarget, ProbeContext, ProbeError};
use similar::TextDiff;

use super::plan::{Decision, Plan, PlannedCase};
use super::{command, document, remote, Outcome, RunConfig, Verdict};
use crate::checkpoint::ProbeKind;
use crate::lesson::DocBody;

/// Runs the plan, calling `on_outcome` as each case ends (in completion order), and returns
/// all outcomes in plan order.
pub fn execute(
    plan: &Plan<'_>,
    config: &RunConfig,
    run_id: &str,
    mut on_outcome: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Vec<Outcome>)>();
    let mut slots: Vec<Vec<Outcome>> = vec![Vec::new(); plan.cases.len()];
    std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1).min(plan.cases.len().max(1)) {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = plan.cases.get(i) else { break };
                if case.decision == Decision::FromDocument {
                    continue;
                }
                if tx
                    .send((
                        i,
                        run_case(case, config, &format!("{run_id}-{}", case.slug())),
                    ))
                    .is_err()
                {
                    break;
                }
            });
        }
        drop(tx);
        for (i, mut outcomes) in rx {
            outcomes.iter_mut().for_each(locate_message);
            outcomes.iter().for_each(&mut on_outcome);
            slots[i] = outcomes;
        }
    });
    // Probes answered by their lesson document go last, when its probes' verdicts are known.
    for (i, case) in plan.cases.iter().enumerate() {
        if case.decision == Decision::FromDocument {
            let done: Vec<Outcome> = slots.iter().flatten().cloned().collect();
            let mut outcome = document::answer(base_outcome(case), case.checkpoint, &done, config);
            locate_message(&mut outcome);
            on_outcome(&outcome);
            slots[i] = vec![outcome];
        }
    }
    slots.into_iter().flatten().collect()
}

/// A failure's message starts with where the probe is written, unless it names it already.
fn locate_message(outcome: &mut Outcome) {
    if !matches!(outcome.verdict, Verdict::Fail | Verdict::Error) {
        return;
    }
    let (Some(location), Some(file)) = (outcome.location(), outcome.file.as_deref()) else {
        return;
    };
    match &outcome.message {
        Some(m) if m.contains(file) => {}
        Some(m) => outcome.message = Some(format!("{location}: {m}")),
        None => outcome.message = Some(location),
    }
}

/// A case's outcome before it ran: what it is and where it is written.
fn base_outcome(case: &PlannedCase<'_>) -> Outcome {
    let probe = case.probe;
    let file = match &probe.kind {
        ProbeKind::Document(doc) => doc.file.clone(),
        _ => case.checkpoint.source.clone(),
    };
    Outcome {
        lesson: case.checkpoint.lesson,
        checkpoint: case.checkpoint.title.clone(),
        id: probe.id.clone(),
        name: probe.name.clone(),
        claim: probe.claim.clone(),
        kind: probe.kind.label(),
        backend: case.sql.as_ref().map(|s| s.backend.label()),
        verdict: Verdict::Error,
        message: None,
        diff: None,
        output: String::new(),
        expected: probe.expect.clone(),
        answer: match &probe.kind {
            ProbeKind::Prose { answer, .. } | ProbeKind::Builtin { answer, .. } => answer.clone(),
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
        file: Some(file.display().to_string()),
        line: probe.line,
    }
}

/// One planned case's outcomes: exactly one, except a remote selector whose report holds
/// several test cases.
fn run_case(case: &PlannedCase<'_>, config: &RunConfig, run_id: &str) -> Vec<Outcome> {
    let probe = case.probe;
    let mut outcome = base_outcome(case);
    match &case.decision {
        Decision::Skip(reason) => {
            outcome.verdict = Verdict::Skip;
            outcome.message = Some(reason.clone());
            return vec![outcome];
        }
        Decision::Pending(reason) => {
            outcome.verdict = Verdict::Pending;
            outcome.message = Some(reason.clone());
            return vec![outcome];
        }
        Decision::Run | Decision::FromDocument => {}
    }
    let deadline = probe.timeout.unwrap_or(config.default_timeout);
    if let (ProbeKind::Remote { selector, .. }, Some(host)) = (&probe.kind, &config.remote) {
        return remote::run(outcome, host, case.checkpoint.lesson, selector, deadline);
    }
    if let ProbeKind::Document(doc) = &probe.kind {
        return vec![document::run(outcome, doc, deadline)];
    }
    let started = Instant::now();
    let result = match &probe.kind {
        ProbeKind::Builtin { name, .. } => {
            let ctx = ProbeContext {
                db: match case.sql.as_ref().map(|s| &s.target) {
                    None => DbTarget::SqliteMemory,
                    // `sqlite:DIR`: each case its own database file, kept for inspection.
                    Some(DbTarget::SqliteFile(dir)) => {
                        DbTarget::SqliteFile(dir.join(format!("{run_id}.db")))
                    }
                    Some(other) => other.clone(),
                },
                kafka: config.kafka.clone(),
                deadline,
                run_id: run_id.to_owned(),
            };
            run_builtin(name, ctx, deadline)
        }
        ProbeKind::Command { argv, cwd, env, .. } => {
            let dir = cwd.as_ref().map_or_else(
                || config.course_root.clone(),
                |c| config.course_root.join(c),
            );
            run_command(argv, &dir, env, deadline)
        }
        ProbeKind::Prose { .. } | ProbeKind::Remote { .. } | ProbeKind::Document(_) => Err(
            ProbeError::Broken("this kind has no local execution".into()),
        ),
    };
    outcome.duration = started.elapsed();
    match result {
        Ok(output) => {
            outcome.output = output;
            judge(&mut outcome);
            if let Some(drift) = &probe.drift {
                outcome.verdict = Verdict::Fail;
                outcome.message = Some(match outcome.message.take() {
                    Some(m) => format!("{drift}; {m}"),
                    None => drift.clone(),
                });
            }
        }
        Err(ProbeError::Failed(message)) => {
            outcome.verdict = Verdict::Fail;
            outcome.message = Some(message);
        }
        Err(ProbeError::Broken(message)) => {
            outcome.verdict = Verdict::Error;
            outcome.message = Some(message);
        }
    }
    vec![outcome]
}

/// PASS when the output equals the expected text (trailing line ends aside), else FAIL with a diff.
fn judge(outcome: &mut Outcome) {
    let Some(expected) = outcome.expected.as_deref() else {
        outcome.verdict = Verdict::Pass;
        return;
    };
    let actual = outcome.output.trim_end_matches(['\n', '\r']);
    let expected = expected.trim_end_matches(['\n', '\r']);
    if actual == expected {
        outcome.verdict = Verdict::Pass;
    } else {
        outcome.verdict = Verdict::Fail;
        outcome.message = Some("output differs from the expected output".into());
        let diff = TextDiff::from_lines(&format!("{expected}\n"), &format!("{actual}\n"))
            .unified_diff()
            .header("expected", "actual")
            .to_string();
        outcome.diff = Some(diff);
    }
}

fn run_builtin(name: &str, ctx: ProbeContext, deadline: Duration) -> Result<String, ProbeError> {
    let probe = registry::builtin(name)
        .ok_or_else(|| ProbeError::Broken(format!("no builtin probe named {name}")))?;
    let (tx, rx) = mpsc::channel();
    let run = probe.run;
    // A probe bounds its own waits by the deadline; should one not, the run still moves on and
    // the thread is left to finish on its own.
    std::thread::Builder::new()
        .name(format!("probe-{name}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (run)(&ctx)));
            let _ = tx.send(result);
        })
        .map_err(|e| ProbeError::Broken(format!("cannot start probe thread: {e}")))?;
    match rx.recv_timeout(deadline) {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(ProbeError::Broken(format!("probe panicked: {what}")))
        }
        Err(_) => Err(ProbeError::Broken(format!(
            "deadline of {} exceeded",
            humantime::format_duration(deadline)
        ))),
    }
}

fn run_command(
    argv: &[String],
    dir: &std::path::Path,
    env: &std::collections::BTreeMap<String, String>,
    deadline: Duration,
) -> Result<String, ProbeError> {
    let done = command::run(argv, dir, env, deadline).map_err(|e| {
        ProbeError::Broken(format!(
            "cannot start {:?} in {}: {e}",
            argv[0],
            dir.display()
        ))
    })?;
    if done.timed_out {
        return Err(ProbeError::Broken(format!(
            "deadline of {} exceeded; process group killed{}",
            humantime::format_duration(deadline),
            tail("stderr", &done.stderr)
        )));
    }
    match done.status.and_then(|s| s.code()) {
        Some(0) => Ok(done.stdout),
        Some(code) => Err(ProbeError::Failed(format!(
            "exited with status {code}{}",
            tail("stderr", &done.stderr)
        ))),
        None => Err(ProbeError::Broken(format!(
            "killed by a signal{}",
            tail("stderr", &done.stderr)
        ))),
    }
}

fn tail(what: &str, text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let last: Vec<&str> = text.lines().rev().take(5).collect();
    format!(
        "; {what}: {}",
        last.into_iter().rev().collect::<Vec<_>>().join(" | ")
    )
}
