//! `lessonprobe bless`: runs a lesson's document probes (after the steps they continue) and its
//! session blocks (after the blocks before them), rewrites the expected stdout and stderr blocks
//! and exit codes, and the sessions' expected lines, of those whose only fault is these, then
//! prints the diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::course::OpenCourse;
use crate::checkpoint::{Catalog, ProbeKind, Selection};
use crate::cli::BlessArgs;
use crate::exit::{Code, Error};
use crate::lesson::session::{self, BlockRun, SessionBody, SessionProbe};
use crate::lesson::{self, CodeProbe, DocBody, DocProbe, DocRun, DocVerdict, Rewrite};

pub fn bless(args: BlessArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let course = OpenCourse::find(&args.course, None)?.ok_or_else(|| {
        Error::Usage("bless needs a course: give --course DIR (the folder with lessons/)".into())
    })?;
    course.attach(&mut catalog, false)?;
    let selection = Selection::new(&catalog, Some(args.lesson), &args.select)?;
    // The probes to bless, and every step they continue, run first.
    let mut wanted: Vec<&DocProbe> = Vec::new();
    let mut probes: Vec<(&DocProbe, &CodeProbe)> = Vec::new();
    let mut sessions: Vec<(&DocProbe, &SessionProbe)> = Vec::new();
    for (checkpoint, selected) in &selection.checkpoints {
        sessions.extend(
            documents(selected)
                .into_iter()
                .filter_map(|d| match &d.body {
                    DocBody::Session(s)
                        if !matches!(s.block().body, SessionBody::PythonCode { .. }) =>
                    {
                        Some((d, s))
                    }
                    _ => None,
                }),
        );
        let blessable: Vec<&DocProbe> = documents(selected)
            .into_iter()
            .filter(|d| {
                code_of(d).is_some_and(|c| {
                    c.expected.is_some() || c.stderr.is_some() || c.exit_code.is_some()
                })
            })
            .collect();
        let all: Vec<&crate::checkpoint::Probe> = checkpoint.probes.iter().collect();
        let steps = lesson::with_predecessors(&documents(&all), &blessable);
        probes.extend(steps.into_iter().filter_map(|d| Some((d, code_of(d)?))));
        wanted.extend(blessable);
    }
    if wanted.is_empty() && sessions.is_empty() {
        return Err(Error::Usage(format!(
            "lesson {}'s document has no selected probe with an expected output to bless",
            args.lesson
        )));
    }
    let jobs = super::jobs(args.jobs);
    let runs = run_all(&probes, jobs, args.timeout);
    let session_runs = run_sessions(&sessions, args.timeout);

    let mut found = Found::default();
    for ((doc, code), run) in probes.iter().zip(&runs) {
        if wanted.iter().any(|w| std::ptr::eq(*w, *doc)) {
            let rewrites = run.blessable.as_ref();
            found.take(
                doc,
                &code.source,
                &run.verdict,
                rewrites,
                run.message.as_deref(),
            );
        }
    }
    for ((doc, session), run) in sessions.iter().zip(&session_runs) {
        let transcript = &session.transcript;
        let source = transcript
            .testdir
            .join(transcript.file.file_name().unwrap_or_default());
        // A session's rewrites stand only where it failed, not where it errored.
        let rewrites = run
            .blessable
            .as_ref()
            .filter(|_| run.verdict == DocVerdict::Fail);
        found.take(doc, &source, &run.verdict, rewrites, run.message.as_deref());
    }
    let Found { by_file, unblessed } = found;
    let mut changed = 0;
    for (source, (shown, blocks)) in &by_file {
        let text = std::fs::read_to_string(source).map_err(|e| Error::io(source, e))?;
        let blessed = lesson::bless(shown, &text, blocks)?;
        if blessed.diff.is_empty() {
            continue;
        }
        lesson::write_atomically(source, &blessed.text)
            .map_err(|e| Error::io(source, format!("cannot write the blessed lesson: {e}")))?;
        print!("{}", blessed.diff);
        changed += blocks.len();
    }
    if changed == 0 && unblessed == 0 {
        println!(
            "nothing to bless: every selected probe of lesson {} matches its expected output",
            args.lesson
        );
    } else if changed > 0 {
        println!("blessed {changed} expected-output block(s) and exit code(s)");
    }
    Ok(if unblessed == 0 {
        Code::Ok
    } else {
        Code::ProbesFailed
    })
}

/// What the runs give bless: per lesson file (as read), how it is shown and its rewrites; and
/// how many probes failed without one.
#[derive(Default)]
struct Found {
    by_file: BTreeMap<PathBuf, (PathBuf, Vec<Rewrite>)>,
    unblessed: usize,
}

impl Found {
    /// A probe of `doc` whose run ended with `verdict`: nothing when it passed, its `rewrites`
    /// of `source` when it has them, else a line saying it is not blessed and why.
    fn take(
        &mut self,
        doc: &DocProbe,
        source: &Path,
        verdict: &DocVerdict,
        rewrites: Option<&Vec<Rewrite>>,
        message: Option<&str>,
    ) {
        match (verdict, rewrites) {
            (DocVerdict::Pass, _) => {}
            (_, Some(rewrites)) => self
                .by_file
                .entry(source.to_owned())
                .or_insert_with(|| (doc.file.clone(), Vec::new()))
                .1
                .extend(rewrites.iter().cloned()),
            _ => {
                self.unblessed += 1;
                println!(
                    "not blessed: {} {}: {}",
                    doc.id,
                    doc.name,
                    message.unwrap_or("failed")
                );
            }
        }
    }
}

fn code_of(doc: &DocProbe) -> Option<&CodeProbe> {
    match &doc.body {
        DocBody::Code(code) => Some(code.as_ref()),
        _ => None,
    }
}

fn documents<'a>(probes: &[&'a crate::checkpoint::Probe]) -> Vec<&'a DocProbe> {
    probes
        .iter()
        .filter_map(|p| match &p.kind {
            ProbeKind::Document(doc) => Some(doc.as_ref()),
            _ => None,
        })
        .collect()
}

/// Runs the probes, at most `jobs` chains at once, each chain's steps in order; results in the
/// probes' order.
fn run_all(
    probes: &[(&DocProbe, &CodeProbe)],
    jobs: usize,
    default_timeout: std::time::Duration,
) -> Vec<DocRun> {
    let groups = lesson::chain_groups(probes);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<DocRun>>> = Mutex::new(vec![None; probes.len()]);
    let cancel = lessonprobe_probes::Cancel::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, groups.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(group) = groups.get(i) else {
                    break;
                };
                let steps: Vec<_> = group.iter().map(|&k| probes[k]).collect();
                let runs = lesson::run_in_order(&steps, default_timeout, &cancel);
                if let Ok(mut slots) = results.lock() {
                    for (&k, run) in group.iter().zip(runs) {
                        slots[k] = Some(run);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| DocRun::not_run("the probe's thread ended early")))
        .collect()
}

/// Runs the documents of the selected session blocks, each once, from its first block to the
/// last selected one (the blocks before a block make its state); results in `sessions`' order.
fn run_sessions(
    sessions: &[(&DocProbe, &SessionProbe)],
    default_timeout: std::time::Duration,
) -> Vec<BlockRun> {
    let cancel = lessonprobe_probes::Cancel::new();
    let mut done: Vec<(*const session::Transcript, Vec<BlockRun>)> = Vec::new();
    sessions
        .iter()
        .map(|(_, s)| {
            let key = std::sync::Arc::as_ptr(&s.transcript);
            if !done.iter().any(|(k, _)| *k == key) {
                let upto = sessions
                    .iter()
                    .filter(|(_, o)| std::sync::Arc::ptr_eq(&o.transcript, &s.transcript))
                    .map(|(_, o)| o.index)
                    .max()
                    .unwrap_or(s.index);
                let timeout = s.transcript.timeout.unwrap_or(default_timeout);
                let runs = session::run_transcript(&s.transcript, upto, timeout, &cancel);
                done.push((key, runs));
            }
            done.iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, runs)| runs.get(s.index).cloned())
                .unwrap_or_else(|| BlockRun {
                    verdict: DocVerdict::Error,
                    message: Some("its document's sessions stopped before it".into()),
                    details: None,
                    output: String::new(),
                    duration: std::time::Duration::ZERO,
                    blessable: None,
                })
        })
        .collect()
}
