//! Lesson documents as probes: a course's Markdown lessons parsed into document probes
//! (exercises and snippets with their saved files, hidden setup, run command, expected exit code,
//! stdout and stderr, and the steps they continue; session blocks), run through [`Runs`] in a
//! working copy of the course project, linted, and blessed.

mod bless;
mod chain;
mod course;
mod doc_run;
mod document;
mod exercise;
pub mod isolation;
mod labels;
mod matcher;
pub mod notebook;
pub mod notebook_doc;
mod revision;
mod runs;
pub mod session;
mod settings;

use std::path::PathBuf;

use crate::diagnostics::Diagnostic;

pub use bless::{bless, write_atomically, Blessed, Rewrite};
pub use chain::{holds, with_predecessors, ChainId, Hold};
pub use course::{Course, CONFIG_FILE};
pub use doc_run::{DocRun, DocVerdict};
pub use document::{
    parse_free, Block, CodeProbe, Continues, DocBody, DocProbe, ExitCode, FaultStep, LessonDoc,
    SavedFile, Setup,
};
pub use isolation::Checkout;
pub use labels::{Label, ServiceAction};
pub use matcher::{check as match_output, check_with as match_output_with, Mismatch};
pub use matcher::{BadRedaction, Redactions, Rules};
pub use revision::{changed_files, Snapshot};
pub use runs::{run_in_order, sequence_of, Runs};
pub use settings::{is_inside, show as show_path, Settings};

/// Why a course or one of its lessons cannot be used. Everything but `Io` is the author's to
/// fix and stops the run before anything runs.
#[derive(Debug, thiserror::Error)]
pub enum CourseError {
    #[error("course folder {} does not exist", .0.display())]
    Missing(PathBuf),
    /// The course's `lessonprobe.toml` at a place.
    #[error(transparent)]
    Config(#[from] Diagnostic),
    #[error("{}:{line}: {message}", path.display())]
    Lesson {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{}: {message}", path.display())]
    Document { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    Io { path: PathBuf, message: String },
    #[error("{0}")]
    Revision(String),
}

impl CourseError {
    fn io(path: &std::path::Path, err: impl std::fmt::Display) -> Self {
        CourseError::Io {
            path: path.to_owned(),
            message: err.to_string(),
        }
    }
}
