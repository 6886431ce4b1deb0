//! Runs a plan's cases on at most `jobs` workers and tells the run as events, from the calling
//! thread. An interruption stops new cases from starting and ends every unfinished one; so does
//! reaching `--max-fail`, except that the running cases finish and the others are NOT RUN.
//! Which case a free worker takes is [`Dispatch`]'s to say (a chain's hold on a service).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::dispatch::Dispatch;
use super::events::{Interrupt, Interruption, RunEvent, RunSummary};
use super::execute::{decided, Shared};
use super::plan::{Decision, Plan, PlannedCase};
use super::retry::run_with_retries;
use super::{Counts, Outcome, RunConfig, Verdict};
use crate::checkpoint::ProbeKind;

/// How often the calling thread looks for an interruption while no case reports.
const POLL: Duration = Duration::from_millis(50);

/// What a worker tells the calling thread.
enum Progress {
    Started(usize),
    Finished(usize, Vec<Outcome>),
}

/// Where a case is.
enum Slot {
    Waiting,
    /// Since when.
    Running(Instant),
    Done(Vec<Outcome>),
}

/// Runs the plan, handing `sink` every event of the run in order: `RunStarted`, then
/// `CaseStarted`/`CaseFinished` as cases start and end (in completion order), `RunInterrupted`
/// if `interrupt` is requested, and `RunFinished`. Every case finishes exactly once.
pub fn execute(
    plan: &Plan<'_>,
    config: &RunConfig,
    run_id: &str,
    interrupt: &Interrupt,
    mut sink: impl FnMut(&RunEvent<'_>),
) -> RunSummary {
    let started = Instant::now();
    let failed = super::preflight::check(plan, config);
    let environment = super::preflight::checkpoint(&failed);
    let checked;
    let plan = if failed.is_empty() {
        plan
    } else {
        checked = super::preflight::apply(plan, config, &failed, &environment);
        &checked
    };
    let cases = &plan.cases;
    sink(&RunEvent::RunStarted { run_id, cases });
    let mut slots: Vec<Slot> = cases.iter().map(|_| Slot::Waiting).collect();
    let dispatch = Dispatch::new(plan);
    // Cases that failed or errored, against --max-fail.
    let failures = AtomicUsize::new(0);
    let stop_at = config.failure.max_fail.map(|n| n as usize);
    let stopped = || stop_at.is_some_and(|n| failures.load(Ordering::SeqCst) >= n);
    // The plan's document probes run through the lesson's one API: a step that continues
    // another waits for it there (a worker took it already: a case taken always runs,
    // --max-fail or not), a session block runs with its document's; fault steps act on the
    // run's services.
    let documents =
        crate::lesson::Runs::new(cases.iter().filter_map(|case| match &case.probe.kind {
            ProbeKind::Document(doc) => Some(doc.as_ref()),
            _ => None,
        }))
        .with_services(config.services.clone());
    let (tx, rx) = mpsc::channel::<Progress>();
    let interrupted = std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1).min(cases.len().max(1)) {
            let tx = tx.clone();
            let (dispatch, failures, stopped, documents) =
                (&dispatch, &failures, &stopped, &documents);
            scope.spawn(move || {
                let go_on = || interrupt.requested().is_none() && !stopped();
                while let Some(i) = dispatch.take(go_on) {
                    let case = &cases[i];
                    // Answered once the lesson document's probes are done, below.
                    if case.decision == Decision::FromDocument {
                        dispatch.finish(i, |_| {});
                        continue;
                    }
                    let runs = case.decision == Decision::Run;
                    if runs && tx.send(Progress::Started(i)).is_err() {
                        dispatch.finish(i, |_| {});
                        break;
                    }
                    let key = case.case_key(run_id);
                    let shared = Shared {
                        config,
                        cancel: interrupt.cancel(),
                        runs: documents,
                    };
                    let outcomes = run_with_retries(case, &key, shared);
                    // A chain's last step: its services are started again before anything
                    // else may need them, whatever its verdict.
                    let unneeded = dispatch.finish(i, |held| config.services.restore(held));
                    if outcomes.iter().any(|o| o.verdict.failed()) {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    let told = tx.send(Progress::Finished(i, outcomes)).is_ok();
                    // After its verdict is told: a service's stop may take its stop_timeout.
                    config.services.release(&unneeded);
                    if !told {
                        break;
                    }
                }
            });
        }
        drop(tx);
        tell(&rx, cases, &mut slots, interrupt, &mut sink)
    });
    if interrupted.is_none() {
        match stop_at.filter(|_| stopped()) {
            Some(limit) => end_not_run(cases, &mut slots, limit, &mut sink),
            None => answer_from_documents(plan, config, interrupt, &mut slots, &mut sink),
        }
    }
    // The simple rule: a service started at the first need is stopped when the run ends (kept
    // up between runs of --watch).
    config.services.end_of_run();
    let mut counts = Counts::default();
    for slot in &slots {
        if let Slot::Done(outcomes) = slot {
            counts.add(outcomes);
        }
    }
    let summary = RunSummary {
        counts,
        wall: started.elapsed(),
        interrupted,
    };
    sink(&RunEvent::RunFinished { summary });
    summary
}

/// Tells `sink` what the workers report, in the order it comes, until every worker has ended;
/// an interruption ends every case not finished at once, as interrupted. Returns the
/// interruption, if one came.
fn tell(
    rx: &mpsc::Receiver<Progress>,
    cases: &[PlannedCase<'_>],
    slots: &mut [Slot],
    interrupt: &Interrupt,
    sink: &mut impl FnMut(&RunEvent<'_>),
) -> Option<Interruption> {
    let mut interrupted = None;
    loop {
        let progress = rx.recv_timeout(POLL);
        let disconnected = matches!(progress, Err(RecvTimeoutError::Disconnected));
        // A case that ends once the run is interrupted was stopped by the interruption (its
        // command killed, its probe cancelled): it ends as interrupted like the others.
        if interrupted.is_none() && interrupt.requested().is_none() {
            match progress {
                Ok(Progress::Started(index)) => {
                    slots[index] = Slot::Running(Instant::now());
                    sink(&RunEvent::CaseStarted {
                        index,
                        case: &cases[index],
                    });
                }
                Ok(Progress::Finished(index, mut outcomes)) => {
                    outcomes.iter_mut().for_each(Outcome::locate_message);
                    finish(index, &cases[index], outcomes, &mut slots[index], sink);
                }
                Err(_) => {}
            }
        }
        if interrupted.is_none() {
            if let Some(why) = interrupt.requested() {
                interrupted = Some(why);
                end_unfinished(cases, slots, why, sink);
            }
        }
        // After an interruption, what running cases still report is dropped: they have
        // ended as interrupted. Their workers are still waited for, each bounded by its
        // case's deadline.
        if disconnected {
            break;
        }
    }
    interrupted
}

/// Cases answered by their lesson document, once its probes' outcomes are known.
fn answer_from_documents(
    plan: &Plan<'_>,
    config: &RunConfig,
    interrupt: &Interrupt,
    slots: &mut [Slot],
    sink: &mut impl FnMut(&RunEvent<'_>),
) {
    for (index, case) in plan.cases.iter().enumerate() {
        if case.decision != Decision::FromDocument {
            continue;
        }
        sink(&RunEvent::CaseStarted { index, case });
        let done: Vec<Outcome> = slots
            .iter()
            .filter_map(|s| match s {
                Slot::Done(outcomes) => Some(outcomes.iter().cloned()),
                _ => None,
            })
            .flatten()
            .collect();
        let mut outcome = super::document::answer(
            Outcome::of(case),
            case.checkpoint,
            &done,
            config,
            interrupt.cancel(),
        );
        outcome.locate_message();
        finish(index, case, vec![outcome], &mut slots[index], sink);
    }
}

/// Announces that case `index` finished with `outcomes`, and keeps them in its slot.
fn finish(
    index: usize,
    case: &PlannedCase<'_>,
    outcomes: Vec<Outcome>,
    slot: &mut Slot,
    sink: &mut impl FnMut(&RunEvent<'_>),
) {
    sink(&RunEvent::CaseFinished {
        index,
        case,
        outcomes: &outcomes,
    });
    *slot = Slot::Done(outcomes);
}

/// Announces the interruption and finishes every case that has not finished: ERROR
/// "interrupted", or its SKIP/PENDING decision.
fn end_unfinished(
    cases: &[PlannedCase<'_>],
    slots: &mut [Slot],
    why: Interruption,
    sink: &mut impl FnMut(&RunEvent<'_>),
) {
    let running = slots
        .iter()
        .filter(|s| matches!(s, Slot::Running(_)))
        .count();
    let not_started = slots
        .iter()
        .zip(cases)
        .filter(|(s, c)| matches!(s, Slot::Waiting) && c.decision == Decision::Run)
        .count();
    sink(&RunEvent::RunInterrupted {
        reason: why,
        running,
        not_started,
    });
    for (index, slot) in slots.iter_mut().enumerate() {
        let case = &cases[index];
        let outcome = match slot {
            Slot::Done(_) => continue,
            Slot::Running(since) => {
                let mut outcome = interrupted(case, why, "while it ran");
                outcome.duration = since.elapsed();
                outcome
            }
            Slot::Waiting => {
                decided(case).unwrap_or_else(|| interrupted(case, why, "before it started"))
            }
        };
        finish(index, case, vec![outcome], slot, sink);
    }
}

/// After `--max-fail` was reached: every case that did not start finishes as NOT RUN (a case
/// decided SKIP or PENDING keeps that verdict, since it needed no running).
fn end_not_run(
    cases: &[PlannedCase<'_>],
    slots: &mut [Slot],
    limit: usize,
    sink: &mut impl FnMut(&RunEvent<'_>),
) {
    for (index, slot) in slots.iter_mut().enumerate() {
        if matches!(slot, Slot::Done(_)) {
            continue;
        }
        let case = &cases[index];
        let outcome = decided(case).unwrap_or_else(|| {
            let mut outcome = Outcome::of(case);
            outcome.verdict = Verdict::NotRun;
            outcome.message = Some(format!(
                "--max-fail {limit} was reached, so it never started"
            ));
            outcome
        });
        finish(index, case, vec![outcome], slot, sink);
    }
}

fn interrupted(case: &PlannedCase<'_>, why: Interruption, when: &str) -> Outcome {
    let mut outcome = Outcome::of(case);
    outcome.verdict = Verdict::Error;
    outcome.message = Some(format!("interrupted ({}) {when}", why.name()));
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_support;

    /// Each event as a line: its kind, the case and the verdicts.
    fn describe(event: &RunEvent<'_>) -> String {
        match event {
            RunEvent::RunStarted { run_id, cases } => format!("started {run_id} {}", cases.len()),
            RunEvent::CaseStarted { index, .. } => format!("case {index} started"),
            RunEvent::CaseFinished {
                index, outcomes, ..
            } => {
                let verdicts: Vec<String> = outcomes
                    .iter()
                    .map(|o| {
                        format!(
                            "{} {}",
                            o.verdict.label(),
                            o.message.as_deref().unwrap_or("")
                        )
                    })
                    .collect();
                format!("case {index} finished {}", verdicts.join(", "))
            }
            RunEvent::RunInterrupted {
                reason,
                running,
                not_started,
            } => format!(
                "interrupted {} running={running} not_started={not_started}",
                reason.name()
            ),
            RunEvent::RunFinished { summary } => format!("finished {}", summary.counts),
        }
    }

    #[test]
    fn every_case_starts_and_finishes_in_order_between_run_started_and_finished() {
        let mut seen = Vec::new();
        let summary = test_support::run(None, |e| {
            seen.push(test_support::without_temp_dir(&describe(e)))
        });
        assert_eq!(
            seen,
            [
                "started t 4",
                "case 0 started",
                "case 0 finished PASS ",
                "case 1 started",
                "case 1 finished PASS ",
                "case 2 finished SKIP prose exercise: answered in writing, no executable form",
                "case 3 started",
                "case 3 finished FAIL 90.toml:29: exited with status 3",
                "finished 2 passed, 1 failed, 0 errors, 1 skipped, 0 pending",
            ]
        );
        assert_eq!(summary.interrupted, None);
    }

    #[test]
    fn an_interruption_ends_every_unfinished_case_as_error_and_starts_no_other() {
        let mut seen = Vec::new();
        let summary = test_support::run(Some(1), |e| seen.push(describe(e)));
        assert_eq!(
            seen,
            [
                "started t 4",
                "case 0 started",
                "case 0 finished PASS ",
                "case 1 started",
                "interrupted SIGINT running=1 not_started=1",
                "case 1 finished ERROR interrupted (SIGINT) while it ran",
                "case 2 finished SKIP prose exercise: answered in writing, no executable form",
                "case 3 finished ERROR interrupted (SIGINT) before it started",
                "finished 1 passed, 0 failed, 2 errors, 1 skipped, 0 pending",
            ]
        );
        assert_eq!(summary.interrupted, Some(Interruption::Interrupt));
    }

    #[test]
    fn past_max_fail_no_case_starts_and_the_rest_are_not_run_or_keep_their_decision() {
        let manifest = r#"
[checkpoint]
lesson = 90
title = "stops"

[[probe]]
id = "fails"
name = "f"
claim = "c"
kind = "command"
argv = ["false"]

[[probe]]
id = "passes"
name = "p"
claim = "c"
kind = "command"
argv = ["true"]

[[probe]]
id = "prose"
name = "q"
claim = "c"
kind = "prose"
question = "why?"
"#;
        let failure = crate::run::FailurePolicy {
            max_fail: Some(1),
            ..Default::default()
        };
        let mut seen = Vec::new();
        test_support::run_manifest(manifest, failure, None, |e| {
            seen.push(test_support::without_temp_dir(&describe(e)))
        });
        assert_eq!(
            seen,
            [
                "started t 3",
                "case 0 started",
                "case 0 finished FAIL 90.toml:7: exited with status 1",
                "case 1 finished NOT RUN --max-fail 1 was reached, so it never started",
                "case 2 finished SKIP prose exercise: answered in writing, no executable form",
                "finished 0 passed, 1 failed, 0 errors, 1 skipped, 0 pending, 1 not run",
            ]
        );
    }

    #[test]
    fn a_case_that_fails_once_is_retried_and_flaky() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        let manifest = format!(
            "[checkpoint]\nlesson = 90\ntitle = \"t\"\n[[probe]]\nid = \"once\"\nname = \"n\"\nclaim = \"c\"\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"test -f {0} || {{ touch {0}; exit 1; }}\"]\n",
            marker.display()
        );
        let failure = crate::run::FailurePolicy {
            retries: 1,
            ..Default::default()
        };
        let mut seen = Vec::new();
        let summary =
            test_support::run_manifest(&manifest, failure, None, |e| seen.push(describe(e)));
        assert_eq!(
            seen[2],
            "case 0 finished FLAKY passed on attempt 2 of 2 after 1 failed attempt"
        );
        assert_eq!((summary.counts.flaky, summary.counts.passed), (1, 0));
    }
}
