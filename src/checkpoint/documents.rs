//! Lesson documents joined to the catalog: a document's probes join its lesson's checkpoint (a
//! lesson with a document and no manifest is a checkpoint of its own), and a builtin that
//! mirrors an exercise (`doc = "EX-30-01"`) is checked against that exercise's expected output
//! (with its redactions and order rule). A selected step brings the steps it continues.

use std::path::PathBuf;

use super::manifest::{Checkpoint, Probe, ProbeKind};
use super::Catalog;
use crate::lesson::session::SessionBody;
use crate::lesson::{self, DocBody, DocProbe, LessonDoc};

impl Catalog {
    /// `(lesson, document)` for every manifest that names its lesson file.
    pub fn named_documents(&self) -> Vec<(u32, PathBuf)> {
        self.checkpoints
            .iter()
            .filter_map(|c| c.document.clone().map(|d| (c.lesson, d)))
            .collect()
    }

    /// Adds every document's probes to the catalog. Runnable blocks that nothing collects are
    /// a failing `lint` probe of their lesson under `strict`, else warnings returned here.
    pub fn add_documents(&mut self, docs: Vec<LessonDoc>, strict: bool) -> Vec<Uncollected> {
        let mut warnings = Vec::new();
        for mut doc in docs {
            if !doc.uncollected.is_empty() {
                if strict {
                    doc.probes.push(DocProbe {
                        id: "lint".into(),
                        name: doc
                            .relative
                            .file_name()
                            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                        lesson: doc.lesson,
                        file: doc.file.clone(),
                        line: doc.uncollected[0],
                        title: "every runnable block is collected".into(),
                        body: DocBody::Uncollected {
                            lines: doc.uncollected.clone(),
                        },
                    });
                } else {
                    warnings.extend(doc.uncollected.iter().map(|&line| Uncollected {
                        file: doc.file.clone(),
                        line,
                    }));
                }
            }
            let probes: Vec<Probe> = doc.probes.into_iter().map(probe_of).collect();
            match self.checkpoints.iter_mut().find(|c| c.lesson == doc.lesson) {
                Some(checkpoint) => {
                    checkpoint.document = Some(doc.relative);
                    for probe in &mut checkpoint.probes {
                        probe.drift = drift(probe, &probes, &doc.file);
                    }
                    checkpoint.probes.extend(probes);
                }
                None if probes.is_empty() => {}
                None => self.checkpoints.push(Checkpoint {
                    lesson: doc.lesson,
                    title: doc.title,
                    source: doc.file,
                    document: Some(doc.relative),
                    probes,
                }),
            }
        }
        self.checkpoints.sort_by_key(|c| c.lesson);
        warnings
    }
}

impl Checkpoint {
    /// `selected` (probes of this checkpoint) with every document step they continue,
    /// directly or not, in the checkpoint's order.
    pub fn with_predecessors<'a>(&'a self, selected: &[&'a Probe]) -> Vec<&'a Probe> {
        let docs: Vec<&DocProbe> = self.probes.iter().filter_map(document).collect();
        let wanted: Vec<&DocProbe> = selected.iter().filter_map(|p| document(p)).collect();
        let needed = lesson::with_predecessors(&docs, &wanted);
        self.probes
            .iter()
            .filter(|p| {
                selected.iter().any(|s| std::ptr::eq(*s, *p))
                    || document(p).is_some_and(|d| needed.iter().any(|n| std::ptr::eq(*n, d)))
            })
            .collect()
    }
}

fn document(probe: &Probe) -> Option<&DocProbe> {
    match &probe.kind {
        ProbeKind::Document(doc) => Some(doc),
        _ => None,
    }
}

/// A runnable block of a lesson document that no label binds: a lint warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uncollected {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Uncollected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not collected: {}:{} (a runnable block no label binds; mark it no-run if it is not meant to run)",
            self.file.display(),
            self.line
        )
    }
}

fn probe_of(doc: DocProbe) -> Probe {
    let (claim, expect, timeout) = match &doc.body {
        DocBody::Code(code) => {
            let command = code.command.content.trim();
            let at = |line: usize| format!("{}:{line}", doc.file.display());
            let prints = match (&code.expected, &code.stderr) {
                (Some(o), Some(e)) => Some(format!(
                    "prints the expected output at {} and the expected stderr at {}",
                    at(o.line),
                    at(e.line)
                )),
                (Some(o), None) => Some(format!("prints the expected output at {}", at(o.line))),
                (None, Some(e)) => Some(format!("prints the expected stderr at {}", at(e.line))),
                (None, None) => None,
            };
            let what = match (&code.exit_code, prints) {
                (Some(e), Some(p)) => format!("exits {} and {p}", e.code),
                (Some(e), None) => format!("exits {}", e.code),
                (None, Some(p)) => p,
                (None, None) => "exits 0".into(),
            };
            let mut before = String::new();
            if let Some(c) = &code.continues {
                before.push_str(&format!(" after {} (continues it)", c.id));
            }
            if let Some(s) = &code.setup {
                before.push_str(&format!(" after the hidden setup at {}", at(s.line)));
            }
            (
                format!("{}: `{command}` run from {}{before} {what}", doc.title, code.run_from_label),
                code.expected.as_ref().map(|e| e.content.trim_end().to_owned()),
                code.timeout,
            )
        }
        DocBody::Prose { .. } => (format!("{}: answered in writing", doc.title), None, None),
        DocBody::Session(session) => {
            let block = session.block();
            let what = match &block.body {
                SessionBody::Terminal(commands) => format!(
                    "{} as it shows, in the document's shell after the blocks before it",
                    match commands.len() {
                        1 => "its command prints and exits".to_owned(),
                        n => format!("each of its {n} commands prints and exits"),
                    }
                ),
                SessionBody::Python { .. } => "its examples print what it shows (Python's doctest), in the document's namespace after the blocks before it".to_owned(),
                SessionBody::PythonCode { .. } => "it runs without an exception, in the namespace of the document's Python sessions".to_owned(),
            };
            (
                format!("{} {}:{}: {what}", block.body.name(), doc.file.display(), doc.line),
                None,
                session.transcript.timeout,
            )
        }
        DocBody::Cell(cell) => (
            format!(
                "notebook cell {} {}:{}: {}",
                cell.cell().index,
                doc.file.display(),
                doc.line,
                cell.claim()
            ),
            None,
            doc.timeout(),
        ),
        DocBody::Uncollected { .. } => (
            format!(
                "every runnable block of {} is bound to a probe, in a prose exercise, or marked no-run",
                doc.file.display()
            ),
            None,
            None,
        ),
    };
    Probe {
        id: doc.id.clone(),
        name: doc.name.clone(),
        claim,
        backends: Vec::new(),
        timeout,
        expect,
        line: Some(doc.line),
        doc: None,
        drift: None,
        retries: None,
        services: match &doc.body {
            DocBody::Code(code) => code.services.clone(),
            _ => Vec::new(),
        },
        kind: ProbeKind::Document(Box::new(doc)),
    }
}

/// Why a builtin's `expect` disagrees with the document probe it names, if it does.
fn drift(probe: &Probe, documents: &[Probe], file: &std::path::Path) -> Option<String> {
    let id = probe.doc.as_deref().filter(|d| *d != "*")?;
    if matches!(probe.kind, ProbeKind::Document(_)) {
        return None;
    }
    let Some(mirrored) = documents.iter().find(|p| p.id == id) else {
        return Some(format!(
            "manifest names doc = {id:?} but {} has no exercise or snippet {id}",
            file.display()
        ));
    };
    let ProbeKind::Document(doc) = &mirrored.kind else {
        return None;
    };
    let (DocBody::Code(code), Some(expect)) = (&doc.body, &probe.expect) else {
        return None;
    };
    let expected = code.expected.as_ref()?;
    let rules = lesson::Rules {
        redactions: &code.redactions,
        unordered: expected.unordered,
    };
    lesson::match_output_with(&expected.content, expect, rules)
        .err()
        .map(|_| {
            format!(
                "manifest expects {expect:?} but {}:{} says {:?}",
                doc.file.display(),
                expected.line,
                expected.content.trim_end()
            )
        })
}
