//! `lessonprobe run` (and `lessonprobe` alone): select, plan, execute, report, exit code; and
//! what serves every run: the course, the preflight's checks, the reports beside stdout.

mod builder;
pub(super) mod ci_reports;
pub(super) mod course;
pub(super) mod preflight;

pub(super) use builder::{junit_path, select, Reporting, RunBuilder};

use std::path::Path;
use std::time::Duration;

use lessonprobe_probes::DbTarget;
use ticketflow::KafkaTarget;

use crate::checkpoint::{Backend, Catalog, Selection};
use crate::clean::{self, Place, Runs};
use crate::cli::RunArgs;
use crate::config::db::{self, DbChoice};
use crate::exit::{Code, Error};
use crate::history::Recorder;
use crate::report::json::Json;
use crate::report::junit::{self, Junit};
use crate::report::ndjson::Ndjson;
use crate::report::output::Delivered;
use crate::report::terminal::Terminal;
use crate::report::{Format, Reporter, Reporters};
use crate::run::{self, Interrupt, Partition, Plan, RunConfig, SqlTarget};

use ci_reports::Extras;
use course::OpenCourse;

/// The SQL backends of `--db`, folders of `sqlite:DIR` created.
pub(super) fn sql_targets(choices: &[DbChoice]) -> Result<Vec<SqlTarget>, Error> {
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

/// The order a run takes its cases in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Order {
    /// The lessons' order.
    AsPlanned,
    /// The probes that failed in the previous run of the same selection first.
    FailedFirst,
}

/// An interruption that Ctrl-C and SIGTERM request, for the rest of the process's life.
pub(super) fn interruptible() -> Result<Interrupt, Error> {
    let interrupt = Interrupt::new();
    crate::signals::watch(&interrupt)
        .map_err(|e| Error::Operation(format!("cannot handle Ctrl-C and SIGTERM: {e}")))?;
    Ok(interrupt)
}

/// One run of the selection of `args`, stopped by `interrupt`.
pub(super) fn run_once(args: &RunArgs, interrupt: &Interrupt, order: Order) -> Result<Code, Error> {
    run_keeping(args, interrupt, order, None)
}

/// The services that runs share and keep up between them (`--watch`): made by the first run,
/// in its course; stopped when dropped.
pub(super) type KeptServices = std::sync::OnceLock<std::sync::Arc<crate::services::Running>>;

/// [`run_once`], with the services in `kept` when given: started there when a run first needs
/// them, left up at its end for the next run.
pub(super) fn run_keeping(
    args: &RunArgs,
    interrupt: &Interrupt,
    order: Order,
    kept: Option<&KeptServices>,
) -> Result<Code, Error> {
    let partition = args
        .partition
        .as_deref()
        .map(str::parse::<Partition>)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let mut catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &super::builtin_names())?;
    let mut course = OpenCourse::find(&args.course, args.rev.as_deref())?;
    if let Some(open) = course.as_mut() {
        open.run_in_environment(args.course.python.is_some())?;
    }
    let uncollected = match &course {
        Some(course) => course.attach(&mut catalog, args.strict)?,
        None => Vec::new(),
    };
    if let Some(rev) = &args.changed_since {
        let course = course.as_ref().ok_or_else(|| {
            Error::Usage("--changed-since needs a course: give --course DIR".into())
        })?;
        let kept = course.keep_changed(&mut catalog, rev)?;
        if args.lesson.map_or(kept.is_empty(), |n| !kept.contains(&n)) {
            let why = format!("no lesson file or project file changed since {rev}");
            outln!("nothing to verify: {why}");
            Extras::nothing_to_verify(args, &why)?;
            return Ok(Code::Ok);
        }
    }
    let key = selection_key(args, course.is_some(), partition);
    let keep = |selection: &mut Selection<'_>| {
        if let Some(partition) = partition {
            partition.keep(selection);
        }
    };
    let (selection, history) = builder::select(args, &catalog, keep, Path::new("."), key)?;
    let first = match order {
        Order::AsPlanned => Default::default(),
        Order::FailedFirst => history.failed(),
    };
    let services = kept.map(|kept| {
        let running = kept.get_or_init(|| {
            let running = crate::services::Running::in_folder(Path::new("."));
            running.keep_between_runs();
            std::sync::Arc::new(running)
        });
        // A service the course no longer declares goes; a changed one is started anew when a
        // probe needs it.
        let declared = course.as_ref().map(|c| &c.course.settings.services);
        let names: Vec<&str> = declared
            .into_iter()
            .flat_map(|d| d.keys().map(String::as_str))
            .collect();
        running.keep_only(&names);
        running.clone()
    });
    let (config, report) = RunBuilder::new(args)
        .course(course.as_ref())
        .services(services)
        .uncollected(uncollected)
        .databases(&args.db)
        .first(first)
        .build(&selection)?;
    let run_id = match &args.run_id {
        Some(id) => {
            // A run given the id of an earlier one starts from nothing that run left.
            drop_leftovers(&selection, &config, id, Leftovers::OfEarlierRun);
            id.clone()
        }
        None => new_run_id(),
    };
    execute_and_record(
        &selection,
        &config,
        &run_id,
        &report,
        interrupt,
        Some(Recorder::new(history)),
    )
}

/// What names a course and selection in the last-failed state: the course checkout, the
/// manifests, the lesson, the patterns, the revision options and the partition.
fn selection_key(args: &RunArgs, has_course: bool, partition: Option<Partition>) -> String {
    let place = |path: Option<&Path>| {
        path.and_then(|p| p.canonicalize().ok())
            .map_or_else(|| "-".to_owned(), |p| p.display().to_string())
    };
    let course = if has_course {
        place(Some(
            args.course.course.as_deref().unwrap_or(Path::new(".")),
        ))
    } else {
        "-".to_owned()
    };
    format!(
        "course={course}; checkpoints={}; lesson={}; select={}; rev={}; changed-since={}; partition={}",
        place(args.catalog.checkpoints.as_deref()),
        args.lesson.map_or_else(|| "all".to_owned(), |n| n.to_string()),
        args.select.join(","),
        args.rev.as_deref().unwrap_or("-"),
        args.changed_since.as_deref().unwrap_or("-"),
        partition.map_or_else(|| "-".to_owned(), |p| p.to_string()),
    )
}

/// A run id unique on this machine: time to the millisecond and process id.
pub(super) fn new_run_id() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%d%H%M%S%3f"),
        std::process::id()
    )
}

/// Checks the report path, plans and executes the selection with Ctrl-C and SIGTERM turned into
/// an interruption, feeds the run's events to the reporters (every one finishes, so the results
/// are printed even when the JUnit report cannot be written), drops what an interrupted run
/// left on shared services, and maps the run to its exit code.
pub(super) fn execute_and_report(
    selection: &Selection<'_>,
    config: &RunConfig,
    run_id: &str,
    reporting: &Reporting,
) -> Result<Code, Error> {
    execute_and_record(
        selection,
        config,
        run_id,
        reporting,
        &interruptible()?,
        None,
    )
}

/// [`execute_and_report`], stopped by `interrupt`, recording the run's failures for
/// `--last-failed` with `recorder`.
pub(super) fn execute_and_record(
    selection: &Selection<'_>,
    config: &RunConfig,
    run_id: &str,
    reporting: &Reporting,
    interrupt: &Interrupt,
    recorder: Option<Recorder>,
) -> Result<Code, Error> {
    let stdout_taken = reporting.stdout_taken()?;
    if let Some(path) = &reporting.junit {
        junit::prepare(path)?;
    }
    let plan = Plan::new(selection, config);
    let mut reporters = Reporters::default();
    let delivered = Delivered::default();
    if let Some(path) = &reporting.junit {
        reporters.add(
            Junit::new(path)
                .with_family(reporting.junit_family)
                .strict(reporting.strict)
                .delivered(delivered.clone()),
        );
    }
    // Before the terminal's: the recap and the annotations come before its closing lines.
    reporting.extras.add_to(
        &mut reporters,
        reporting.format,
        reporting.strict,
        stdout_taken,
    );
    let junit = reporting.junit.clone().map(|path| (path, delivered));
    match reporting.format {
        Format::Human if stdout_taken => {
            reporters.add(Terminal::stderr(reporting.verbose, junit).strict(reporting.strict))
        }
        Format::Human => {
            reporters.add(Terminal::stdout(reporting.verbose, junit).strict(reporting.strict))
        }
        Format::Json => reporters.add(Json::stdout().strict(reporting.strict)),
        Format::Ndjson => reporters.add(Ndjson::stdout().strict(reporting.strict)),
    }
    if let Some(recorder) = recorder {
        reporters.add(recorder);
    }
    let summary = run::execute(&plan, config, run_id, interrupt, |event| {
        reporters.event(event)
    });
    if summary.interrupted.is_some() {
        drop_leftovers(selection, config, run_id, Leftovers::OfInterruption);
    }
    reporters.finish()?;
    Ok(Code::of_run(&summary, reporting.strict))
}

/// Why a run drops what runs of its own id left.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Leftovers {
    /// Before it starts: an earlier run with this id left them.
    OfEarlierRun,
    /// After an interruption: probes that did not stop in time left them.
    OfInterruption,
}

/// Drops what the probes of `selection` have of run `run_id` on PostgreSQL and a real broker,
/// saying what, and how to finish the job when a service refuses. Services that cannot be
/// asked are named after an interruption only: before a run, its probes will say so.
fn drop_leftovers(selection: &Selection<'_>, config: &RunConfig, run_id: &str, why: Leftovers) {
    let runs = Runs::One {
        run_id: run_id.to_owned(),
        schemas: clean::run_schemas(selection.checkpoints.iter().map(|(c, _)| *c), run_id),
    };
    let mut places: Vec<Place> = config
        .sql
        .iter()
        .filter_map(|t| match &t.target {
            DbTarget::Postgres(url) => Some(Place::Postgres(url.clone())),
            _ => None,
        })
        .collect();
    if config.kafka != KafkaTarget::Embedded {
        places.push(Place::Kafka(config.kafka.clone()));
    }
    let loud = why == Leftovers::OfInterruption;
    let because = match why {
        Leftovers::OfEarlierRun => "left by an earlier run with this id",
        Leftovers::OfInterruption => "left by a probe the interruption stopped",
    };
    let later = format!(
        "`lessonprobe clean --run-id {run_id} --execute` with the same --db/--kafka drops it later"
    );
    for place in &places {
        let found = match clean::find(place, &runs, LEFTOVER_TIMEOUT) {
            Ok(found) => found,
            Err(e) => {
                if loud {
                    errln!("lessonprobe: {e}; {later}");
                }
                continue;
            }
        };
        for result in clean::drop_all(place, &found.leftovers, LEFTOVER_TIMEOUT) {
            match result {
                Ok(leftover) => errln!("lessonprobe: dropped {leftover}, {because}"),
                Err(e) => errln!("lessonprobe: {e}; {later}"),
            }
        }
    }
}

/// How long each service gets to list and drop what a run left.
const LEFTOVER_TIMEOUT: Duration = Duration::from_secs(5);
