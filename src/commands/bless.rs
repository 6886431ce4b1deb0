//! `lessonprobe bless`: runs a lesson's document probes and rewrites the expected-output
//! blocks of those whose only fault is their output, then prints the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::course::OpenCourse;
use crate::checkpoint::{Catalog, ProbeKind, Selection};
use crate::cli::BlessArgs;
use crate::exit::{Code, Error};
use crate::lesson::{self, Block, CodeProbe, DocBody, DocProbe, DocRun, DocVerdict};

pub fn bless(args: BlessArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let course = OpenCourse::find(&args.course, None)?.ok_or_else(|| {
        Error::Usage("bless needs a course: give --course DIR (the folder with lessons/)".into())
    })?;
    course.attach(&mut catalog, false)?;
    let selection = Selection::new(&catalog, Some(args.lesson), &args.select)?;
    let probes: Vec<(&DocProbe, &CodeProbe)> = selection
        .checkpoints
        .iter()
        .flat_map(|(_, probes)| probes)
        .filter_map(|p| match &p.kind {
            ProbeKind::Document(doc) => match &doc.body {
                DocBody::Code(code) if code.expected.is_some() => {
                    Some((doc.as_ref(), code.as_ref()))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    if probes.is_empty() {
        return Err(Error::Usage(format!(
            "lesson {}'s document has no selected probe with an expected output to bless",
            args.lesson
        )));
    }
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(2, |n| n.get()),
        usize::from,
    );
    let runs = run_all(&probes, jobs, args.timeout);

    // Per lesson file (as read): how it is shown, and its blocks with their new content.
    type Edits<'a> = (PathBuf, Vec<(&'a Block, String)>);
    let mut by_file: BTreeMap<PathBuf, Edits> = BTreeMap::new();
    let mut unblessed = 0;
    for ((doc, code), run) in probes.iter().zip(&runs) {
        match (&run.verdict, &run.blessable, &code.expected) {
            (DocVerdict::Pass, _, _) => {}
            (_, Some(output), Some(block)) => by_file
                .entry(code.source.clone())
                .or_insert_with(|| (doc.file.clone(), Vec::new()))
                .1
                .push((block, output.clone())),
            _ => {
                unblessed += 1;
                println!(
                    "not blessed: {} {}: {}",
                    doc.id,
                    doc.name,
                    run.message.as_deref().unwrap_or("failed")
                );
            }
        }
    }
    let mut changed = 0;
    for (source, (shown, blocks)) in &by_file {
        let text = std::fs::read_to_string(source).map_err(|e| Error::io(source, e))?;
        let edits: Vec<(&Block, &str)> = blocks.iter().map(|(b, o)| (*b, o.as_str())).collect();
        let blessed = lesson::bless(shown, &text, &edits)?;
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
        println!("blessed {changed} expected-output block(s)");
    }
    Ok(if unblessed == 0 {
        Code::Ok
    } else {
        Code::ProbesFailed
    })
}

/// Runs the probes, at most `jobs` at once, results in the probes' order.
fn run_all(
    probes: &[(&DocProbe, &CodeProbe)],
    jobs: usize,
    default_timeout: std::time::Duration,
) -> Vec<DocRun> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<DocRun>>> = Mutex::new(vec![None; probes.len()]);
    let cancel = lessonprobe_probes::Cancel::new();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, probes.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some((doc, code)) = probes.get(i) else {
                    break;
                };
                let deadline = code.timeout.unwrap_or(default_timeout);
                let run = lesson::run(doc, code, deadline, &cancel);
                if let Ok(mut slots) = results.lock() {
                    slots[i] = Some(run);
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
