//! Executing document probes: an exercise or snippet of a lesson run by the lesson module (a
//! step that continues another waiting for it, on any worker, and running in the folder it
//! left), and a probe that the lesson document answers as a whole (`doc = "*"`) when the course
//! has no verifier of its own; and session blocks, whose document's blocks run once, together,
//! for all of them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::{Outcome, RunConfig, Verdict};
use crate::checkpoint::{Checkpoint, Probe, ProbeKind};
use crate::lesson::session::{self, BlockRun, SessionProbe, Transcript};
use crate::lesson::{self, CodeProbe, DocBody, DocProbe, DocRun, DocVerdict, Left};

/// What each continued step left, by (lesson, step id); `None` until it finishes.
type LeftBySteps = HashMap<(u32, String), Option<Arc<Left>>>;

/// How often a step waiting for its predecessor looks at the run's cancellation.
const POLL: Duration = Duration::from_millis(50);

/// What the steps of a run that others continue left, as they finish: a continuing step waits
/// here for its predecessor, which the plan puts before it, so some worker already runs it.
#[derive(Debug, Default)]
pub struct Chains {
    /// (lesson, step id) of every continued step of the plan; `None` until it finishes.
    left: Mutex<LeftBySteps>,
    finished: Condvar,
    /// The session transcripts of the plan's documents, each run once.
    sessions: Sessions,
}

/// Each document's session blocks, run once for every session probe of it in the plan: from
/// its first block to the last one the plan holds (the earlier ones run for their state even
/// when not selected, and only the planned ones report).
#[derive(Debug, Default)]
struct Sessions {
    /// By (lesson, document): the last block index the plan needs, and the blocks' results.
    runs: Mutex<HashMap<(u32, PathBuf), Arc<TranscriptRun>>>,
}

#[derive(Debug)]
struct TranscriptRun {
    upto: usize,
    results: OnceLock<Vec<BlockRun>>,
}

impl Sessions {
    fn new<'a>(probes: impl IntoIterator<Item = (u32, &'a Probe)>) -> Sessions {
        let mut runs: HashMap<(u32, PathBuf), Arc<TranscriptRun>> = HashMap::new();
        for (lesson, probe) in probes {
            let ProbeKind::Document(doc) = &probe.kind else {
                continue;
            };
            let DocBody::Session(s) = &doc.body else {
                continue;
            };
            let key = (lesson, doc.file.clone());
            let upto = runs.get(&key).map_or(s.index, |r| r.upto.max(s.index));
            runs.insert(
                key,
                Arc::new(TranscriptRun {
                    upto,
                    results: OnceLock::new(),
                }),
            );
        }
        Sessions {
            runs: Mutex::new(runs),
        }
    }

    /// The result of block `session` of `doc`, running its document's blocks when no other
    /// probe of it has (the others wait for that run).
    fn result(
        &self,
        doc: &DocProbe,
        session: &SessionProbe,
        deadline: Duration,
        cancel: &Cancel,
    ) -> BlockRun {
        let key = (doc.lesson, doc.file.clone());
        let run = self.runs.lock().ok().map(|mut runs| {
            Arc::clone(runs.entry(key).or_insert_with(|| {
                Arc::new(TranscriptRun {
                    upto: session.index,
                    results: OnceLock::new(),
                })
            }))
        });
        let transcript: &Transcript = &session.transcript;
        let results = match &run {
            Some(run) => run.results.get_or_init(|| {
                session::run_transcript(transcript, run.upto.max(session.index), deadline, cancel)
            }),
            None => return not_run(doc, "the session runs' lock is poisoned"),
        };
        results
            .get(session.index)
            .cloned()
            .unwrap_or_else(|| not_run(doc, "its document's sessions stopped before it"))
    }
}

fn not_run(doc: &DocProbe, why: &str) -> BlockRun {
    BlockRun {
        verdict: DocVerdict::Error,
        message: Some(format!(
            "{}:{}: not run: {why}",
            doc.file.display(),
            doc.line
        )),
        details: None,
        output: String::new(),
        duration: Duration::ZERO,
        blessable: None,
    }
}

impl Chains {
    /// The continued steps among a plan's probes, each with its lesson.
    pub fn new<'a>(probes: impl IntoIterator<Item = (u32, &'a Probe)> + Clone) -> Chains {
        let sessions = Sessions::new(probes.clone());
        let left = probes
            .into_iter()
            .filter_map(|(lesson, probe)| match &probe.kind {
                ProbeKind::Document(doc) => match &doc.body {
                    DocBody::Code(code) => code
                        .continues
                        .as_ref()
                        .map(|c| ((lesson, c.id.clone()), None)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        Chains {
            left: Mutex::new(left),
            finished: Condvar::new(),
            sessions,
        }
    }

    /// What step `id` of `lesson` left, once it has finished; `None` when cancelled first.
    fn wait(&self, lesson: u32, id: &str, cancel: &Cancel) -> Option<Arc<Left>> {
        let key = (lesson, id.to_owned());
        let mut left = self.left.lock().ok()?;
        loop {
            match left.get(&key) {
                None => {
                    let why = format!("{id} is not part of this run");
                    return Some(Arc::new(Left::NotPassed(why)));
                }
                Some(Some(done)) => return Some(done.clone()),
                Some(None) if cancel.is_cancelled() => return None,
                Some(None) => left = self.finished.wait_timeout(left, POLL).ok()?.0,
            }
        }
    }

    /// Records what step `id` of `lesson` left, for the steps that continue it.
    fn leave(&self, lesson: u32, id: &str, what: Left) {
        if let Ok(mut left) = self.left.lock() {
            if let Some(slot) = left.get_mut(&(lesson, id.to_owned())) {
                *slot = Some(Arc::new(what));
            }
        }
        self.finished.notify_all();
    }

    /// Runs `code` of `doc` after the step it continues, and records what it leaves; with how
    /// long it waited for that step.
    fn run(
        &self,
        doc: &DocProbe,
        code: &CodeProbe,
        deadline: Duration,
        cancel: &Cancel,
    ) -> (DocRun, Duration) {
        let started = Instant::now();
        let before = match &code.continues {
            Some(c) => match self.wait(doc.lesson, &c.id, cancel) {
                Some(left) => Some(left),
                None => {
                    let why = format!("stopped: the run was interrupted before {} finished", c.id);
                    self.leave(
                        doc.lesson,
                        &doc.id,
                        Left::NotPassed(format!("{} was not run", doc.id)),
                    );
                    return (DocRun::not_run(&why), started.elapsed());
                }
            },
            None => None,
        };
        let waited = started.elapsed();
        let (run, left) = lesson::run_after(doc, code, before.as_deref(), deadline, cancel);
        self.leave(doc.lesson, &doc.id, left);
        (run, waited)
    }
}

/// One document probe's outcome, after the step it continues; `cancel` stops it.
pub fn run(
    mut outcome: Outcome,
    doc: &DocProbe,
    deadline: Duration,
    cancel: &Cancel,
    chains: &Chains,
) -> Outcome {
    let mut started = Instant::now();
    match &doc.body {
        DocBody::Code(code) => {
            let (done, waited) = chains.run(doc, code, deadline, cancel);
            // Its time is its own run's, not its predecessor's.
            started += waited;
            outcome.verdict = verdict(done.verdict);
            outcome.output = done.output();
            outcome.message = done.message;
            outcome.diff = done.details;
        }
        DocBody::Session(session) => {
            let done = chains.sessions.result(doc, session, deadline, cancel);
            outcome.verdict = verdict(done.verdict);
            outcome.output = done.output;
            outcome.message = done.message;
            outcome.diff = done.details;
            // Its own block's time, not its document's.
            outcome.duration = done.duration;
            return outcome;
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

/// Runs `missing` (code probes of `checkpoint` no case ran) after the steps they continue, in
/// document order: their verdicts by id.
fn run_missing<'a>(
    checkpoint: &Checkpoint,
    missing: &[&'a Probe],
    config: &RunConfig,
    cancel: &Cancel,
) -> HashMap<&'a str, Verdict> {
    let steps: Vec<(&DocProbe, &CodeProbe)> = checkpoint
        .with_predecessors(missing)
        .into_iter()
        .filter_map(|p| match &p.kind {
            ProbeKind::Document(doc) => match &doc.body {
                DocBody::Code(code) => Some((doc.as_ref(), code.as_ref())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let runs = lesson::run_in_order(&steps, config.default_timeout, cancel);
    missing
        .iter()
        .filter_map(|p| {
            let at = steps.iter().position(|(d, _)| d.id == p.id)?;
            Some((p.id.as_str(), verdict(runs[at].verdict)))
        })
        .collect()
}

fn verdict(v: DocVerdict) -> Verdict {
    match v {
        DocVerdict::Pass => Verdict::Pass,
        DocVerdict::Fail => Verdict::Fail,
        DocVerdict::Error => Verdict::Error,
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
