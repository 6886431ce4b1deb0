//! The last-failed state behind `--last-failed`: which probes failed or errored in the previous
//! run of a course and selection, kept in `.lessonprobe/last-failed.json` of the folder the run
//! starts in (beside `reports/`, whether or not it has `--course`), in a folder git ignores.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checkpoint::Selection;
use crate::report::{ReportError, Reporter};
use crate::run::{RunEvent, Verdict};

/// The folder of the state, in the folder a run starts in.
pub const FOLDER: &str = ".lessonprobe";
const FILE: &str = "last-failed.json";

/// A probe as the state names it: its lesson and id (every backend of it together).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProbeRef {
    pub lesson: u32,
    pub id: String,
}

/// What the file holds: per selection key, the probes that failed in its last run.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    selections: BTreeMap<String, BTreeSet<ProbeRef>>,
}

/// The state of one selection, read from `dir/.lessonprobe/`.
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    key: String,
    state: State,
}

/// What `--last-failed` made of a selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastFailed {
    /// No run of this selection is recorded: everything runs.
    NoPreviousRun { selected: usize },
    /// The previous run had no failure among the selected probes: nothing runs.
    NoneFailed,
    /// Only the probes that failed run.
    Rerun { failed: usize, selected: usize },
}

impl std::fmt::Display for LastFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LastFailed::NoPreviousRun { selected } => write!(
                f,
                "--last-failed: no earlier run of this course and selection is recorded; running all {selected} probes"
            ),
            LastFailed::NoneFailed => write!(
                f,
                "--last-failed: no probe failed in the previous run of this course and selection; nothing to run (run without --last-failed to run them all)"
            ),
            LastFailed::Rerun { failed, selected } => write!(
                f,
                "--last-failed: running the {failed} of {selected} probes that failed in the previous run"
            ),
        }
    }
}

/// Why the state could not be kept.
#[derive(Debug, thiserror::Error)]
#[error("{}: cannot keep the failures for --last-failed: {source}", path.display())]
pub struct HistoryError {
    path: PathBuf,
    source: std::io::Error,
}

impl History {
    /// The state of selection `key` kept under `dir`. A missing file is no state; one that
    /// cannot be read or parsed is treated the same, with a warning, since it is only a cache.
    pub fn open(dir: &Path, key: String) -> History {
        let path = dir.join(FOLDER).join(FILE);
        let state = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                errln!(
                    "lessonprobe: warning: {}: not a last-failed state ({e}); starting a new one",
                    path.display()
                );
                State::default()
            }),
            Err(_) => State::default(),
        };
        History { path, key, state }
    }

    /// The probes that failed or errored in the previous run of this key, as (lesson, id).
    pub fn failed(&self) -> BTreeSet<(u32, String)> {
        self.state
            .selections
            .get(&self.key)
            .into_iter()
            .flatten()
            .map(|p| (p.lesson, p.id.clone()))
            .collect()
    }

    /// Keeps in `selection` only the probes that failed in the previous run of this key.
    pub fn keep_failed(&self, selection: &mut Selection<'_>) -> LastFailed {
        let selected = selection.checkpoints.iter().map(|(_, p)| p.len()).sum();
        let Some(failed) = self.state.selections.get(&self.key) else {
            return LastFailed::NoPreviousRun { selected };
        };
        for (checkpoint, probes) in &mut selection.checkpoints {
            probes.retain(|p| {
                failed.contains(&ProbeRef {
                    lesson: checkpoint.lesson,
                    id: p.id.clone(),
                })
            });
        }
        selection.checkpoints.retain(|(_, p)| !p.is_empty());
        match selection.checkpoints.iter().map(|(_, p)| p.len()).sum() {
            0 => LastFailed::NoneFailed,
            failed => LastFailed::Rerun { failed, selected },
        }
    }

    /// Records a run of this key: a probe that ran and did not fail leaves the state, one that
    /// failed or errored joins it, one that did not run (NOT RUN) keeps what it had.
    fn record(&mut self, ran: &BTreeSet<ProbeRef>, failed: &BTreeSet<ProbeRef>) {
        let entry = self.state.selections.entry(self.key.clone()).or_default();
        entry.retain(|p| !ran.contains(p) || failed.contains(p));
        entry.extend(failed.iter().cloned());
    }

    /// Writes the state whole, in a folder with a `.gitignore` of `*`.
    fn save(&self) -> Result<(), HistoryError> {
        let error = |source| HistoryError {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(error)?;
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "*\n").map_err(error)?;
        }
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| error(std::io::Error::other(e)))?;
        // The mode std::fs::write gives a new file (before the umask), not a temp file's 0600.
        let mut file = tempfile::Builder::new()
            .prefix(".last-failed-")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .tempfile_in(dir)
            .map_err(error)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(error)?;
        file.persist(&self.path).map_err(|e| error(e.error))?;
        Ok(())
    }
}

/// Records a run in the history as it ends; an interrupted run is not recorded.
pub struct Recorder {
    history: History,
    ran: BTreeSet<ProbeRef>,
    failed: BTreeSet<ProbeRef>,
    interrupted: bool,
}

impl Recorder {
    pub fn new(history: History) -> Recorder {
        Recorder {
            history,
            ran: BTreeSet::new(),
            failed: BTreeSet::new(),
            interrupted: false,
        }
    }
}

impl Reporter for Recorder {
    fn event(&mut self, event: &RunEvent<'_>) {
        match event {
            RunEvent::CaseFinished { outcomes, .. } => {
                for o in outcomes.iter() {
                    let probe = ProbeRef {
                        lesson: o.lesson,
                        id: o.id.clone(),
                    };
                    if o.verdict.failed() {
                        self.failed.insert(probe.clone());
                    }
                    if o.verdict != Verdict::NotRun {
                        self.ran.insert(probe);
                    }
                }
            }
            RunEvent::RunInterrupted { .. } => self.interrupted = true,
            _ => {}
        }
    }

    /// Keeps the state; a state that cannot be written is a warning, not a failed run.
    fn finish(&mut self) -> Result<(), ReportError> {
        if self.interrupted {
            return Ok(());
        }
        self.history.record(&self.ran, &self.failed);
        if let Err(e) = self.history.save() {
            errln!("lessonprobe: warning: {e}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(ids: &[&str]) -> BTreeSet<ProbeRef> {
        ids.iter()
            .map(|id| ProbeRef {
                lesson: 90,
                id: (*id).to_owned(),
            })
            .collect()
    }

    #[test]
    fn passes_leave_failures_join_and_probes_not_run_keep_their_state_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut history = History::open(dir.path(), "k".into());
        history.record(&refs(&["a", "b", "c"]), &refs(&["a", "b"]));
        history.save().unwrap();
        let mut again = History::open(dir.path(), "k".into());
        assert_eq!(again.state.selections["k"], refs(&["a", "b"]));
        // b passes now, c fails, a was not run.
        again.record(&refs(&["b", "c"]), &refs(&["c"]));
        assert_eq!(again.state.selections["k"], refs(&["a", "c"]));
        again.save().unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".lessonprobe/.gitignore")).unwrap(),
            "*\n"
        );
        let other = History::open(dir.path(), "other".into());
        assert!(!other.state.selections.contains_key("other"));
        assert!(other.state.selections.contains_key("k"));
    }
}
