//! The folders a notebook's kernel works in and imports from: the notebook's folder and the
//! course's run-from folder, both in the isolated copies the other probes use (one copy when
//! one folder holds the other), so whatever the cells write stays out of the course.

use std::path::{Path, PathBuf};

use super::Notebook;
use crate::lesson::isolation::{Checkout, IsolationError, Layout};

/// The copies a notebook runs in, handed back (reset) when dropped.
pub struct Folders {
    /// The kernel's working folder: the notebook's folder in its copy.
    pub cwd: PathBuf,
    /// The run-from folder in its copy, on the kernel's `PYTHONPATH`, when the course has one.
    pub imports: Option<PathBuf>,
    _copies: Vec<Checkout>,
}

impl Folders {
    /// Copies of `notebook`'s folder and of its course's run-from folder.
    pub fn take(notebook: &Notebook) -> Result<Folders, IsolationError> {
        let folder = Layout {
            source: notebook.folder.clone(),
            shared: Vec::new(),
        };
        let Some(project) = &notebook.project else {
            let copy = Checkout::take(&folder, None)?;
            return Ok(Folders::of(vec![copy], Path::new(""), None));
        };
        if let Ok(inside) = notebook.folder.strip_prefix(&project.source) {
            let copy = Checkout::take(project, None)?;
            return Ok(Folders::of(vec![copy], inside, Some(Path::new(""))));
        }
        if let Ok(inside) = project.source.strip_prefix(&notebook.folder) {
            let both = Layout {
                shared: project.shared.iter().map(|s| inside.join(s)).collect(),
                ..folder
            };
            let copy = Checkout::take(&both, None)?;
            return Ok(Folders::of(vec![copy], Path::new(""), Some(inside)));
        }
        let copies = vec![
            Checkout::take(&folder, None)?,
            Checkout::take(project, None)?,
        ];
        Ok(Folders {
            cwd: copies[0].cwd().to_owned(),
            imports: Some(copies[1].cwd().to_owned()),
            _copies: copies,
        })
    }

    /// `cwd` and `imports` (when given) inside the first of `copies`.
    fn of(copies: Vec<Checkout>, cwd: &Path, imports: Option<&Path>) -> Folders {
        let root = copies
            .first()
            .map_or_else(PathBuf::new, |c| c.cwd().to_owned());
        Folders {
            cwd: root.join(cwd),
            imports: imports.map(|i| root.join(i)),
            _copies: copies,
        }
    }
}
