//! `lessonprobe bless`: a run of a lesson's document probes with an expected form (and the
//! steps they continue) and its session blocks, through the runner as `--lesson N` runs them
//! (the preflight, `--jobs`, Ctrl-C, the terminal report); then the expected stdout and stderr
//! blocks, exit codes and sessions' expected lines of those whose only fault is these are
//! rewritten, and the diff printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::course::OpenCourse;
use super::run::{interruptible, new_run_id};
use crate::checkpoint::{Catalog, Probe, ProbeKind, Selection};
use crate::cli::BlessArgs;
use crate::exit::{Code, Error};
use crate::lesson::session::SessionBody;
use crate::lesson::{self, DocBody, DocProbe, Rewrite};
use crate::report::terminal::Terminal;
use crate::report::Reporter;
use crate::run::{self, FailurePolicy, Plan, RemoteFlag, RemoteHost, RunConfig, RunEvent, Verdict};

pub fn bless(args: BlessArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let mut course = OpenCourse::find(&args.course, None)?.ok_or_else(|| {
        Error::Usage("bless needs a course: give --course DIR (the folder with lessons/)".into())
    })?;
    // Without --python, a course that declares its environment runs in it, as a run does.
    course.run_in_environment(args.course.python.is_some())?;
    course.attach(&mut catalog, false)?;
    let mut selection = Selection::new(&catalog, Some(args.lesson), &args.select)?;
    // Only probes bless can rewrite; the runner adds the steps they continue.
    for (_, probes) in &mut selection.checkpoints {
        probes.retain(|p| blessable(p));
    }
    if selection.checkpoints.iter().all(|(_, p)| p.is_empty()) {
        return Err(Error::Usage(format!(
            "lesson {}'s document has no selected probe with an expected output to bless",
            args.lesson
        )));
    }
    let wanted: BTreeSet<(u32, String)> = selection
        .checkpoints
        .iter()
        .flat_map(|(c, probes)| probes.iter().map(|p| (c.lesson, p.id.clone())))
        .collect();
    // Document probes need no remote host.
    let remote = RemoteHost::Disabled {
        flag: RemoteFlag::from_env(),
        host: None,
    };
    let services = std::sync::Arc::new(crate::services::Running::in_folder(std::path::Path::new(
        ".",
    )));
    let preflight = super::run::preflight::checks(
        Some(&course.course),
        &[],
        &ticketflow::KafkaTarget::Embedded,
        &remote,
        &services,
    );
    let config = RunConfig {
        jobs: super::jobs(args.jobs),
        default_timeout: args.timeout,
        course_root: course.root().to_owned(),
        sql: Vec::new(),
        kafka: ticketflow::KafkaTarget::Embedded,
        remote,
        failure: FailurePolicy::default(),
        preflight,
        services,
        first: Default::default(),
    };
    let interrupt = interruptible()?;
    let plan = Plan::new(&selection, &config);
    let mut terminal = Terminal::stdout(false, None);
    let mut found = Found {
        wanted,
        ..Found::default()
    };
    let summary = run::execute(&plan, &config, &new_run_id(), &interrupt, |event| {
        terminal.event(event);
        found.take(event);
    });
    terminal.finish()?;
    if summary.interrupted.is_some() {
        return Ok(Code::of_run(&summary, false));
    }
    found.write(args.lesson)
}

/// Whether bless runs `probe`: a code exercise or snippet with an expected form, or a terminal
/// or Python session block (not a plain Python block, which only makes state), or a notebook
/// cell stored in an `.ipynb` file.
fn blessable(probe: &Probe) -> bool {
    let ProbeKind::Document(doc) = &probe.kind else {
        return false;
    };
    match &doc.body {
        DocBody::Code(c) => c.expected.is_some() || c.stderr.is_some() || c.exit_code.is_some(),
        DocBody::Session(s) => !matches!(s.block().body, SessionBody::PythonCode { .. }),
        // A notebook cell's stored outputs.
        DocBody::Cell(c) => c.cell().stored_at.is_some(),
        _ => false,
    }
}

/// What the run gives bless: per lesson file (as read), how it is shown and its rewrites; and
/// the probes that failed without one.
#[derive(Default)]
struct Found {
    /// (lesson, id) of the probes to bless; the steps they continue only run.
    wanted: BTreeSet<(u32, String)>,
    by_file: BTreeMap<PathBuf, (PathBuf, Vec<Rewrite>)>,
    /// A line each, saying why it is not blessed.
    unblessed: Vec<String>,
}

impl Found {
    /// The rewrites of each finished case bless wants, or why it has none.
    fn take(&mut self, event: &RunEvent<'_>) {
        let RunEvent::CaseFinished { case, outcomes, .. } = event else {
            return;
        };
        // A failed preflight check is no document probe: the terminal shows its ERROR, and
        // the probes that needed it are NOT RUN, each not blessed.
        let ProbeKind::Document(doc) = &case.probe.kind else {
            return;
        };
        if !self
            .wanted
            .contains(&(case.checkpoint.lesson, case.probe.id.clone()))
        {
            return;
        }
        for outcome in outcomes.iter() {
            match (outcome.verdict, &outcome.rewrites) {
                (Verdict::Pass | Verdict::Skip | Verdict::Pending, _) => {}
                (Verdict::Fail, Some(rewrites)) => self.keep(doc, rewrites),
                _ => self.unblessed.push(format!(
                    "not blessed: {} {}: {}",
                    outcome.id,
                    outcome.name,
                    outcome.message.as_deref().unwrap_or("failed")
                )),
            }
        }
    }

    fn keep(&mut self, doc: &DocProbe, rewrites: &[Rewrite]) {
        let Some(source) = doc.source() else { return };
        self.by_file
            .entry(source)
            .or_insert_with(|| (doc.file.clone(), Vec::new()))
            .1
            .extend(rewrites.iter().cloned());
    }

    /// Writes the rewrites and prints their diff; the exit code says whether every failing
    /// probe was blessed.
    fn write(self, lesson: u32) -> Result<Code, Error> {
        for line in &self.unblessed {
            outln!("{line}");
        }
        let mut changed = 0;
        for (source, (shown, blocks)) in &self.by_file {
            let text = std::fs::read_to_string(source).map_err(|e| Error::io(source, e))?;
            let blessed = lesson::bless(shown, &text, blocks)?;
            if blessed.diff.is_empty() {
                continue;
            }
            lesson::write_atomically(source, &blessed.text)
                .map_err(|e| Error::io(source, format!("cannot write the blessed lesson: {e}")))?;
            out!("{}", blessed.diff);
            changed += blocks.len();
        }
        if changed == 0 && self.unblessed.is_empty() {
            outln!(
                "nothing to bless: every selected probe of lesson {lesson} matches its expected output"
            );
        } else if changed > 0 {
            outln!("blessed {changed} expected-output block(s) and exit code(s)");
        }
        Ok(if self.unblessed.is_empty() {
            Code::Ok
        } else {
            Code::ProbesFailed
        })
    }
}
