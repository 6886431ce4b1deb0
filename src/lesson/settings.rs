//! How a course's lessons are written and run: what parsing a lesson document needs of its
//! course (where the course is and how it is shown, the run-from folder, the interpreter, the
//! deadline, the label words, the named redactions); the rule that keeps a path inside it is `crate::course_files`'.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::labels::Labels;
use super::matcher::Redactions;
pub use crate::course_files::{is_inside, show};

#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the course's files are read (a temporary tree when verifying a git revision).
    pub root: PathBuf,
    /// How the root is shown in messages and reports.
    pub shown: PathBuf,
    /// The default run-from folder, relative to the root.
    pub run_from: PathBuf,
    /// Folders (or files) the course declares shared and read-only (`shared` in
    /// lessonprobe.toml), relative to the root: linked into working copies instead of copied.
    pub shared: Vec<PathBuf>,
    /// The interpreter put in place of a leading `python`/`python3` of a run command.
    pub python: String,
    /// The deadline of each document probe, when the course sets one.
    pub timeout: Option<Duration>,
    pub labels: Labels,
    /// Info-string words that mark a fenced block as not meant to run.
    pub no_run: Vec<String>,
    /// Placeholders an expected block may use for output that varies between runs.
    pub redactions: Redactions,
    /// What the course declares it needs of Python (`[environment]`), if it does.
    pub environment: Option<crate::environment::Declared>,
    /// The services the course declares (`[services.NAME]`), by name.
    pub services: std::collections::BTreeMap<String, crate::services::Service>,
    /// How notebooks' stored outputs are used unless a notebook says (`[notebooks] outputs`).
    pub notebook_outputs: super::notebook::Outputs,
    /// The same given on the command line (`--notebook-outputs`): over every notebook's own.
    pub notebook_outputs_given: Option<super::notebook::Outputs>,
    /// The patterns of the course's nbval sanitize file (`[notebooks] sanitize`), applied to
    /// notebooks' stored and produced outputs beside the redactions.
    pub notebook_sanitize: super::notebook::Patterns,
}

impl Settings {
    /// How `relative` (a path inside the course) is shown: `shown/relative` without a
    /// leading `./`.
    pub fn show(&self, relative: &Path) -> PathBuf {
        show(&self.shown, relative)
    }
}
