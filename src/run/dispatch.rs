//! Which case a free worker takes next: the first waiting one that may start now. A lesson step
//! waits until the step it continues is taken; a chain of steps that faults a service holds it
//! from its first step to its last, so no other case needing it starts meanwhile, and its first
//! step waits until no other case uses it, while the cases after it in the plan that need it
//! wait for the chain (it is not starved, and runs where the plan has it). A chain takes
//! everything it holds and uses at its first step, so two chains never wait on each other. A
//! worker never blocks on a held service
//! (the chain's next step may be waiting for a free worker): it takes another case, or waits for
//! one to end. Nor on a document's sequence (a notebook's cells, a page's sessions: one kernel
//! or shell runs them all for the first of them taken): while one of its cases runs, a free
//! worker takes a case of another document, so notebooks run side by side under `--jobs`.
//! Notebooks are looked at longest first (by their cells the run holds), in the places the plan
//! gives notebooks: a long one taken last would end the run alone.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::plan::{Decision, Plan};
use crate::checkpoint::ProbeKind;
use crate::lesson::{self, ChainId, DocBody, Hold};

/// How often a worker with nothing to take looks again at whether the run goes on.
const POLL: Duration = Duration::from_millis(50);

/// The cases of a plan, handed to workers one at a time.
pub(super) struct Dispatch<'p> {
    /// What each case holds and uses, by its index in the plan.
    cases: Vec<Needs<'p>>,
    /// The cases' indices in the order a free worker looks at them (see [`looked_at`]).
    order: Vec<usize>,
    state: Mutex<State>,
    /// A case was taken or finished.
    changed: Condvar,
}

/// What a case needs before it may start.
struct Needs<'p> {
    /// The case of the step it continues, when the plan holds it.
    after: Option<usize>,
    /// Its chain's hold, when the case runs and its chain faults services.
    hold: Option<&'p Hold>,
    /// The services it needs, when the case runs outside such a chain.
    uses: Vec<&'p str>,
    /// The document sequence it belongs to (numbered in the plan), when the case runs.
    sequence: Option<usize>,
}

impl Needs<'_> {
    /// Every service the case needs: those it uses, or its chain's, held and used.
    fn services(&self) -> impl Iterator<Item = &str> {
        let chain = self
            .hold
            .into_iter()
            .flat_map(|h| h.services.iter().chain(&h.uses).map(String::as_str));
        self.uses.iter().copied().chain(chain)
    }
}

#[derive(Default)]
struct State {
    taken: Vec<bool>,
    /// Every case before this place in `order` is taken: where a look for the next starts.
    from: usize,
    /// The chain holding each service.
    held: HashMap<String, ChainId>,
    /// How many running cases and holding chains use each service without holding it.
    using: HashMap<String, usize>,
    /// The holding chains whose first step was taken and whose last has not finished.
    active: HashSet<ChainId>,
    /// The cases of each holding chain not finished yet.
    left: HashMap<ChainId, usize>,
    /// How many cases that run, not finished yet, need each service (hold or use it).
    needed: HashMap<String, usize>,
    /// How many cases of each document sequence are running, by its number.
    in_sequence: Vec<usize>,
}

impl<'p> Dispatch<'p> {
    pub fn new(plan: &'p Plan<'_>) -> Dispatch<'p> {
        let index: HashMap<(u32, &str), usize> = plan
            .cases
            .iter()
            .enumerate()
            .filter_map(|(i, case)| match &case.probe.kind {
                ProbeKind::Document(doc) => Some(((doc.lesson, doc.id.as_str()), i)),
                _ => None,
            })
            .collect();
        let mut left: HashMap<ChainId, usize> = HashMap::new();
        let mut sequences: HashMap<(u32, &Path), usize> = HashMap::new();
        let cases = plan
            .cases
            .iter()
            .map(|case| {
                let after = match &case.probe.kind {
                    ProbeKind::Document(doc) => match &doc.body {
                        DocBody::Code(code) => code
                            .continues
                            .as_ref()
                            .and_then(|c| index.get(&(doc.lesson, c.id.as_str())).copied()),
                        _ => None,
                    },
                    _ => None,
                };
                // Only a case that runs holds or uses anything.
                if case.decision != Decision::Run {
                    return Needs {
                        after,
                        hold: None,
                        uses: Vec::new(),
                        sequence: None,
                    };
                }
                let sequence = match &case.probe.kind {
                    ProbeKind::Document(doc) => lesson::sequence_of(doc).map(|file| {
                        let next = sequences.len();
                        *sequences.entry((doc.lesson, file)).or_insert(next)
                    }),
                    _ => None,
                };
                let hold = plan.hold(case);
                if let Some(hold) = hold {
                    *left.entry(hold.chain.clone()).or_default() += 1;
                }
                let uses = match hold {
                    Some(_) => Vec::new(),
                    None => case.probe.services.iter().map(String::as_str).collect(),
                };
                Needs {
                    after,
                    hold,
                    uses,
                    sequence,
                }
            })
            .collect::<Vec<_>>();
        let mut needed: HashMap<String, usize> = HashMap::new();
        for needs in &cases {
            for service in needs.services() {
                *needed.entry(service.to_owned()).or_default() += 1;
            }
        }
        let state = State {
            taken: vec![false; cases.len()],
            left,
            needed,
            in_sequence: vec![0; sequences.len()],
            ..State::default()
        };
        Dispatch {
            order: looked_at(plan, &cases),
            cases,
            state: Mutex::new(state),
            changed: Condvar::new(),
        }
    }

    /// The next case to run, taken: the first waiting one that may start, waited for while
    /// none may; `None` once every case is taken or `go_on` says the run stops.
    pub fn take(&self, go_on: impl Fn() -> bool) -> Option<usize> {
        let mut state = self.lock();
        loop {
            if !go_on() {
                return None;
            }
            let mut waiting = false;
            // The services of the chains waiting to start, before the case looked at.
            let mut reserved: Vec<&str> = Vec::new();
            for &index in &self.order[state.from..] {
                if state.taken[index] {
                    continue;
                }
                waiting = true;
                if self.may_start(index, &state, &reserved) {
                    self.acquire(index, &mut state);
                    self.changed.notify_all();
                    return Some(index);
                }
                if let Some(hold) = self.cases[index].hold {
                    if !state.active.contains(&hold.chain) {
                        reserved.extend(hold.services.iter().map(String::as_str));
                    }
                }
            }
            if !waiting {
                return None;
            }
            state = match self.changed.wait_timeout(state, POLL) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Case `index` finished: the services it used are free again, and after the last step of
    /// a chain, `restore` starts its held services again before any other case may use them.
    /// Gives the services no case left to run needs any more.
    pub fn finish(&self, index: usize, restore: impl FnOnce(&[String])) -> Vec<String> {
        let needs = &self.cases[index];
        let mut state = self.lock();
        let mut unneeded = Vec::new();
        for service in needs.services() {
            if let Some(n) = state.needed.get_mut(service) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.needed.remove(service);
                    unneeded.push(service.to_owned());
                }
            }
        }
        for service in &needs.uses {
            if let Some(n) = state.using.get_mut(*service) {
                *n = n.saturating_sub(1);
            }
        }
        if let Some(sequence) = needs.sequence {
            state.in_sequence[sequence] = state.in_sequence[sequence].saturating_sub(1);
        }
        if let Some(hold) = needs.hold {
            let left = state.left.entry(hold.chain.clone()).or_default();
            *left = left.saturating_sub(1);
            if *left == 0 {
                state.left.remove(&hold.chain);
                // Held while they start again: no case waiting for them may see them down.
                drop(state);
                restore(&hold.services);
                state = self.lock();
                for service in &hold.services {
                    state.held.remove(service);
                }
                for service in &hold.uses {
                    if let Some(n) = state.using.get_mut(service) {
                        *n = n.saturating_sub(1);
                    }
                }
                state.active.remove(&hold.chain);
            }
        }
        drop(state);
        self.changed.notify_all();
        unneeded
    }

    /// Whether case `index` may start now, the services of the chains waiting before it being
    /// `reserved` for them.
    fn may_start(&self, index: usize, state: &State, reserved: &[&str]) -> bool {
        let needs = &self.cases[index];
        if needs.after.is_some_and(|before| !state.taken[before]) {
            return false;
        }
        // Its sequence is being run for another case: taking it would only wait for that.
        if needs.sequence.is_some_and(|s| state.in_sequence[s] > 0) {
            return false;
        }
        if let Some(hold) = needs.hold {
            if state.active.contains(&hold.chain) {
                return true;
            }
            let usable = |service: &String| {
                !state.held.contains_key(service) && !reserved.contains(&&**service)
            };
            let free = |service: &String| {
                usable(service) && state.using.get(service).copied().unwrap_or(0) == 0
            };
            return hold.services.iter().all(free) && hold.uses.iter().all(usable);
        }
        needs
            .uses
            .iter()
            .all(|s| !state.held.contains_key(*s) && !reserved.contains(s))
    }

    fn acquire(&self, index: usize, state: &mut State) {
        state.taken[index] = true;
        while self.order.get(state.from).is_some_and(|&i| state.taken[i]) {
            state.from += 1;
        }
        let needs = &self.cases[index];
        if let Some(hold) = needs.hold {
            if state.active.insert(hold.chain.clone()) {
                for service in &hold.services {
                    state.held.insert(service.clone(), hold.chain.clone());
                }
                for service in &hold.uses {
                    *state.using.entry(service.clone()).or_default() += 1;
                }
            }
        }
        for service in &needs.uses {
            *state.using.entry((*service).to_owned()).or_default() += 1;
        }
        if let Some(sequence) = needs.sequence {
            state.in_sequence[sequence] += 1;
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The order a free worker looks at the cases in: the plan's, except that the notebooks that
/// run, each whole and in its own order, take the places the plan gives notebook cells longest
/// first (most cells the run holds; pytest-xdist's `--dist loadscope` order, which nbval runs
/// under). A notebook of long cells taken last would keep one worker busy after the others end.
fn looked_at(plan: &Plan<'_>, cases: &[Needs<'_>]) -> Vec<usize> {
    let notebook = |index: usize| match &plan.cases[index].probe.kind {
        ProbeKind::Document(doc) if matches!(doc.body, DocBody::Cell(_)) => cases[index].sequence,
        _ => None,
    };
    // Each notebook's cells, notebooks in the plan's order.
    let mut notebooks: Vec<Vec<usize>> = Vec::new();
    let mut place: HashMap<usize, usize> = HashMap::new();
    for index in 0..cases.len() {
        if let Some(sequence) = notebook(index) {
            let at = *place.entry(sequence).or_insert_with(|| {
                notebooks.push(Vec::new());
                notebooks.len() - 1
            });
            notebooks[at].push(index);
        }
    }
    notebooks.sort_by_key(|cells| std::cmp::Reverse(cells.len()));
    let mut longest_first = notebooks.into_iter().flatten();
    (0..cases.len())
        .map(|index| match notebook(index) {
            Some(_) => longest_first.next().unwrap_or(index),
            None => index,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::checkpoint::{Checkpoint, Probe};
    use crate::run::PlannedCase;

    /// Lesson 31's steps: one using the cache, a chain of two stopping it, one more using it.
    fn steps() -> Vec<Probe> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        let services = "[services.cache]\nstart = \"sleep 9\"\n";
        std::fs::write(dir.path().join("lessonprobe.toml"), services).unwrap();
        let course = crate::lesson::Course::open(dir.path(), Path::new(".")).unwrap();
        let run = "Run:\n\n```sh\ntrue\n```\n\n";
        let text = format!("Services: cache\n\n### Answer EX-31-01 [code]\n\n{run}### Answer EX-31-02 [code]\n\nStop service: cache\n\n{run}### Answer EX-31-03 [code]\n\nContinues: EX-31-02\n\n{run}### Answer EX-31-04 [code]\n\n{run}");
        let doc = crate::lesson::parse_free(
            &course.settings,
            31,
            Path::new("31.md"),
            text.as_bytes(),
            dir.path(),
        )
        .unwrap();
        doc.probes
            .into_iter()
            .map(|step| {
                let mut probe = Probe::new(
                    &step.id.clone(),
                    "step",
                    String::new(),
                    ProbeKind::Document(Box::new(step)),
                );
                probe.services = vec!["cache".into()];
                probe
            })
            .collect()
    }

    /// Lesson 31's two pages `a.md` and `b.md`, each of two terminal sessions (one shell each).
    fn two_pages_of_sessions() -> Vec<Probe> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        let course = crate::lesson::Course::open(dir.path(), Path::new(".")).unwrap();
        let text = "# Sessions\n\n```console\n$ echo 1\n1\n```\n\n```console\n$ echo 2\n2\n```\n";
        ["a.md", "b.md"]
            .into_iter()
            .flat_map(|page| {
                let doc = crate::lesson::parse_free(
                    &course.settings,
                    31,
                    Path::new(page),
                    text.as_bytes(),
                    dir.path(),
                )
                .unwrap();
                doc.probes
                    .into_iter()
                    .map(|block| document_probe(block, "block"))
            })
            .collect()
    }

    /// The document probe `doc` as a probe of kind `what`.
    fn document_probe(doc: crate::lesson::DocProbe, what: &str) -> Probe {
        let id = doc.id.clone();
        Probe::new(&id, what, String::new(), ProbeKind::Document(Box::new(doc)))
    }

    /// `probes` as lesson 31's checkpoint, every case run, dispatched to `check`, with a `once`
    /// for `take`: one look at the waiting cases, no waiting.
    fn dispatched(
        probes: Vec<Probe>,
        check: impl FnOnce(&Dispatch<'_>, &dyn Fn() -> Box<dyn Fn() -> bool>),
    ) {
        let checkpoint = Checkpoint {
            lesson: 31,
            title: "dispatch".into(),
            source: "31.md".into(),
            document: None,
            probes,
        };
        let cases: Vec<PlannedCase<'_>> = checkpoint
            .probes
            .iter()
            .map(|probe| PlannedCase {
                checkpoint: &checkpoint,
                probe,
                sql: None,
                decision: Decision::Run,
            })
            .collect();
        let holds = crate::lesson::holds(cases.iter().filter_map(|c| match &c.probe.kind {
            ProbeKind::Document(doc) => Some(doc.as_ref()),
            _ => None,
        }));
        let plan = Plan { cases, holds };
        let once = || -> Box<dyn Fn() -> bool> {
            let looked = std::cell::Cell::new(false);
            Box::new(move || !looked.replace(true))
        };
        check(&Dispatch::new(&plan), &once);
    }

    #[test]
    fn a_free_worker_takes_another_documents_sequence_rather_than_wait_for_one_running() {
        dispatched(two_pages_of_sessions(), |dispatch, once| {
            assert_eq!(dispatch.take(once()), Some(0), "a.md's first session");
            assert_eq!(dispatch.take(once()), Some(2), "b.md's, not a.md's second");
            assert_eq!(dispatch.take(once()), None, "both pages are running");
            dispatch.finish(0, |_| panic!("not a chain"));
            assert_eq!(dispatch.take(once()), Some(1), "a.md's second, run already");
            dispatch.finish(1, |_| panic!("not a chain"));
            dispatch.finish(2, |_| panic!("not a chain"));
            assert_eq!(dispatch.take(once()), Some(3));
            assert_eq!(dispatch.take(once()), None, "every case taken");
        });
    }

    /// Lesson 31's notebooks `short.ipynb` (one code cell) and `long.ipynb` (three).
    fn two_notebooks() -> Vec<Probe> {
        let dir = tempfile::tempdir().unwrap();
        let course = crate::lesson::Course::open(dir.path(), Path::new(".")).unwrap();
        let cell = r#"{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": "x = 1"}"#;
        [("short.ipynb", 1), ("long.ipynb", 3)]
            .into_iter()
            .flat_map(|(name, cells)| {
                let text = format!(
                    r#"{{"cells": [{}], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 4}}"#,
                    vec![cell; cells].join(", ")
                );
                let doc = crate::lesson::notebook_doc::parse(
                    &course.settings,
                    31,
                    Path::new(name),
                    text.as_bytes(),
                )
                .unwrap()
                .unwrap();
                doc.probes
                    .into_iter()
                    .map(|cell| document_probe(cell, "cell"))
            })
            .collect()
    }

    #[test]
    fn the_notebook_with_the_most_cells_is_taken_first() {
        dispatched(two_notebooks(), |dispatch, once| {
            assert_eq!(dispatch.take(once()), Some(1), "long.ipynb's first cell");
            assert_eq!(
                dispatch.take(once()),
                Some(0),
                "short.ipynb's, long.ipynb running"
            );
            assert_eq!(dispatch.take(once()), None, "both notebooks are running");
            dispatch.finish(1, |_| panic!("not a chain"));
            assert_eq!(
                dispatch.take(once()),
                Some(2),
                "long.ipynb's second, run already"
            );
            dispatch.finish(2, |_| panic!("not a chain"));
            assert_eq!(dispatch.take(once()), Some(3));
            assert_eq!(dispatch.take(once()), None, "every case taken");
        });
    }

    #[test]
    fn a_chain_holds_its_service_from_its_first_step_to_its_last_before_later_cases() {
        dispatched(steps(), |dispatch, once| {
            assert_eq!(dispatch.take(once()), Some(0));
            assert_eq!(
                dispatch.take(once()),
                None,
                "the chain waits for the case using it, the last case for the chain"
            );
            dispatch.finish(0, |_| panic!("not a chain"));
            assert_eq!(dispatch.take(once()), Some(1));
            assert_eq!(dispatch.take(once()), Some(2), "the chain's next step");
            assert_eq!(dispatch.take(once()), None, "held by the chain");
            dispatch.finish(1, |_| panic!("not its last step"));
            assert_eq!(dispatch.take(once()), None, "held until its last step");
            let restored = std::cell::RefCell::new(Vec::new());
            dispatch.finish(2, |held| restored.borrow_mut().extend_from_slice(held));
            assert_eq!(restored.into_inner(), ["cache"]);
            assert_eq!(dispatch.take(once()), Some(3));
            assert_eq!(dispatch.take(once()), None, "every case taken");
        });
    }
}
