//! `lessonprobe run` (and `lessonprobe` alone): select, plan, execute, report, exit code.

use std::path::PathBuf;

use lessonprobe_probes::DbTarget;

use crate::checkpoint::{Backend, Catalog, ProbeKind, Selection};
use crate::cli::RunArgs;
use crate::config::db::{self, DbChoice};
use crate::exit::{Code, Error};
use crate::report::json::Json;
use crate::report::junit::Junit;
use crate::report::terminal::Terminal;
use crate::report::{Format, Reporter, Reporters};
use crate::run::{self, Interrupt, Plan, RunConfig, SqlTarget};

use super::course::OpenCourse;

/// The SQL backends of `--db`, folders of `sqlite:DIR` created.
fn sql_targets(choices: &[DbChoice]) -> Result<Vec<SqlTarget>, Error> {
    let postgres_env = std::env::var("LESSONPROBE_POSTGRES").ok();
    let targets = db::probe_databases(choices, postgres_env.as_deref())
        .map_err(|e| Error::Usage(e.to_string()))?;
    targets
        .into_iter()
        .map(|target| {
            let backend = match &target {
                DbTarget::Postgres(_) => Backend::Postgres,
                DbTarget::SqliteFile(dir) => {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        Error::io(dir, format!("cannot create the database folder: {e}"))
                    })?;
                    Backend::Sqlite
                }
                DbTarget::SqliteMemory => Backend::Sqlite,
            };
            Ok(SqlTarget { backend, target })
        })
        .collect()
}

pub fn run(args: RunArgs) -> Result<Code, Error> {
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let course = OpenCourse::find(&args.course, args.rev.as_deref())?;
    if let Some(course) = &course {
        course.attach(&mut catalog, args.strict)?;
    }
    if let Some(rev) = &args.changed_since {
        let course = course.as_ref().ok_or_else(|| {
            Error::Usage("--changed-since needs a course: give --course DIR".into())
        })?;
        let kept = course.keep_changed(&mut catalog, rev)?;
        if args.lesson.map_or(kept.is_empty(), |n| !kept.contains(&n)) {
            println!("nothing to verify: no lesson file or project file changed since {rev}");
            return Ok(Code::Ok);
        }
    }
    let selection = Selection::new(&catalog, args.lesson, &args.select)?;
    let wants_remote = selection
        .checkpoints
        .iter()
        .flat_map(|(_, probes)| probes)
        .any(|p| matches!(p.kind, ProbeKind::Remote { .. }));
    let config = RunConfig {
        jobs: args.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(2, |n| n.get()),
            usize::from,
        ),
        default_timeout: args.timeout,
        course_root: course
            .as_ref()
            .map_or_else(|| PathBuf::from("."), |c| c.root().to_owned()),
        sql: sql_targets(&args.db)?,
        kafka: super::kafka_target(&args.kafka)?,
        remote: super::remote_host(&args.hosts, wants_remote)?,
    };
    let report = Reporting {
        junit: (!args.no_junit).then(|| {
            args.junit.clone().unwrap_or_else(|| match args.lesson {
                Some(n) => PathBuf::from(format!("reports/lesson-{n:02}.xml")),
                None => PathBuf::from("reports/lessonprobe.xml"),
            })
        }),
        format: args.format,
        verbose: args.verbose,
        strict: args.strict,
        junit_family: args.junit_family,
    };
    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    execute_and_report(&selection, &config, &run_id, &report)
}

/// A run id unique on this machine: time to the millisecond and process id.
pub(super) fn new_run_id() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%d%H%M%S%3f"),
        std::process::id()
    )
}

/// How a run reports: where JUnit goes, what stdout shows, whether PENDING fails.
pub(super) struct Reporting {
    pub junit: Option<PathBuf>,
    pub format: Format,
    pub verbose: bool,
    pub strict: bool,
    pub junit_family: crate::report::junit::Family,
}

/// Plans and executes the selection, feeds the run's events to the reporters (JUnit first,
/// so a report that cannot be written stops the closing lines), and maps the run to its exit
/// code.
pub(super) fn execute_and_report(
    selection: &Selection<'_>,
    config: &RunConfig,
    run_id: &str,
    reporting: &Reporting,
) -> Result<Code, Error> {
    let plan = Plan::new(selection, config);
    let mut reporters = Reporters::default();
    if let Some(path) = &reporting.junit {
        reporters.add(Junit::new(path).with_family(reporting.junit_family));
    }
    match reporting.format {
        Format::Human => {
            reporters.add(Terminal::stdout(reporting.verbose, reporting.junit.clone()))
        }
        Format::Json => reporters.add(Json::stdout()),
    }
    let summary = run::execute(&plan, config, run_id, &Interrupt::new(), |event| {
        reporters.event(event)
    });
    reporters.finish()?;
    Ok(Code::of_run(&summary, reporting.strict))
}
