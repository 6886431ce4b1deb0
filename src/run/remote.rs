//! Executing a remote probe: its selector on the authorized host, the remote JUnit turned
//! into outcomes that carry the host. A run that did not happen is an ERROR, never a PASS.

use std::time::{Duration, Instant};

use super::{Outcome, Verdict};
use crate::remote::{self, AuthorizedHost, HostFacts, RemoteVerdict};

/// Runs on `host`. (Without the remote flag the plan has already made the case PENDING, and
/// without a host it is an ERROR saying why; neither gets here.)
pub fn run(
    mut base: Outcome,
    host: &AuthorizedHost,
    checkpoint: u32,
    selector: &str,
    deadline: Duration,
) -> Vec<Outcome> {
    base.host = Some(host.name.clone());
    base.properties.push(("host".into(), host.place()));
    let started = Instant::now();
    match remote::run_selector(host, checkpoint, selector, deadline) {
        Ok(report) => {
            add_facts(&mut base, &report.facts);
            let each = started.elapsed() / report.cases.len().max(1) as u32;
            report
                .cases
                .into_iter()
                .map(|case| {
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
                    o.duration = each;
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

fn add_facts(o: &mut Outcome, facts: &HostFacts) {
    o.properties
        .push(("host_key".into(), facts.fingerprint.clone()));
    o.properties.push(("os".into(), facts.os.clone()));
}
