//! Lesson documents joined to the catalog: a document's probes join its lesson's checkpoint (a
//! lesson with a document and no manifest is a checkpoint of its own), and a builtin that
//! mirrors an exercise (`doc = "EX-30-01"`) is checked against that exercise's expected output.

use std::path::PathBuf;

use super::manifest::{Checkpoint, Probe, ProbeKind};
use super::Catalog;
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
            let what = match &code.expected {
                Some(e) => format!("prints the expected output at {}:{}", doc.file.display(), e.line),
                None => "exits 0".into(),
            };
            (
                format!("{}: `{command}` run from {} {what}", doc.title, code.run_from_label),
                code.expected.as_ref().map(|e| e.content.trim_end().to_owned()),
                code.timeout,
            )
        }
        DocBody::Prose { .. } => (format!("{}: answered in writing", doc.title), None, None),
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
    lesson::match_output(&expected.content, expect)
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
