//! Jupyter notebooks as lesson documents: an `.ipynb` file (or its MyST Markdown form) parsed
//! into one probe per code cell, all cells of a notebook run in order in one real Jupyter kernel
//! (nbclient, through the embedded `driver.py`), each judged as nbval judges it.

mod bless;
mod compare;
mod folders;
mod kernel;
mod myst;
mod parse;
mod run;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use compare::{OutputRedactions, Patterns};
pub use myst::{is_myst, read as read_myst};
#[cfg(test)]
pub(crate) use parse::TEST_NOTEBOOK;
pub use parse::{is_notebook, read as read_ipynb, Own, Read};
pub use run::run as run_notebook;

/// How a notebook's stored outputs are used: compared (nbval's default), or only where a cell
/// asks (`nbval-check-output`; nbval's `--nbval-lax`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outputs {
    #[default]
    Compared,
    RunOnly,
}

impl Outputs {
    pub fn as_str(self) -> &'static str {
        match self {
            Outputs::Compared => "compared",
            Outputs::RunOnly => "run-only",
        }
    }
}

impl std::str::FromStr for Outputs {
    type Err = String;

    fn from_str(s: &str) -> Result<Outputs, String> {
        match s {
            "compared" => Ok(Outputs::Compared),
            "run-only" => Ok(Outputs::RunOnly),
            other => Err(format!(
                "notebook outputs {other:?} is neither \"compared\" nor \"run-only\""
            )),
        }
    }
}

/// One notebook: its code cells and how they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notebook {
    /// The notebook as shown in messages.
    pub file: PathBuf,
    /// The notebook as read (bless rewrites it).
    pub source: PathBuf,
    /// The folder holding it (absolute), copied to run in (the kernel's working folder is the
    /// copy).
    pub folder: PathBuf,
    /// The course's run-from folder (absolute) with its shared paths, when it exists: copied
    /// as the other probes' is, the copy on the kernel's `PYTHONPATH`, so a course notebook
    /// uses the course's own code as its Markdown lessons do and writes nothing into it.
    pub project: Option<crate::lesson::isolation::Layout>,
    /// The kernel its `kernelspec` names (`python3` when it names none).
    pub kernel: String,
    /// The interpreter that runs the driver (and so finds the kernel): the course's.
    pub python: String,
    /// Its code cells, in order.
    pub cells: Vec<Cell>,
    /// The course's nbval sanitize patterns and redactions, applied to stored and produced
    /// outputs alike.
    pub redactions: OutputRedactions,
    /// Each cell's limit unless its own metadata sets one: the notebook's metadata, else the
    /// course's `timeout`.
    pub timeout: Option<Duration>,
    /// A bound on the whole notebook (its metadata's `lessonprobe.notebook_timeout`).
    pub notebook_timeout: Option<Duration>,
    pub outputs: Outputs,
}

/// A code cell of a notebook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Its index in the notebook's `cells` (Markdown cells counted), 0-based.
    pub index: usize,
    /// The `.ipynb` line of its first source line.
    pub line: usize,
    /// Its nbformat `id`, where the notebook has them (4.5).
    pub id: Option<String>,
    pub source: String,
    /// Its stored outputs, multi-line strings joined (as nbformat reads them).
    pub outputs: Vec<serde_json::Value>,
    /// Whether it was run when stored (`execution_count` set): an unrun cell's outputs are
    /// not compared.
    pub executed: bool,
    pub markers: Markers,
    /// Its own limit (`lessonprobe.timeout` of its metadata).
    pub timeout: Option<Duration>,
    /// Where its stored outputs are written in the `.ipynb` file (bless rewrites them there).
    pub stored_at: Option<StoredAt>,
}

/// The bytes of a cell's `outputs` value in its `.ipynb` file, and the indentation of the line
/// it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAt {
    pub range: std::ops::Range<usize>,
    pub indent: String,
}

/// nbval's markers of a cell: tags (`nbval-skip`) or comment lines (`# NBVAL_SKIP`), a
/// comment winning over a tag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Markers {
    pub skip: bool,
    /// Whether its outputs are compared, when a marker says (`nbval-check-output`,
    /// `nbval-ignore-output`).
    pub check: Option<bool>,
    /// It must raise (`raises-exception`, `nbval-raises-exception`).
    pub raises: bool,
}

/// A notebook code cell as a document probe: its notebook and its place among the code cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellProbe {
    pub notebook: Arc<Notebook>,
    /// Its position among the notebook's code cells (its place in the kernel's sequence).
    pub position: usize,
}

impl CellProbe {
    pub fn cell(&self) -> &Cell {
        &self.notebook.cells[self.position]
    }

    /// What it claims, as nbval would check it.
    pub fn claim(&self) -> &'static str {
        let cell = self.cell();
        let compared = cell
            .markers
            .check
            .unwrap_or(self.notebook.outputs == Outputs::Compared);
        match (cell.markers.skip, cell.markers.raises) {
            (true, _) => "marked nbval-skip: not run",
            _ if compared && cell.executed && !cell.outputs.is_empty() => {
                "it runs in the notebook's kernel after the cells before it and shows the outputs the notebook stores (as nbval compares them)"
            }
            (false, true) => "it runs in the notebook's kernel after the cells before it (it may raise)",
            (false, false) => "it runs in the notebook's kernel after the cells before it without an exception",
        }
    }
}
