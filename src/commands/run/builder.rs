//! A run assembled once from its arguments, for `run`, `doc`, `remote` and `--watch` alike: the
//! selection with `--last-failed`, the `RunConfig` with its failure policy and preflight, and
//! how the run reports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::{Catalog, ProbeKind, Selection, Uncollected};
use crate::cli::{HostArgs, KafkaArgs, RunArgs};
use crate::config::db::DbChoice;
use crate::exit::Error;
use crate::history::History;
use crate::report::junit::Family;
use crate::report::{output, Format};
use crate::run::{FailurePolicy, RunConfig};
use crate::services::Running;

use super::ci_reports::Extras;
use super::course::OpenCourse;

/// How a run reports: where JUnit goes, what stdout shows, whether PENDING fails.
pub(in crate::commands) struct Reporting {
    pub junit: Option<PathBuf>,
    pub format: Format,
    pub verbose: bool,
    pub strict: bool,
    pub junit_family: Family,
    /// GitHub Actions output, HTML, the failure recap, slow notices.
    pub extras: Extras,
}

/// What a run's arguments say before its cases are known; [`RunBuilder::build`] turns it into
/// the run's `RunConfig` and `Reporting` once the selection is made.
pub(in crate::commands) struct RunBuilder<'a> {
    /// The run's own arguments, absent for `lessonprobe remote` (which has no extras).
    args: Option<&'a RunArgs>,
    hosts: &'a HostArgs,
    jobs: usize,
    timeout: Duration,
    /// `--kafka` and `-X`; the embedded broker when absent.
    kafka: Option<&'a KafkaArgs>,
    failure: FailurePolicy,
    reporting: Reporting,
    course: Option<&'a OpenCourse>,
    uncollected: Vec<Uncollected>,
    db: &'a [DbChoice],
    preflight: bool,
    first: BTreeSet<(u32, String)>,
    /// The services of runs before it, kept up (`--watch`); else the run starts its own.
    services: Option<Arc<Running>>,
}

impl<'a> RunBuilder<'a> {
    /// The run `lessonprobe run` (and `doc`) `args` ask for, on no course and no database yet.
    pub fn new(args: &'a RunArgs) -> Self {
        RunBuilder {
            args: Some(args),
            hosts: &args.hosts,
            jobs: super::super::jobs(args.jobs),
            timeout: args.timeout,
            kafka: Some(&args.kafka),
            failure: FailurePolicy {
                max_fail: if args.fail_fast {
                    Some(1)
                } else {
                    args.max_fail
                },
                retries: args.retries.unwrap_or(0),
                retry_documents: args.retry_documents,
            },
            reporting: Reporting {
                junit: junit_path(args),
                format: args.format,
                verbose: args.verbose,
                strict: args.strict,
                junit_family: args.junit_family,
                extras: Extras::default(),
            },
            course: None,
            uncollected: Vec::new(),
            db: &[],
            preflight: true,
            first: BTreeSet::new(),
            services: None,
        }
    }

    /// One remote selector (`lessonprobe remote`): one job under `timeout`, on the embedded
    /// broker, no retries and no preflight, its JUnit report at `junit`.
    pub fn remote(
        hosts: &'a HostArgs,
        timeout: Duration,
        junit: PathBuf,
        format: Format,
        strict: bool,
    ) -> Self {
        RunBuilder {
            args: None,
            hosts,
            jobs: 1,
            timeout,
            kafka: None,
            failure: FailurePolicy::default(),
            reporting: Reporting {
                junit: Some(junit),
                format,
                verbose: false,
                strict,
                junit_family: Family::default(),
                extras: Extras::default(),
            },
            course: None,
            uncollected: Vec::new(),
            db: &[],
            preflight: false,
            first: BTreeSet::new(),
            services: None,
        }
    }

    /// Runs in `course`: its root, its interpreter checked first.
    pub fn course(mut self, course: Option<&'a OpenCourse>) -> Self {
        self.course = course;
        self
    }

    /// The warnings of the lint, for the reports.
    pub fn uncollected(mut self, uncollected: Vec<Uncollected>) -> Self {
        self.uncollected = uncollected;
        self
    }

    /// The SQL backends of `--db`.
    pub fn databases(mut self, db: &'a [DbChoice]) -> Self {
        self.db = db;
        self
    }

    /// The JUnit report at `junit` instead of the default place (none when `None`).
    pub fn junit(mut self, junit: Option<PathBuf>) -> Self {
        self.reporting.junit = junit;
        self
    }

    /// The services kept up between runs, when given, instead of the run's own.
    pub fn services(mut self, services: Option<Arc<Running>>) -> Self {
        self.services = services;
        self
    }

    /// These probes, as (lesson, probe id), before the others.
    pub fn first(mut self, first: BTreeSet<(u32, String)>) -> Self {
        self.first = first;
        self
    }

    /// The run's `RunConfig` and `Reporting` for `selection`: a hosts file that cannot name the
    /// host stops a run only when remote probes are selected.
    pub fn build(self, selection: &Selection<'_>) -> Result<(RunConfig, Reporting), Error> {
        let wants_remote = selection
            .checkpoints
            .iter()
            .flat_map(|(_, probes)| probes)
            .any(|p| matches!(p.kind, ProbeKind::Remote { .. }));
        let sql = super::sql_targets(self.db)?;
        let kafka = match self.kafka {
            Some(args) => super::super::kafka_target(args)?,
            None => ticketflow::KafkaTarget::Embedded,
        };
        check_services(selection, self.course)?;
        let course_root = self
            .course
            .map_or_else(|| PathBuf::from("."), |c| c.root().to_owned());
        let mut config = RunConfig {
            jobs: self.jobs,
            default_timeout: self.timeout,
            services: self
                .services
                .unwrap_or_else(|| Arc::new(Running::in_folder(Path::new(".")))),
            course_root,
            sql,
            kafka,
            remote: super::super::remote_host(self.hosts, wants_remote)?,
            failure: self.failure,
            preflight: Vec::new(),
            first: self.first,
        };
        if self.preflight {
            config.preflight = super::preflight::checks(
                self.course.map(|c| &c.course),
                &config.sql,
                &config.kafka,
                &config.remote,
                &config.services,
            );
        }
        let mut reporting = self.reporting;
        if let Some(args) = self.args {
            reporting.extras = Extras::of(args, self.course, self.uncollected, &config)?;
        }
        Ok((config, reporting))
    }
}

/// Every service a selected probe names is one the course declares.
fn check_services(selection: &Selection<'_>, course: Option<&OpenCourse>) -> Result<(), Error> {
    let declared = course.map(|c| &c.course.settings.services);
    for (checkpoint, probes) in &selection.checkpoints {
        for probe in probes {
            let file = match &probe.kind {
                ProbeKind::Document(doc) => doc.file.clone(),
                _ => checkpoint.source.clone(),
            };
            if let Some(name) = probe
                .services
                .iter()
                .find(|n| !declared.is_some_and(|d| d.contains_key(*n)))
            {
                return Err(Error::Usage(format!(
                    "{}:{}: probe {} needs service {name:?}, which the course's lessonprobe.toml does not declare (add [services.{name}])",
                    file.display(),
                    probe.line.unwrap_or(1),
                    probe.id
                )));
            }
        }
    }
    Ok(())
}

/// The selection of `args` in `catalog`, narrowed by `keep` (`--partition`), less what passed in
/// the previous run of it when `--last-failed` is given (the history of `key`, kept in `dir`);
/// returns the history too.
pub(in crate::commands) fn select<'c>(
    args: &RunArgs,
    catalog: &'c Catalog,
    keep: impl FnOnce(&mut Selection<'c>),
    dir: &Path,
    key: String,
) -> Result<(Selection<'c>, History), Error> {
    let mut selection = Selection::new(catalog, args.lesson, &args.select)?;
    keep(&mut selection);
    let history = History::open(dir, key);
    if args.last_failed {
        let what = history.keep_failed(&mut selection);
        errln!("lessonprobe: {what}");
    }
    Ok((selection, history))
}

/// Where a run's JUnit report goes: `--junit`, else `reports/lesson-NN.xml` for one lesson or
/// `reports/lessonprobe.xml`; none with `--no-junit`.
pub(in crate::commands) fn junit_path(args: &RunArgs) -> Option<PathBuf> {
    (!args.no_junit).then(|| {
        args.junit.clone().unwrap_or_else(|| match args.lesson {
            Some(n) => PathBuf::from(format!("reports/lesson-{n:02}.xml")),
            None => PathBuf::from("reports/lessonprobe.xml"),
        })
    })
}

impl Reporting {
    /// Whether a report is written to standard output (`-`): then the human lines go to
    /// standard error. Two writers of standard output are refused.
    pub(super) fn stdout_taken(&self) -> Result<bool, Error> {
        let dash = |p: &Option<PathBuf>| p.as_deref() == Some(Path::new(output::STDOUT));
        let mut takers: Vec<&str> = Vec::new();
        if dash(&self.junit) {
            takers.push("--junit -");
        }
        if dash(&self.extras.html) {
            takers.push("--html -");
        }
        if self.format != Format::Human && !takers.is_empty() {
            takers.push(match self.format {
                Format::Json => "--format json",
                _ => "--format ndjson",
            });
        }
        match takers.as_slice() {
            [] => Ok(false),
            [_] => Ok(true),
            [a, b] => Err(Error::Usage(format!(
                "{a} and {b} both write to standard output; send one of them to a file"
            ))),
            _ => Err(Error::Usage(format!(
                "{} all write to standard output; send all but one to a file",
                takers.join(", ")
            ))),
        }
    }
}
