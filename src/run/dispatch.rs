//! Which case a free worker takes next: the first waiting one that may start now. A lesson step
//! waits until the step it continues is taken; a chain of steps that faults a service holds it
//! from its first step to its last, so no other case needing it starts meanwhile, and its first
//! step waits until no other case uses it, while the cases after it in the plan that need it
//! wait for the chain (it is not starved, and runs where the plan has it). A chain takes
//! everything it holds and uses at its first step, so two chains never wait on each other. A
//! worker never blocks on a held service
//! (the chain's next step may be waiting for a free worker): it takes another case, or waits for
//! one to end.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::plan::{Decision, Plan};
use crate::checkpoint::ProbeKind;
use crate::lesson::{ChainId, DocBody, Hold};

/// How often a worker with nothing to take looks again at whether the run goes on.
const POLL: Duration = Duration::from_millis(50);

/// The cases of a plan, handed to workers one at a time.
pub(super) struct Dispatch<'p> {
    /// What each case holds and uses, by its index in the plan.
    cases: Vec<Needs<'p>>,
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
}

#[derive(Default)]
struct State {
    taken: Vec<bool>,
    /// The chain holding each service.
    held: HashMap<String, ChainId>,
    /// How many running cases and holding chains use each service without holding it.
    using: HashMap<String, usize>,
    /// The holding chains whose first step was taken and whose last has not finished.
    active: HashSet<ChainId>,
    /// The cases of each holding chain not finished yet.
    left: HashMap<ChainId, usize>,
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
                    };
                }
                let hold = plan.hold(case);
                if let Some(hold) = hold {
                    *left.entry(hold.chain.clone()).or_default() += 1;
                }
                let uses = match hold {
                    Some(_) => Vec::new(),
                    None => case.probe.services.iter().map(String::as_str).collect(),
                };
                Needs { after, hold, uses }
            })
            .collect::<Vec<_>>();
        let state = State {
            taken: vec![false; cases.len()],
            left,
            ..State::default()
        };
        Dispatch {
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
            for index in 0..self.cases.len() {
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
    pub fn finish(&self, index: usize, restore: impl FnOnce(&[String])) {
        let needs = &self.cases[index];
        let mut state = self.lock();
        for service in &needs.uses {
            if let Some(n) = state.using.get_mut(*service) {
                *n = n.saturating_sub(1);
            }
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
    }

    /// Whether case `index` may start now, the services of the chains waiting before it being
    /// `reserved` for them.
    fn may_start(&self, index: usize, state: &State, reserved: &[&str]) -> bool {
        let needs = &self.cases[index];
        if needs.after.is_some_and(|before| !state.taken[before]) {
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
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
