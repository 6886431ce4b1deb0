//! Session transcripts: the terminal sessions (```` ```console ````) and Python sessions
//! (```` ```pycon ````, `>>>` blocks) a document shows, each block one probe, all blocks of a
//! document run in order in one shell and one interpreter.

mod parse;
mod python;
mod run;
mod terminal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::isolation::Layout;
use super::matcher::Redactions;

pub(crate) use parse::PYTHON_CODE;
pub use parse::{kind_of, terminal as terminal_commands, without_directive_options, Command, Kind};
pub(crate) use python::{Interpreter, Stop};
pub use run::run as run_transcript;

/// One session block of a document, or a plain Python block run in its sessions' namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionBlock {
    /// The line of its opening fence (of its first line for an indented block).
    pub line: usize,
    /// Its probe id: `FILE:LINE` (the file's name), or the `id=NAME` of its info string.
    pub id: String,
    pub body: SessionBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionBody {
    /// `$ ` commands run by the document's shell.
    Terminal(Vec<Command>),
    /// `>>>` examples run by the interpreter's own doctest; `offset` is the document line
    /// before the text's first line (doctest's `lineno`); `flags` are doctest option flags
    /// (`+ELLIPSIS`) a MyST `:options:` line gives the whole block.
    Python {
        text: String,
        offset: usize,
        flags: Vec<String>,
    },
    /// A plain ```` ```python ```` block executed in the sessions' namespace.
    PythonCode { text: String, offset: usize },
}

impl SessionBody {
    /// The probe's name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            SessionBody::Terminal(_) => "terminal session",
            SessionBody::Python { .. } => "python session",
            SessionBody::PythonCode { .. } => "python block",
        }
    }
}

/// Every session block of one document, run together, in order, in one folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The document as shown in messages.
    pub file: PathBuf,
    pub blocks: Vec<SessionBlock>,
    /// The folder copied to run in (a lesson's run-from folder and what of it is shared);
    /// `None`: an empty folder.
    pub run_from: Option<Layout>,
    /// The document's own folder, given to the commands as `TESTDIR`.
    pub testdir: PathBuf,
    /// The interpreter of Python sessions, and of `python`/`python3` in terminal sessions.
    pub python: String,
    pub redactions: Redactions,
    pub timeout: Option<Duration>,
}

/// A session block as a document probe: its document's transcript and its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionProbe {
    pub transcript: Arc<Transcript>,
    pub index: usize,
}

impl SessionProbe {
    pub fn block(&self) -> &SessionBlock {
        &self.transcript.blocks[self.index]
    }
}
