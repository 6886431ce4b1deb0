//! Steps that build on each other (`Continues: EX-31-01`), the one place their order lives: a
//! step runs after the step it continues, in a copy of the folder that step left; a step whose
//! predecessor did not pass is not run, and says which one failed. A chain (a first step and
//! the steps continuing it, directly or not) that faults a service holds it from its first step
//! to its last: [`holds`] says which.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::doc_run::{DocRun, DocVerdict};
use super::document::{CodeProbe, DocBody, DocProbe};
use super::exercise::{run_step, Conditions, Workspace};

/// What a step left for the steps that continue it.
#[derive(Debug)]
pub enum Left {
    /// It passed: the folder as it left it.
    Passed(Workspace),
    /// It did not pass, or did not run: why, as the next step's ERROR says it.
    NotPassed(String),
}

/// What each continued step left, by (lesson, step id); `None` until it finishes.
type LeftBySteps = HashMap<(u32, String), Option<Arc<Left>>>;

/// How often a step waiting for its predecessor looks at the run's cancellation.
const POLL: Duration = Duration::from_millis(50);

/// What the continued steps of a run left, as they finish: a continuing step waits here for
/// its predecessor, which comes before it in document order, so some worker already runs it
/// (or, run one after another, it has finished).
#[derive(Debug, Default)]
pub struct Chains {
    /// (lesson, step id) of every continued step of the run; `None` until it finishes.
    left: Mutex<LeftBySteps>,
    finished: Condvar,
}

impl Chains {
    /// The continued steps among a run's document probes.
    pub fn new<'a>(probes: impl IntoIterator<Item = &'a DocProbe>) -> Chains {
        let left = probes
            .into_iter()
            .filter_map(|doc| match &doc.body {
                DocBody::Code(code) => code
                    .continues
                    .as_ref()
                    .map(|c| ((doc.lesson, c.id.clone()), None)),
                _ => None,
            })
            .collect();
        Chains {
            left: Mutex::new(left),
            finished: Condvar::new(),
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

    /// Runs `code` of `doc` after the step it continues, and records what it leaves; its
    /// duration is its own, not the wait for that step.
    pub fn run(&self, doc: &DocProbe, code: &CodeProbe, under: Conditions<'_>) -> DocRun {
        let before = match &code.continues {
            Some(c) => match self.wait(doc.lesson, &c.id, under.cancel) {
                Some(left) => Some(left),
                None => {
                    let why = format!("stopped: the run was interrupted before {} finished", c.id);
                    self.leave(
                        doc.lesson,
                        &doc.id,
                        Left::NotPassed(format!("{} was not run", doc.id)),
                    );
                    return DocRun::not_run(&why);
                }
            },
            None => None,
        };
        let started = Instant::now();
        let (mut run, left) = run_after(doc, code, before.as_deref(), under);
        self.leave(doc.lesson, &doc.id, left);
        run.duration = started.elapsed();
        run
    }
}

/// Runs `probe` after what the step it continues `left` (nothing for a first step) and says
/// what it leaves in turn.
fn run_after(
    probe: &DocProbe,
    code: &CodeProbe,
    left: Option<&Left>,
    under: Conditions<'_>,
) -> (DocRun, Left) {
    let after = match left {
        Some(Left::NotPassed(why)) => {
            let run = DocRun::not_run(&format!("not run: {why}"));
            let next = Left::NotPassed(format!("{} was not run ({why})", probe.id));
            return (run, next);
        }
        Some(Left::Passed(workspace)) => Some(workspace),
        None => None,
    };
    let (run, workspace) = run_step(probe, code, after, under);
    let left = match (run.verdict, workspace) {
        (DocVerdict::Pass, Some(workspace)) => Left::Passed(workspace),
        _ => Left::NotPassed(format!("{} failed", probe.id)),
    };
    (run, left)
}

/// A chain of steps, named by its lesson and its first step (the one that continues none).
pub type ChainId = (u32, String);

/// The services a chain's fault steps act on, which it holds exclusively from its first step to
/// its last (no other probe needing one runs meanwhile), and starts again after its last; and
/// the other services its steps need, which it uses (as other probes may) for as long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub chain: ChainId,
    pub services: Vec<String>,
    /// Taken with the held ones at its first step, so that two chains never wait on each other.
    pub uses: Vec<String>,
}

/// The hold of every step of `probes` (in document order, as a run's plan has them) whose chain
/// faults some service, by (lesson, step id).
pub fn holds<'a>(probes: impl IntoIterator<Item = &'a DocProbe>) -> HashMap<(u32, String), Hold> {
    let mut first: HashMap<(u32, String), ChainId> = HashMap::new();
    let mut faulted: BTreeMap<ChainId, Vec<String>> = BTreeMap::new();
    let mut needed: BTreeMap<ChainId, Vec<String>> = BTreeMap::new();
    for doc in probes {
        let DocBody::Code(code) = &doc.body else {
            continue;
        };
        let step = (doc.lesson, doc.id.clone());
        // A step comes after the step it continues, whose chain is known by then.
        let chain = code
            .continues
            .as_ref()
            .and_then(|c| first.get(&(doc.lesson, c.id.clone())).cloned())
            .unwrap_or_else(|| step.clone());
        let add = |to: &mut Vec<String>, service: &String| {
            if !to.contains(service) {
                to.push(service.clone());
            }
        };
        let services = faulted.entry(chain.clone()).or_default();
        code.faults.iter().for_each(|f| add(services, &f.service));
        let uses = needed.entry(chain.clone()).or_default();
        code.services.iter().for_each(|s| add(uses, s));
        first.insert(step, chain);
    }
    first
        .into_iter()
        .filter_map(|(step, chain)| {
            let services = faulted.get(&chain).filter(|s| !s.is_empty())?.clone();
            let uses = needed.get(&chain).map_or_else(Vec::new, |needed| {
                let others = needed.iter().filter(|s| !services.contains(s));
                others.cloned().collect()
            });
            let hold = Hold {
                chain,
                services,
                uses,
            };
            Some((step, hold))
        })
        .collect()
}

/// `wanted` (of one lesson) with every step they continue, directly or not, taken from `all`
/// (the lesson's document probes in document order); in document order.
pub fn with_predecessors<'a>(all: &[&'a DocProbe], wanted: &[&DocProbe]) -> Vec<&'a DocProbe> {
    let mut needed: HashSet<&str> = wanted.iter().map(|p| p.id.as_str()).collect();
    // A step continues one before it, so one pass from the end finds every predecessor.
    for probe in all.iter().rev() {
        if !needed.contains(probe.id.as_str()) {
            continue;
        }
        if let DocBody::Code(code) = &probe.body {
            if let Some(c) = &code.continues {
                needed.insert(c.id.as_str());
            }
        }
    }
    all.iter()
        .copied()
        .filter(|p| needed.contains(p.id.as_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::runs::run_in_order;
    use super::*;
    use std::path::Path;

    fn doc(text: &str) -> super::super::LessonDoc {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(dir.path().join("project/seed.txt"), "seed\n").unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        let doc = super::super::document::parse(
            &course.settings,
            31,
            Path::new("lessons/31.md"),
            text.as_bytes(),
        )
        .unwrap();
        // The run-from folder must outlive the parse for the runs below.
        std::mem::forget(dir);
        doc
    }

    const CHAIN: &str = "### Answer EX-31-01 [code]\n\nRun:\n\n```sh\necho one > step.txt\n```\n\n### Answer EX-31-02 [code]\n\nContinues: EX-31-01\n\nRun:\n\n```sh\ncat seed.txt step.txt; echo two >> step.txt\n```\n\nExpected output:\n\n```text\nseed\none\n```\n\n### Answer EX-31-03 [code]\n\n接续：EX-31-02\n\nRun:\n\n```sh\ncat step.txt\n```\n\nExpected output:\n\n```text\none\ntwo\n```\n\n### Answer EX-31-04 [code]\n\nRun:\n\n```sh\ntest ! -e step.txt\n```\n";

    fn steps(d: &super::super::LessonDoc) -> Vec<&DocProbe> {
        d.probes
            .iter()
            .filter(|p| matches!(p.body, DocBody::Code(_)))
            .collect()
    }

    #[test]
    fn each_step_sees_what_the_one_it_continues_left_and_others_start_fresh() {
        let d = doc(CHAIN);
        let runs = run_in_order(&steps(&d), Duration::from_secs(10), &Cancel::new());
        crate::lesson::isolation::release_all();
        let verdicts: Vec<_> = runs
            .iter()
            .map(|r| (r.verdict, r.message.clone()))
            .collect();
        assert!(
            verdicts.iter().all(|(v, _)| *v == DocVerdict::Pass),
            "{verdicts:?}"
        );
    }

    #[test]
    fn a_failed_predecessor_leaves_its_successors_not_run() {
        let d = doc(&CHAIN.replace("echo one > step.txt", "exit 4"));
        let runs = run_in_order(&steps(&d), Duration::from_secs(10), &Cancel::new());
        crate::lesson::isolation::release_all();
        assert_eq!(runs[0].verdict, DocVerdict::Fail);
        assert_eq!(runs[1].verdict, DocVerdict::Error);
        assert_eq!(runs[1].message.as_deref(), Some("not run: EX-31-01 failed"));
        assert_eq!(
            runs[2].message.as_deref(),
            Some("not run: EX-31-02 was not run (EX-31-01 failed)")
        );
        assert_eq!(runs[3].verdict, DocVerdict::Pass);
    }

    #[test]
    fn a_chain_that_faults_a_service_holds_it_from_its_first_step_to_its_last() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(
            dir.path().join("lessonprobe.toml"),
            "[services.cache]\nstart = \"sleep 9\"\n",
        )
        .unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        let run = "Run:\n\n```sh\ntrue\n```\n\n";
        let text = format!("Services: cache\n\n### Answer EX-31-01 [code]\n\n{run}### Answer EX-31-02 [code]\n\nContinues: EX-31-01\n\nStop service: cache\n\n{run}### Answer EX-31-03 [code]\n\nContinues: EX-31-02\n\n{run}### Answer EX-31-04 [code]\n\n{run}");
        let d = super::super::document::parse(
            &course.settings,
            31,
            Path::new("lessons/31.md"),
            text.as_bytes(),
        )
        .unwrap();
        let holds = holds(&d.probes);
        let chain = (31, "EX-31-01".to_owned());
        for step in ["EX-31-01", "EX-31-02", "EX-31-03"] {
            assert_eq!(
                holds.get(&(31, step.to_owned())),
                Some(&Hold {
                    chain: chain.clone(),
                    services: vec!["cache".into()],
                    uses: Vec::new(),
                }),
                "{step}"
            );
        }
        assert_eq!(holds.get(&(31, "EX-31-04".to_owned())), None);
    }

    #[test]
    fn predecessors_are_found_transitively_in_document_order() {
        let d = doc(CHAIN);
        let all: Vec<&DocProbe> = d.probes.iter().collect();
        let picked = with_predecessors(&all, &[&d.probes[2]]);
        let ids: Vec<&str> = picked.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["EX-31-01", "EX-31-02", "EX-31-03"]);
        let picked = with_predecessors(&all, &[&d.probes[3]]);
        assert_eq!(picked.len(), 1);
    }
}
