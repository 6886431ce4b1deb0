//! Executing a remote probe: its selector on the authorized host, the remote JUnit turned
//! into outcomes that carry the host. A run that did not happen is an ERROR, never a PASS.

use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::{Outcome, Verdict};
use crate::remote::{self, AuthorizedHost, HostFacts, RemoteCase, RemoteVerdict};

/// Runs on `host`. (Without the remote flag the plan has already made the case PENDING, and
/// without a host it is an ERROR saying why; neither gets here.)
pub fn run(
    mut base: Outcome,
    host: &AuthorizedHost,
    checkpoint: u32,
    selector: &str,
    deadline: Duration,
    cancel: &Cancel,
) -> Vec<Outcome> {
    base.host = Some(host.name.clone());
    base.properties.push(("host".into(), host.place()));
    let started = Instant::now();
    match remote::run_selector(host, checkpoint, selector, deadline, cancel) {
        Ok(report) => {
            add_facts(&mut base, &report.facts);
            let times = case_times(&report.cases, started.elapsed());
            report
                .cases
                .into_iter()
                .zip(times)
                .map(|(case, time)| {
                    let mut o = base.clone();
                    o.remote_case = Some(case.name);
                    o.verdict = match case.verdict {
                        RemoteVerdict::Pass => Verdict::Pass,
                        RemoteVerdict::Fail => Verdict::Fail,
                        RemoteVerdict::Error => Verdict::Error,
                        RemoteVerdict::Skip => Verdict::Skip,
                    };
                    o.message = case.message.or_else(|| {
                        (o.verdict == Verdict::Skip).then(|| "skipped on the remote host".into())
                    });
                    o.output = if case.output.is_empty() {
                        report.output.clone()
                    } else {
                        case.output
                    };
                    o.duration = time;
                    o
                })
                .collect()
        }
        Err(e) => {
            if let Some(facts) = &e.facts {
                add_facts(&mut base, facts);
            }
            base.verdict = Verdict::Error;
            base.message = Some(e.to_string());
            base.output = e.output;
            base.duration = started.elapsed();
            vec![base]
        }
    }
}

/// Each case's time as the remote report gives it. Cases it gives none share what is left of
/// the run's wall time, so the times still add up to the run.
fn case_times(cases: &[RemoteCase], wall: Duration) -> Vec<Duration> {
    let known: Duration = cases.iter().filter_map(|c| c.time).sum();
    let unknown = cases.iter().filter(|c| c.time.is_none()).count();
    let share = wall.saturating_sub(known) / unknown.max(1) as u32;
    cases.iter().map(|c| c.time.unwrap_or(share)).collect()
}

fn add_facts(o: &mut Outcome, facts: &HostFacts) {
    o.properties
        .push(("host_key".into(), facts.fingerprint.clone()));
    o.properties.push(("os".into(), facts.os.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(time: Option<Duration>) -> RemoteCase {
        RemoteCase {
            name: "c".into(),
            verdict: RemoteVerdict::Pass,
            message: None,
            output: String::new(),
            time,
        }
    }

    #[test]
    fn times_come_from_the_report_and_missing_ones_share_the_rest() {
        let s = Duration::from_secs;
        let cases = [case(Some(s(120))), case(None), case(Some(s(1))), case(None)];
        assert_eq!(case_times(&cases, s(125)), [s(120), s(2), s(1), s(2)]);
        assert_eq!(case_times(&cases[..1], s(3)), [s(120)]);
    }
}
