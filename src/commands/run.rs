//! `lessonprobe run` (and `lessonprobe` alone): select, plan, execute, report, exit code.

use std::path::PathBuf;

use lessonprobe_probes::DbTarget;

use crate::checkpoint::{Backend, Catalog, ProbeKind, Selection};
use crate::cli::RunArgs;
use crate::exit::{Code, Error};
use crate::report::json::Json;
use crate::report::junit::Junit;
use crate::report::terminal::Terminal;
use crate::report::{Format, Reporter, Reporters};
use crate::run::{self, Interrupt, Plan, RunConfig, SqlTarget};

use super::course::OpenCourse;

fn sql_targets(values: &[String]) -> Result<Vec<SqlTarget>, Error> {
    let postgres_from_env = || match std::env::var("LESSONPROBE_POSTGRES") {
        Ok(url) if !url.trim().is_empty() => Ok(SqlTarget {
            backend: Backend::Postgres,
            target: DbTarget::Postgres(url),
        }),
        _ => Err(Error::Usage(
            "--db postgres/all: set LESSONPROBE_POSTGRES to a postgres:// URL, or give the URL"
                .into(),
        )),
    };
    let mut expanded = Vec::new();
    for value in values {
        match value.trim() {
            "all" => {
                expanded.push(SqlTarget {
                    backend: Backend::Sqlite,
                    target: DbTarget::SqliteMemory,
                });
                expanded.push(postgres_from_env()?);
            }
            "postgres" | "postgresql" => expanded.push(postgres_from_env()?),
            v if v.starts_with("postgres://") || v.starts_with("postgresql://") => {
                expanded.push(SqlTarget {
                    backend: Backend::Postgres,
                    target: DbTarget::Postgres(v.to_owned()),
                })
            }
            v => expanded.push(sqlite_target(v)?),
        }
    }
    let mut targets: Vec<SqlTarget> = Vec::new();
    for target in expanded {
        if targets.iter().any(|t| t.backend == target.backend) {
            return Err(Error::Usage(format!(
                "--db names {} twice",
                target.backend.label()
            )));
        }
        targets.push(target);
    }
    Ok(targets)
}

fn sqlite_target(value: &str) -> Result<SqlTarget, Error> {
    match value {
        "sqlite" | "sqlite::memory:" => Ok(SqlTarget {
            backend: Backend::Sqlite,
            target: DbTarget::SqliteMemory,
        }),
        v if v.starts_with("sqlite:") => {
            let dir = PathBuf::from(&v["sqlite:".len()..]);
            if dir.as_os_str().is_empty() {
                return Err(Error::Usage("--db sqlite:DIR needs a folder".into()));
            }
            std::fs::create_dir_all(&dir)
                .map_err(|e| Error::io(&dir, format!("cannot create the database folder: {e}")))?;
            Ok(SqlTarget {
                backend: Backend::Sqlite,
                target: DbTarget::SqliteFile(dir),
            })
        }
        other => Err(Error::Usage(format!(
            "--db {other:?}: expected sqlite, sqlite:DIR, postgres://URL, postgres or all"
        ))),
    }
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
