//! Retries: a case that fails is run again, up to its probe's retries, and one that then
//! passes is FLAKY, never PASS. The failed attempts are kept on the final outcome.

use super::execute::{run_case, Shared};
use super::plan::PlannedCase;
use super::{Attempt, Outcome, RunConfig, Verdict};
use crate::checkpoint::{Probe, ProbeKind};

/// How many times a failing case of `probe` is run again: its manifest's `retries`, else
/// `--retries` for builtin, command and remote probes, and for document probes only with
/// `--retry-documents`. Prose is never run.
pub(super) fn retries_of(probe: &Probe, config: &RunConfig) -> u32 {
    if let Some(retries) = probe.retries {
        return retries;
    }
    let policy = config.failure;
    match probe.kind {
        ProbeKind::Builtin { .. } | ProbeKind::Command { .. } | ProbeKind::Remote { .. } => {
            policy.retries
        }
        ProbeKind::Document(_) if policy.retry_documents => policy.retries,
        ProbeKind::Document(_) | ProbeKind::Prose { .. } => 0,
    }
}

/// Runs `case`, again while it fails and retries are left and the run is not cancelled. Each
/// attempt after the first gets a key of its own (`KEY-rN`), so that what a failed attempt
/// left on shared services does not meet the next one.
pub(super) fn run_with_retries(
    case: &PlannedCase<'_>,
    key: &str,
    shared: Shared<'_>,
) -> Vec<Outcome> {
    let retries = retries_of(case.probe, shared.config);
    let mut earlier: Vec<Vec<Outcome>> = Vec::new();
    loop {
        let key = match earlier.len() {
            0 => key.to_owned(),
            n => format!("{key}-r{n}"),
        };
        let outcomes = run_case(case, &key, shared);
        let failed = outcomes.iter().any(|o| o.verdict.failed());
        if !failed || earlier.len() as u32 >= retries || shared.cancel.is_cancelled() {
            return settle(outcomes, &earlier);
        }
        earlier.push(outcomes);
    }
}

/// The last attempt's outcomes, each carrying the earlier attempts of the same case that
/// failed; a PASS after a failed attempt becomes FLAKY.
fn settle(mut last: Vec<Outcome>, earlier: &[Vec<Outcome>]) -> Vec<Outcome> {
    let attempts = earlier.len() as u32 + 1;
    for outcome in &mut last {
        outcome.attempts = attempts;
        let name = outcome.display_name();
        for (n, attempt) in earlier.iter().enumerate() {
            // The same case of that attempt; a remote selector that failed as a whole has one
            // outcome, which stands for every case of the last attempt.
            let same = attempt
                .iter()
                .find(|o| o.display_name() == name)
                .or_else(|| attempt.first().filter(|_| attempt.len() == 1));
            if let Some(failed) = same.filter(|o| o.verdict.failed()) {
                outcome
                    .failed_attempts
                    .push(Attempt::of(failed, n as u32 + 1));
            }
        }
        if outcome.verdict == Verdict::Pass && !outcome.failed_attempts.is_empty() {
            outcome.verdict = Verdict::Flaky;
            outcome.message = Some(format!(
                "passed on attempt {attempts} of {attempts} after {}",
                plural(outcome.failed_attempts.len(), "failed attempt")
            ));
        }
    }
    last
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::test_support;

    #[test]
    fn a_pass_after_a_failure_is_flaky_and_keeps_the_failed_attempt() {
        let mut first = test_support::outcome(90, "a", Verdict::Fail);
        first.message = Some("exited with status 1".into());
        first.output = "attempt one".into();
        let last = settle(
            vec![test_support::outcome(90, "a", Verdict::Pass)],
            &[vec![first]],
        );
        assert_eq!(last[0].verdict, Verdict::Flaky);
        assert_eq!(last[0].attempts, 2);
        assert_eq!(
            last[0].message.as_deref(),
            Some("passed on attempt 2 of 2 after 1 failed attempt")
        );
        let kept = &last[0].failed_attempts;
        assert_eq!((kept.len(), kept[0].number), (1, 1));
        assert_eq!(kept[0].output, "attempt one");
    }

    #[test]
    fn a_case_that_fails_every_attempt_stays_fail_and_a_first_pass_stays_pass() {
        let fail = || test_support::outcome(90, "a", Verdict::Fail);
        let last = settle(vec![fail()], &[vec![fail()], vec![fail()]]);
        assert_eq!(last[0].verdict, Verdict::Fail);
        assert_eq!(last[0].attempts, 3);
        assert_eq!(last[0].failed_attempts.len(), 2);
        let once = settle(vec![test_support::outcome(90, "a", Verdict::Pass)], &[]);
        assert_eq!((once[0].verdict, once[0].attempts), (Verdict::Pass, 1));
    }
}
