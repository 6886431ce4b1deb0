//! An `.ipynb` file (nbformat 4.0–4.5) read into a [`Notebook`] and one document probe per code
//! cell: serde types that follow the schema, each cell's first source line found in the JSON
//! text, nbval's markers read from its tags and comment lines.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Cell, CellProbe, Markers, Notebook, StoredAt};
use crate::diagnostics::Diagnostic;
use crate::lesson::document::{DocBody, DocProbe, LessonDoc};
use crate::lesson::settings::Settings;
use crate::lesson::CourseError;

/// The notebook as nbformat 4 writes it; what lessonprobe does not read is left to serde.
#[derive(Deserialize)]
struct RawNotebook {
    nbformat: u64,
    nbformat_minor: u64,
    #[serde(default)]
    metadata: Map<String, Value>,
    cells: Vec<RawCell>,
}

#[derive(Deserialize)]
struct RawCell {
    cell_type: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    metadata: Map<String, Value>,
    source: MultiLine,
    #[serde(default)]
    outputs: Vec<Value>,
    #[serde(default)]
    execution_count: Option<u64>,
}

/// nbformat's multi-line string: one string, or a list of lines to join.
#[derive(Deserialize)]
#[serde(untagged)]
enum MultiLine {
    One(String),
    Lines(Vec<String>),
}

impl MultiLine {
    fn joined(self) -> String {
        match self {
            MultiLine::One(s) => s,
            MultiLine::Lines(lines) => lines.concat(),
        }
    }
}

/// What a notebook form gives, before it becomes probes: its cells and what its metadata says.
pub(super) struct Read {
    /// Its first level-1 heading.
    pub title: Option<String>,
    /// The kernel its `kernelspec` names.
    pub kernel: Option<String>,
    /// Its `lessonprobe` metadata.
    pub own: Option<Value>,
    pub cells: Vec<Cell>,
}

/// The cells and metadata of the `.ipynb` text `text` (the file `file`).
pub(super) fn read(file: &Path, text: &str) -> Result<Read, CourseError> {
    let raw: RawNotebook = serde_json::from_str(text).map_err(|e| {
        let message = e.to_string();
        // serde_json ends its message with the place, which the diagnostic gives first.
        let message = match message.rfind(" at line ") {
            Some(at) => message[..at].to_owned(),
            None => message,
        };
        Diagnostic {
            path: file.to_owned(),
            line: e.line().max(1),
            column: e.column().max(1),
            message: format!("not a Jupyter notebook: {message}"),
        }
    })?;
    let at = |line: usize, message: String| CourseError::Lesson {
        path: file.to_owned(),
        line,
        message,
    };
    if raw.nbformat != 4 {
        return Err(at(
            1,
            format!(
                "nbformat {}.{} is not supported (nbformat 4.0 to 4.5)",
                raw.nbformat, raw.nbformat_minor
            ),
        ));
    }
    let places = places(text);
    let mut cells = Vec::new();
    let mut title = None;
    for (index, cell) in raw.cells.into_iter().enumerate() {
        let place = places.get(index).cloned().unwrap_or_default();
        let line = place.line.max(1);
        let source = cell.source.joined();
        if cell.cell_type == "markdown" && title.is_none() {
            title = heading(&source);
        }
        if cell.cell_type != "code" {
            continue;
        }
        let timeout = Own(cell.metadata.get("lessonprobe"))
            .duration("timeout")
            .map_err(|e| at(line, format!("cell {index}: {e}")))?;
        cells.push(Cell {
            index,
            line,
            id: cell.id,
            markers: markers(&cell.metadata, &source),
            outputs: cell.outputs.into_iter().map(joined_output).collect(),
            source,
            executed: cell.execution_count.is_some(),
            timeout,
            stored_at: place.outputs.map(|range| StoredAt {
                indent: indent_at(text, range.start),
                range,
            }),
        });
    }
    Ok(Read {
        title,
        kernel: raw
            .metadata
            .get("kernelspec")
            .and_then(|k| k.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        own: raw.metadata.get("lessonprobe").cloned(),
        cells,
    })
}

/// The white space that starts the line holding byte `at` of `text`.
fn indent_at(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..at]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The first level-1 heading of Markdown `text`.
pub(super) fn heading(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_owned())
}

/// A notebook form `read` from the file at `relative` (shown as `file`) as lesson `lesson`.
pub(super) fn into_doc(
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
    let folder = course
        .root
        .join(relative)
        .parent()
        .map_or_else(|| course.root.clone(), Path::to_owned);
    let notebook = Arc::new(Notebook {
        file: file.clone(),
        source: course.root.join(relative),
        folder,
        // Absolute: the kernel runs in a copy elsewhere.
        project: std::path::absolute(course.root.join(&course.run_from))
            .unwrap_or_else(|_| course.root.join(&course.run_from)),
        kernel: read.kernel.unwrap_or_else(|| "python3".to_owned()),
        python: course.python.clone(),
        cells: read.cells,
        redactions: course.redactions.clone(),
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

/// A notebook's or cell's `lessonprobe` metadata.
struct Own<'a>(Option<&'a Value>);

impl Own<'_> {
    fn text(&self, key: &str) -> Option<&str> {
        self.0?.get(key)?.as_str()
    }

    /// A duration: seconds as a number, or a duration as text (`"30s"`).
    fn duration(&self, key: &str) -> Result<Option<Duration>, String> {
        let Some(value) = self.0.and_then(|m| m.get(key)) else {
            return Ok(None);
        };
        let bad = || format!("lessonprobe.{key} {value} is not a duration (seconds, or \"30s\")");
        match value {
            Value::Number(n) => n
                .as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(|s| Some(Duration::from_secs_f64(s)))
                .ok_or_else(bad),
            Value::String(s) => crate::config::duration::parse(s)
                .map(Some)
                .map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// nbval's markers: the cell's tags, then its comment lines (which win).
pub(super) fn markers(metadata: &Map<String, Value>, source: &str) -> Markers {
    let mut markers = Markers::default();
    let tags = metadata.get("tags").and_then(Value::as_array);
    for tag in tags.into_iter().flatten().filter_map(Value::as_str) {
        mark(&mut markers, tag);
    }
    for line in source.lines() {
        let Some(comment) = line.trim().strip_prefix('#') else {
            continue;
        };
        let comment = comment.trim_start_matches('#').trim();
        let tag = comment.to_ascii_lowercase().replace('_', "-");
        if comment.chars().all(|c| c.is_ascii_uppercase() || c == '_') && tag != "raises-exception"
        {
            mark(&mut markers, &tag);
        }
    }
    markers
}

fn mark(markers: &mut Markers, tag: &str) {
    match tag {
        "nbval-ignore-output" | "pytest-validate-ignore-output" => markers.check = Some(false),
        "nbval-check-output" => markers.check = Some(true),
        "nbval-raises-exception" | "raises-exception" => markers.raises = true,
        "nbval-skip" => markers.skip = true,
        _ => {}
    }
}

/// An output as nbformat reads it: its `text` and each string MIME value joined when stored
/// as a list of lines (JSON MIME values stay as they are).
fn joined_output(mut output: Value) -> Value {
    if let Some(text) = output.get_mut("text") {
        join(text);
    }
    if let Some(Value::Object(data)) = output.get_mut("data") {
        for (mime, value) in data.iter_mut() {
            if !mime.ends_with("json") {
                join(value);
            }
        }
    }
    output
}

fn join(value: &mut Value) {
    if let Value::Array(items) = value {
        if items.iter().all(Value::is_string) {
            let text: String = items.iter().filter_map(Value::as_str).collect();
            *value = Value::String(text);
        }
    }
}

/// Where a cell is in the `.ipynb` text.
#[derive(Debug, Clone, Default)]
struct Place {
    /// The line of its first source line.
    line: usize,
    /// The bytes of its `outputs` value (`[` to `]`), where it has one.
    outputs: Option<std::ops::Range<usize>>,
}

/// Each cell's [`Place`], in the order of `cells` (its line that of its `source` key's value
/// when the source is empty). The text is valid JSON: serde read it.
fn places(text: &str) -> Vec<Place> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    let mut found = Vec::new();
    scan.object(|scan, key| {
        if key != b"cells" {
            return scan.value();
        }
        scan.array(|scan| {
            let mut line = None;
            let mut outputs = None;
            scan.object(|scan, key| {
                if key == b"outputs" {
                    let start = scan.at;
                    scan.value();
                    outputs = Some(start..scan.at);
                    return;
                }
                if key != b"source" {
                    return scan.value();
                }
                let start = scan.at;
                if scan.peek() == Some(b'[') {
                    scan.at += 1;
                    scan.space();
                    line = Some(scan.line(if scan.peek() == Some(b'"') {
                        scan.at
                    } else {
                        start
                    }));
                    scan.at = start;
                } else {
                    line = Some(scan.line(start));
                }
                scan.value()
            });
            found.push(Place {
                line: line.unwrap_or(1),
                outputs,
            });
        })
    });
    found
}

/// A walk over JSON text that keeps only places: enough to find where values start.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn line(&self, at: usize) -> usize {
        1 + self.bytes[..at.min(self.bytes.len())]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            self.at += 1;
        }
    }

    /// Skips a string at the cursor: its raw contents.
    fn string(&mut self) -> &'a [u8] {
        self.at += 1;
        let start = self.at;
        while let Some(b) = self.peek() {
            match b {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return &self.bytes[start..self.at - 1];
                }
                _ => self.at += 1,
            }
        }
        &self.bytes[start..]
    }

    /// Skips any value at the cursor (after white space).
    fn value(&mut self) {
        self.space();
        match self.peek() {
            Some(b'{') => self.object(|scan, _| scan.value()),
            Some(b'[') => self.array(Scan::value),
            Some(b'"') => {
                self.string();
            }
            Some(_) => {
                while !matches!(
                    self.peek(),
                    None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n')
                ) {
                    self.at += 1;
                }
            }
            None => {}
        }
    }

    /// An object at the cursor: `member` is called at each value, with its key.
    fn object(&mut self, mut member: impl FnMut(&mut Scan<'a>, &[u8])) {
        self.space();
        if self.peek() != Some(b'{') {
            return self.value();
        }
        self.at += 1;
        loop {
            self.space();
            match self.peek() {
                Some(b'"') => {
                    let key = self.string();
                    self.space();
                    self.at += 1; // the colon
                    self.space();
                    member(self, key);
                    self.space();
                    if self.peek() == Some(b',') {
                        self.at += 1;
                    }
                }
                Some(b'}') => {
                    self.at += 1;
                    return;
                }
                _ => return,
            }
        }
    }

    /// An array at the cursor: `item` is called at each element.
    fn array(&mut self, mut item: impl FnMut(&mut Scan<'a>)) {
        self.space();
        if self.peek() != Some(b'[') {
            return self.value();
        }
        self.at += 1;
        loop {
            self.space();
            match self.peek() {
                Some(b']') => {
                    self.at += 1;
                    return;
                }
                None => return,
                Some(_) => {
                    let before = self.at;
                    item(self);
                    self.space();
                    if self.peek() == Some(b',') {
                        self.at += 1;
                    } else if self.at == before {
                        return;
                    }
                }
            }
        }
    }
}

/// Whether `path` names a notebook.
pub fn is_notebook(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "ipynb")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Explore\n",
    "Text."
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "first",
   "metadata": {"tags": ["nbval-ignore-output"]},
   "outputs": [
    {"name": "stdout", "output_type": "stream", "text": ["a\n", "b\n"]}
   ],
   "source": [
    "print('a')\n",
    "print('b')"
   ]
  },
  {"cell_type": "code", "execution_count": null, "metadata": {"lessonprobe": {"timeout": 2}}, "outputs": [], "source": "# NBVAL_SKIP\nx = 1"},
  {"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [],
   "source": []}
 ],
 "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    fn parse(
        course: &Settings,
        lesson: u32,
        relative: &Path,
        bytes: &[u8],
    ) -> Result<LessonDoc, CourseError> {
        super::super::parse(course, lesson, relative, bytes).expect("a notebook")
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
        let doc = parse(&course(), 35, Path::new("35-explore.ipynb"), NB.as_bytes()).unwrap();
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
        let broken = NB.replace("\"execution_count\": 1,", "\"execution_count\": 1");
        let e = parse(&course(), 35, Path::new("nb.ipynb"), broken.as_bytes()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("nb.ipynb:15:4: not a Jupyter notebook: expected `,`"),
            "{e}"
        );
        let e = parse(&course(), 35, Path::new("nb.ipynb"), b"{\"cells\": 3}").unwrap_err();
        assert!(e.to_string().starts_with("nb.ipynb:1:"), "{e}");
        let v3 = NB.replace("\"nbformat\": 4", "\"nbformat\": 3");
        let e = parse(&course(), 35, Path::new("nb.ipynb"), v3.as_bytes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "nb.ipynb:1: nbformat 3.5 is not supported (nbformat 4.0 to 4.5)"
        );
    }

    #[test]
    fn minified_notebooks_put_every_cell_on_line_one() {
        let one: String = NB.lines().map(str::trim).collect();
        let lines: Vec<usize> = places(&one).iter().map(|p| p.line).collect();
        assert_eq!(lines, [1, 1, 1, 1]);
    }
}
