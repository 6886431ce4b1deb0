//! `lessonprobe list`: checkpoints and their probes — id, name, kind, builtin, where each runs
//! and is written, its claim and expected output — as text, one JSON document, or one JSON
//! object per checkpoint and line.

use serde::Serialize;

use crate::checkpoint::{Catalog, Checkpoint, Probe, ProbeKind, Selection};
use crate::cli::ListArgs;
use crate::exit::{Code, Error};
use crate::report::Format;

pub fn list(args: ListArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    if let Some(course) = super::course::OpenCourse::find(&args.course, None)? {
        course.attach(&mut catalog, false)?;
    }
    let selection = Selection::new(&catalog, args.lesson, &[])?;
    let listed: Vec<Listed> = selection
        .checkpoints
        .iter()
        .map(|(checkpoint, probes)| Listed::of(checkpoint, probes))
        .collect();
    let text = match args.format {
        Format::Human => human(&listed),
        Format::Json => {
            let doc = Document {
                checkpoints: &listed,
            };
            let mut text = serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::Operation(format!("cannot render the list as JSON: {e}")))?;
            text.push('\n');
            text
        }
        Format::Ndjson => {
            let mut text = String::new();
            for checkpoint in &listed {
                text.push_str(&serde_json::to_string(checkpoint).map_err(|e| {
                    Error::Operation(format!("cannot render the list as JSON: {e}"))
                })?);
                text.push('\n');
            }
            text
        }
    };
    out!("{text}");
    Ok(Code::Ok)
}

#[derive(Serialize)]
struct Document<'a> {
    checkpoints: &'a [Listed],
}

/// One checkpoint as listed.
#[derive(Serialize)]
struct Listed {
    lesson: u32,
    title: String,
    source: String,
    probes: Vec<ListedProbe>,
}

/// One probe as listed: what `lessonprobe list` shows and `--format json` writes.
#[derive(Serialize)]
struct ListedProbe {
    id: String,
    name: String,
    kind: &'static str,
    /// The registered name of a builtin probe.
    builtin: Option<String>,
    /// Where it runs: its SQL backends, `in process`, `local command`, `remote host`, a lesson
    /// document, or nothing for prose.
    runs_on: Vec<String>,
    /// Where it is written: the manifest or lesson file, and its line.
    file: String,
    line: Option<usize>,
    claim: String,
    expect: Option<String>,
    timeout_seconds: Option<f64>,
    /// The program and arguments of a command probe.
    argv: Option<Vec<String>>,
    /// The test selector of a remote probe.
    selector: Option<String>,
}

impl Listed {
    fn of(checkpoint: &Checkpoint, probes: &[&Probe]) -> Listed {
        Listed {
            lesson: checkpoint.lesson,
            title: checkpoint.title.clone(),
            source: checkpoint.source.display().to_string(),
            probes: probes
                .iter()
                .map(|p| ListedProbe::of(checkpoint, p))
                .collect(),
        }
    }
}

impl ListedProbe {
    fn of(checkpoint: &Checkpoint, probe: &Probe) -> ListedProbe {
        let (builtin, argv, selector) = match &probe.kind {
            ProbeKind::Builtin { name, .. } => (Some(name.clone()), None, None),
            ProbeKind::Command { argv, .. } => (None, Some(argv.clone()), None),
            ProbeKind::Remote { selector, .. } => (None, None, Some(selector.clone())),
            _ => (None, None, None),
        };
        let runs_on = match &probe.kind {
            ProbeKind::Prose { .. } => Vec::new(),
            ProbeKind::Remote { .. } => vec!["remote host".to_owned()],
            ProbeKind::Command { .. } => vec!["local command".to_owned()],
            ProbeKind::Document(_) => vec!["lesson document".to_owned()],
            ProbeKind::Builtin { .. } if probe.backends.is_empty() => {
                vec!["in process".to_owned()]
            }
            ProbeKind::Builtin { .. } => probe
                .backends
                .iter()
                .map(|b| b.label().to_owned())
                .collect(),
        };
        let file = match &probe.kind {
            ProbeKind::Document(doc) => doc.file.display().to_string(),
            _ => checkpoint.source.display().to_string(),
        };
        ListedProbe {
            id: probe.id.clone(),
            name: probe.name.clone(),
            kind: probe.kind.label(),
            builtin,
            runs_on,
            file,
            line: probe.line,
            claim: probe.claim.clone(),
            expect: probe.expect.clone(),
            timeout_seconds: probe.timeout.map(|t| t.as_secs_f64()),
            argv,
            selector,
        }
    }
}

/// Each checkpoint's heading, then per probe a line of id and name, a line of how and where
/// it runs, its claim and its expected output.
fn human(listed: &[Listed]) -> String {
    let mut out = String::new();
    for checkpoint in listed {
        out.push_str(&format!(
            "lesson {}: {} ({})\n",
            checkpoint.lesson, checkpoint.title, checkpoint.source
        ));
        for p in &checkpoint.probes {
            out.push_str(&format!("  {} {}\n", p.id, p.name));
            let mut how = p.kind.to_owned();
            if let Some(builtin) = &p.builtin {
                how.push_str(&format!(" {builtin}"));
            }
            if let Some(argv) = &p.argv {
                how.push_str(&format!(" {}", argv.join(" ")));
            }
            if let Some(selector) = &p.selector {
                how.push_str(&format!(" {selector}"));
            }
            if p.kind == "builtin" {
                match p.runs_on.as_slice() {
                    [only] if only == "in process" => how.push_str(" in process"),
                    backends => how.push_str(&format!(" on {}", backends.join(", "))),
                }
            }
            let at = match p.line {
                Some(line) => format!("{}:{line}", p.file),
                None => p.file.clone(),
            };
            out.push_str(&format!("      {how} ({at})\n"));
            out.push_str(&indented("claim:  ", &p.claim));
            if let Some(expect) = &p.expect {
                out.push_str(&indented("expect: ", expect));
            }
        }
    }
    out
}

/// `text` after `label`, its further lines aligned under the first.
fn indented(label: &str, text: &str) -> String {
    let pad = " ".repeat(6 + label.len());
    let mut lines = text.lines();
    let mut out = format!("      {label}{}\n", lines.next().unwrap_or(""));
    for line in lines {
        out.push_str(&format!("{pad}{line}\n"));
    }
    out
}
