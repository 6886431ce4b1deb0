//! The preflight: the checks of services and the interpreter a run is given (by the components
//! that own each) run at once, in parallel and bounded, before any probe; a failed one becomes an
//! ERROR case of its own and the cases that need it are NOT RUN with its message.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lessonprobe_probes::{DbTarget, KafkaTarget};

use super::plan::{Decision, Plan, PlannedCase};
use super::{RemoteHost, RunConfig};
use crate::checkpoint::{Backend, Checkpoint, Probe, ProbeKind};
use crate::lesson::DocBody;

/// How long one check may take; one that has not answered by then is a failure.
pub const CHECK_LIMIT: Duration = Duration::from_secs(2);

/// What a case may need of the machine, each the subject of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// The course's interpreter and its declared requirements (code blocks of lessons).
    Interpreter,
    /// A Jupyter kernel in the course's interpreter (notebook cells).
    Kernel,
    /// The broker of `--kafka` (not the embedded one).
    Kafka,
    /// A PostgreSQL of `--db`, by URL.
    Postgres(String),
    /// The authorized remote host.
    RemoteHost,
    /// A service the course declares, by name: its check starts it.
    Service(String),
}

/// A check failed: what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} — {}", self.what, self.fix)
    }
}

/// One check of a service or the interpreter, given by the component that owns the service; it bounds its
/// own waits by the limit it is handed.
#[derive(Clone)]
pub struct Check {
    pub need: Need,
    /// Names the check in reports: `python`, `kafka 127.0.0.1:9092`.
    pub name: String,
    /// How long it may take: [`CHECK_LIMIT`], or a service's `ready_timeout`.
    pub limit: Duration,
    pub run: Arc<dyn Fn(Duration) -> Result<(), Problem> + Send + Sync>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("need", &self.need)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A check that failed, with its name.
#[derive(Debug, Clone)]
pub struct Failed {
    pub need: Need,
    pub name: String,
    pub problem: Problem,
}

/// What a planned case needs of services and the interpreter, from what the plan knows of it.
pub fn needs(case: &PlannedCase<'_>, config: &RunConfig) -> Vec<Need> {
    let mut needs = Vec::new();
    let probe = case.probe;
    if let ProbeKind::Document(doc) = &probe.kind {
        match doc.body {
            DocBody::Code(_) => needs.push(Need::Interpreter),
            DocBody::Cell(_) => needs.push(Need::Kernel),
            _ => {}
        }
    }
    if probe.backends.contains(&Backend::Kafka) && config.kafka != KafkaTarget::Embedded {
        needs.push(Need::Kafka);
    }
    if let Some(DbTarget::Postgres(url)) = case.sql.as_ref().map(|s| &s.target) {
        needs.push(Need::Postgres(url.clone()));
    }
    if matches!(probe.kind, ProbeKind::Remote { .. })
        && matches!(config.remote, RemoteHost::Host(_))
    {
        needs.push(Need::RemoteHost);
    }
    needs.extend(probe.services.iter().cloned().map(Need::Service));
    needs
}

/// Runs the checks that some case of `plan` to run needs, all at once, each bounded by its
/// limit; returns the failed ones in the order given.
pub fn check(plan: &Plan<'_>, config: &RunConfig) -> Vec<Failed> {
    let wanted: Vec<&Check> = config
        .preflight
        .iter()
        .filter(|c| {
            plan.cases.iter().any(|case| {
                matches!(case.decision, Decision::Run | Decision::FromDocument)
                    && needs(case, config).contains(&c.need)
            })
        })
        .collect();
    run_all(&wanted)
        .into_iter()
        .filter_map(|(check, problem)| {
            problem.map(|problem| Failed {
                need: check.need.clone(),
                name: check.name.clone(),
                problem,
            })
        })
        .collect()
}

/// Runs `wanted` all at once, each bounded by its limit: each with its problem, if any.
pub fn run_all<'c>(wanted: &[&'c Check]) -> Vec<(&'c Check, Option<Problem>)> {
    let (tx, rx) = mpsc::channel();
    for (i, check) in wanted.iter().enumerate() {
        let (sender, run, limit) = (tx.clone(), check.run.clone(), check.limit);
        // Not scoped: a check that overstays is left behind, never waited for.
        let spawned = std::thread::Builder::new()
            .name(format!("preflight-{i}"))
            .spawn(move || {
                let _ = sender.send((i, run(limit)));
            });
        if let Err(e) = spawned {
            let _ = tx.send((
                i,
                Err(Problem {
                    what: format!("cannot start the check: {e}"),
                    fix: "run again with fewer processes on the machine".into(),
                }),
            ));
        }
    }
    drop(tx);
    let mut answers: Vec<Option<Result<(), Problem>>> = vec![None; wanted.len()];
    // A little beyond the checks' own limits, for them to say why they gave up.
    let longest = wanted.iter().map(|c| c.limit).max().unwrap_or(CHECK_LIMIT);
    let until = Instant::now() + longest + Duration::from_millis(500);
    while answers.iter().any(Option::is_none) {
        match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok((i, answer)) => answers[i] = Some(answer),
            Err(_) => break,
        }
    }
    wanted
        .iter()
        .zip(answers)
        .map(|(check, answer)| {
            let problem = match answer {
                Some(Ok(())) => return (*check, None),
                Some(Err(problem)) => problem,
                None => Problem {
                    what: format!(
                        "{}: no answer within {}",
                        check.name,
                        humantime::format_duration(check.limit)
                    ),
                    fix: "check that the service is up and reachable from this machine".into(),
                },
            };
            (*check, Some(problem))
        })
        .collect()
}

/// The checkpoint the failed checks are reported under: one probe per failed check.
pub fn checkpoint(failed: &[Failed]) -> Checkpoint {
    Checkpoint {
        lesson: 0,
        title: "environment".into(),
        source: "preflight".into(),
        document: None,
        probes: failed
            .iter()
            .map(|f| {
                Probe::new(
                    "environment:",
                    &f.name,
                    format!("the environment provides {}", f.name),
                    ProbeKind::Prose {
                        question: String::new(),
                        answer: None,
                    },
                )
            })
            .collect(),
    }
}

/// The plan with the failed checks first, as cases of their own, and every case that needs one
/// of them NOT RUN with its message; `broken` is [`checkpoint`] of `failed`.
pub fn apply<'a>(
    plan: &Plan<'a>,
    config: &RunConfig,
    failed: &[Failed],
    broken: &'a Checkpoint,
) -> Plan<'a> {
    let mut cases: Vec<PlannedCase<'a>> = failed
        .iter()
        .zip(&broken.probes)
        .map(|(f, probe)| PlannedCase {
            checkpoint: broken,
            probe,
            sql: None,
            decision: Decision::Broken(f.problem.to_string()),
        })
        .collect();
    for case in &plan.cases {
        let mut case = case.clone();
        if matches!(case.decision, Decision::Run | Decision::FromDocument) {
            let needs = needs(&case, config);
            if let Some(f) = failed.iter().find(|f| needs.contains(&f.need)) {
                case.decision = Decision::NotRun(format!(
                    "needs {}, which the preflight found broken (its ERROR says why)",
                    f.name
                ));
            }
        }
        cases.push(case);
    }
    Plan {
        cases,
        holds: plan.holds.clone(),
    }
}
