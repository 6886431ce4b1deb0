//! A notebook (an `.ipynb` file, or Markdown in MyST-NB's form) as a lesson document: its code
//! cells, read by `notebook`, made the document's probes with the course's settings applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::document::{decode, shared_under, DocBody, DocProbe, LessonDoc};
use super::isolation::Layout;
use super::notebook::{self, CellProbe, Notebook, Own, Read};
use super::settings::Settings;
use super::CourseError;

/// The notebook at `relative` (inside the course) whose bytes are `bytes`, parsed into lesson
/// `lesson` when it is one: an `.ipynb` file, or Markdown in MyST-NB's form; `None` for any
/// other document.
pub fn parse(
    course: &Settings,
    lesson: u32,
    relative: &std::path::Path,
    bytes: &[u8],
) -> Option<Result<LessonDoc, CourseError>> {
    type Reader = fn(&std::path::Path, &str) -> Result<Read, CourseError>;
    let read: Reader = if notebook::is_notebook(relative) {
        notebook::read_ipynb
    } else if std::str::from_utf8(bytes).is_ok_and(notebook::is_myst) {
        notebook::read_myst
    } else {
        return None;
    };
    Some(decode(course, relative, bytes).and_then(|(file, text)| {
        let cells = read(&file, &text)?;
        into_doc(course, lesson, relative, file, cells)
    }))
}

/// A notebook form `read` from the file at `relative` (shown as `file`) as lesson `lesson`.
fn into_doc(
    course: &Settings,
    lesson: u32,
    relative: &Path,
    file: std::path::PathBuf,
    read: Read,
) -> Result<LessonDoc, CourseError> {
    let at = |message: String| CourseError::Lesson {
        path: file.clone(),
        line: 1,
        message,
    };
    let own = Own(read.own.as_ref());
    // The command line, then the notebook's own metadata, then the course.
    let outputs = match (course.notebook_outputs_given, own.text("outputs")) {
        (Some(given), _) => given,
        (None, Some(value)) => value.parse().map_err(at)?,
        (None, None) => course.notebook_outputs,
    };
    // Absolute: the kernel runs in copies elsewhere, found by where they are in the course.
    let absolute = |path: PathBuf| std::path::absolute(&path).unwrap_or(path);
    let folder = course
        .root
        .join(relative)
        .parent()
        .map_or_else(|| course.root.clone(), Path::to_owned);
    let project = course.root.join(&course.run_from);
    let notebook = Arc::new(Notebook {
        file: file.clone(),
        source: course.root.join(relative),
        folder: absolute(folder),
        project: project.is_dir().then(|| Layout {
            source: absolute(project),
            shared: shared_under(&course.shared, &course.run_from),
        }),
        kernel: read.kernel.unwrap_or_else(|| "python3".to_owned()),
        python: course.python.clone(),
        cells: read.cells,
        redactions: notebook::OutputRedactions {
            nbval: course.notebook_sanitize.clone(),
            course: course.redactions.clone(),
        },
        timeout: match own.duration("timeout").map_err(at)? {
            Some(t) => Some(t),
            None => course.timeout,
        },
        notebook_timeout: own.duration("notebook_timeout").map_err(at)?,
        outputs,
    });
    let name = file_name(relative);
    let probes = (0..notebook.cells.len())
        .map(|position| {
            let cell = &notebook.cells[position];
            let which = cell.id.clone().unwrap_or_else(|| cell.index.to_string());
            DocProbe {
                id: format!("{name}#{which}"),
                name: "notebook cell".to_owned(),
                lesson,
                file: file.clone(),
                line: cell.line,
                title: format!(
                    "notebook cell {} at {}:{}",
                    cell.index,
                    file.display(),
                    cell.line
                ),
                body: DocBody::Cell(CellProbe {
                    notebook: Arc::clone(&notebook),
                    position,
                }),
            }
        })
        .collect();
    Ok(LessonDoc {
        lesson,
        title: read.title.unwrap_or_else(|| name.clone()),
        file,
        relative: relative.to_owned(),
        probes,
        uncollected: Vec::new(),
    })
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lesson::notebook::{Cell, TEST_NOTEBOOK};

    fn parsed(
        course: &Settings,
        lesson: u32,
        relative: &Path,
        bytes: &[u8],
    ) -> Result<LessonDoc, CourseError> {
        super::parse(course, lesson, relative, bytes).expect("a notebook")
    }

    fn course() -> Settings {
        let dir = tempfile::tempdir().unwrap();
        let course = crate::lesson::Course::open(dir.path(), Path::new(".")).unwrap();
        course.settings
    }

    fn cells(doc: &LessonDoc) -> Vec<&Cell> {
        doc.probes
            .iter()
            .map(|p| match &p.body {
                DocBody::Cell(c) => c.cell(),
                _ => panic!("{p:?}"),
            })
            .collect()
    }

    #[test]
    fn code_cells_become_probes_with_their_index_line_id_outputs_and_markers() {
        let doc = parsed(
            &course(),
            35,
            Path::new("35-explore.ipynb"),
            TEST_NOTEBOOK.as_bytes(),
        )
        .unwrap();
        assert_eq!(doc.title, "Explore");
        let ids: Vec<&str> = doc.probes.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "35-explore.ipynb#first",
                "35-explore.ipynb#2",
                "35-explore.ipynb#3"
            ]
        );
        let cells = cells(&doc);
        assert_eq!(
            cells.iter().map(|c| (c.index, c.line)).collect::<Vec<_>>(),
            [(1, 21), (2, 25), (3, 27)]
        );
        assert_eq!(cells[0].source, "print('a')\nprint('b')");
        assert_eq!(cells[0].outputs[0]["text"], "a\nb\n");
        assert!(cells[0].executed && !cells[1].executed);
        assert_eq!(cells[0].markers.check, Some(false));
        assert!(cells[1].markers.skip);
        assert_eq!(cells[1].timeout, Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_malformed_notebook_is_named_at_its_line_and_column() {
        let broken = TEST_NOTEBOOK.replace("\"execution_count\": 1,", "\"execution_count\": 1");
        let e = parsed(&course(), 35, Path::new("nb.ipynb"), broken.as_bytes()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("nb.ipynb:15:4: not a Jupyter notebook: expected `,`"),
            "{e}"
        );
        let e = parsed(&course(), 35, Path::new("nb.ipynb"), b"{\"cells\": 3}").unwrap_err();
        assert!(e.to_string().starts_with("nb.ipynb:1:"), "{e}");
        let v3 = TEST_NOTEBOOK.replace("\"nbformat\": 4", "\"nbformat\": 3");
        let e = parsed(&course(), 35, Path::new("nb.ipynb"), v3.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "nb.ipynb:1: nbformat 3.5 is not supported (nbformat 4.0 to 4.5)"
        );
    }
}
