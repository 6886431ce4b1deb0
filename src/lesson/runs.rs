//! The one way a lesson document's probes run: [`Runs`] takes every document probe of a run
//! and runs each on request — a code exercise or snippet after the step it continues, a
//! session block with its document's other blocks, once — giving one [`DocRun`] each.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::chain::Chains;
use super::doc_run::{DocRun, DocVerdict};
use super::document::{DocBody, DocProbe};
use super::exercise::Conditions;
use super::notebook;
use super::session;
use crate::services::Faults;

/// The document probes of one run and what they share: what each continued step left (see
/// [`Chains`]), and each document's session blocks, run once for all of them. Every method
/// takes `&self`: workers run probes of it at once.
#[derive(Debug, Default)]
pub struct Runs {
    chains: Chains,
    sequences: Sequences,
    /// The run's services, which fault steps act on.
    services: Option<Arc<dyn Faults + Send>>,
}

impl Runs {
    /// For the document probes a run holds (any order; a step before the steps continuing it).
    pub fn new<'a>(probes: impl IntoIterator<Item = &'a DocProbe> + Clone) -> Runs {
        Runs {
            chains: Chains::new(probes.clone()),
            sequences: Sequences::new(probes),
            services: None,
        }
    }

    /// Its code steps' fault steps act on `services`, the run's.
    pub fn with_services(mut self, services: Arc<dyn Faults + Send>) -> Runs {
        self.services = Some(services);
        self
    }

    /// Runs `doc` under `deadline`, after what it waits for, a code step seeing `env` added to
    /// its environment (a declared service's variables); `cancel` stops it.
    pub fn run(
        &self,
        doc: &DocProbe,
        env: &BTreeMap<String, String>,
        deadline: Duration,
        cancel: &Cancel,
    ) -> DocRun {
        let started = Instant::now();
        if let Some(index) = place_in_sequence(doc) {
            return self.sequences.result(doc, index, deadline, cancel);
        }
        let mut done = match &doc.body {
            DocBody::Code(code) => {
                let under = Conditions {
                    env,
                    deadline,
                    cancel,
                    services: self.services.as_deref().map(|s| s as &dyn Faults),
                };
                return self.chains.run(doc, code, under);
            }
            // Run in its sequence, above.
            DocBody::Session(_) => DocRun::not_run("a session block outside its sequence"),
            DocBody::Cell(_) => DocRun::not_run("a notebook cell outside its notebook"),
            DocBody::Uncollected { lines } => {
                let places: Vec<String> = lines
                    .iter()
                    .map(|l| format!("{}:{l}", doc.file.display()))
                    .collect();
                let mut run = DocRun::error(format!(
                    "not collected: {} (bind each with a label, or mark it no-run)",
                    places.join(", ")
                ));
                run.verdict = DocVerdict::Fail;
                run
            }
            DocBody::Prose { .. } => {
                let mut run = DocRun::error("prose exercise: answered in writing".into());
                run.verdict = DocVerdict::Skip;
                run
            }
        };
        done.duration = started.elapsed();
        done
    }
}

/// Where `doc` stands among the blocks of its document that run together, in order, once (one
/// shell and one interpreter for a document's session blocks, one kernel for a notebook's
/// cells), if it is one of them.
fn place_in_sequence(doc: &DocProbe) -> Option<usize> {
    match &doc.body {
        DocBody::Session(session) => Some(session.index),
        DocBody::Cell(cell) => Some(cell.position),
        _ => None,
    }
}

/// The document whose sequence `doc` belongs to (see [`place_in_sequence`]), if any: the
/// probes of one sequence share one process, so nothing may split them (`--partition`).
pub fn sequence_of(doc: &DocProbe) -> Option<&std::path::Path> {
    place_in_sequence(doc).map(|_| doc.file.as_path())
}

/// Runs blocks `0..=upto` of the sequence `doc` belongs to: their results in order.
fn run_sequence(doc: &DocProbe, upto: usize, deadline: Duration, cancel: &Cancel) -> Vec<DocRun> {
    match &doc.body {
        DocBody::Session(session) => {
            session::run_transcript(&session.transcript, upto, deadline, cancel)
        }
        DocBody::Cell(cell) => notebook::run_notebook(&cell.notebook, upto, deadline, cancel),
        _ => Vec::new(),
    }
}

/// Each document's sequence (see [`place_in_sequence`]), run once for every probe of it in the
/// run: from its first block to the last one the run holds (the earlier ones run for their
/// state even when not selected, and only the held ones report).
#[derive(Debug, Default)]
struct Sequences {
    /// By (lesson, document): the last block index the run needs, and the blocks' results.
    runs: Mutex<HashMap<(u32, PathBuf), Arc<Sequence>>>,
}

#[derive(Debug)]
struct Sequence {
    upto: usize,
    results: OnceLock<Vec<DocRun>>,
}

impl Sequences {
    fn new<'a>(probes: impl IntoIterator<Item = &'a DocProbe>) -> Sequences {
        let mut runs: HashMap<(u32, PathBuf), Arc<Sequence>> = HashMap::new();
        for doc in probes {
            let Some(index) = place_in_sequence(doc) else {
                continue;
            };
            let key = (doc.lesson, doc.file.clone());
            let upto = runs.get(&key).map_or(index, |r| r.upto.max(index));
            runs.insert(
                key,
                Arc::new(Sequence {
                    upto,
                    results: OnceLock::new(),
                }),
            );
        }
        Sequences {
            runs: Mutex::new(runs),
        }
    }

    /// The result of block `index` of `doc`'s sequence, running the sequence when no other
    /// probe of it has (the others wait for that run).
    fn result(&self, doc: &DocProbe, index: usize, deadline: Duration, cancel: &Cancel) -> DocRun {
        let key = (doc.lesson, doc.file.clone());
        let run = self.runs.lock().ok().map(|mut runs| {
            Arc::clone(runs.entry(key).or_insert_with(|| {
                Arc::new(Sequence {
                    upto: index,
                    results: OnceLock::new(),
                })
            }))
        });
        let results = match &run {
            Some(run) => run
                .results
                .get_or_init(|| run_sequence(doc, run.upto.max(index), deadline, cancel)),
            None => return not_run(doc, "the session runs' lock is poisoned"),
        };
        results
            .get(index)
            .cloned()
            .unwrap_or_else(|| not_run(doc, "its document's sessions stopped before it"))
    }
}

fn not_run(doc: &DocProbe, why: &str) -> DocRun {
    DocRun::error(format!(
        "{}:{}: not run: {why}",
        doc.file.display(),
        doc.line
    ))
}

/// `probes` (document probes, in document order) one after another, each continuing step
/// after its predecessor; results in their order. A step whose predecessor is not among them
/// is not run.
pub fn run_in_order(
    probes: &[&DocProbe],
    default_timeout: Duration,
    cancel: &Cancel,
) -> Vec<DocRun> {
    let runs = Runs::new(probes.iter().copied());
    probes
        .iter()
        .map(|doc| {
            runs.run(
                doc,
                &BTreeMap::new(),
                doc.timeout().unwrap_or(default_timeout),
                cancel,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SESSIONS: &str = "# Sessions\n\n```console\n$ echo kept > state.txt\n```\n\nText.\n\n```console\n$ cat state.txt\nkept\n```\n\n```console\n$ cat state.txt\nchanged\n```\n";

    /// The document probes of lesson 31 `text`, in a course with an empty project.
    fn parsed(text: &str) -> super::super::LessonDoc {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        let doc =
            super::super::document::parse(&course.settings, 31, Path::new("l.md"), text.as_bytes())
                .unwrap();
        // The run-from folder must outlive the parse for the runs below.
        std::mem::forget(dir);
        doc
    }

    #[test]
    fn a_session_block_runs_after_the_blocks_before_it_once_for_all_held_blocks() {
        let doc = parsed(SESSIONS);
        let blocks: Vec<&DocProbe> = doc.probes.iter().collect();
        assert_eq!(blocks.len(), 3, "{blocks:?}");
        // Only the later blocks are held: the first still runs, for its state.
        let runs = Runs::new(blocks[1..].iter().copied());
        let cancel = Cancel::new();
        let second = runs.run(
            blocks[1],
            &BTreeMap::new(),
            Duration::from_secs(10),
            &cancel,
        );
        let third = runs.run(
            blocks[2],
            &BTreeMap::new(),
            Duration::from_secs(10),
            &cancel,
        );
        crate::lesson::isolation::release_all();
        assert_eq!(second.verdict, DocVerdict::Pass, "{:?}", second.message);
        assert_eq!(third.verdict, DocVerdict::Fail);
        assert!(third.rewrites().is_some(), "{third:?}");
        assert_eq!(second.rewrites(), None);
    }
}
