//! The command line: clap definitions, turned once into the configuration the library reads.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use lessonprobe_probes::{registry, DbTarget, KafkaTarget};

use crate::checkpoint::{Backend, Catalog, ProbeKind, Selection};
use crate::exit::{Code, Error};
use crate::report::{self, Format};
use crate::run::{self, Counts, Plan, RunConfig, SqlTarget};

#[derive(Debug, Parser)]
#[command(
    name = "lessonprobe",
    version,
    about = "Runs a lesson's checkpoint probes and reports PASS, FAIL, ERROR, SKIP or PENDING",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `lessonprobe` runs probes as `lessonprobe run` does.
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run checkpoint probes (the default).
    Run(RunArgs),
    /// List checkpoints and their probes: id, name, kind, where each can run.
    List(ListArgs),
}

#[derive(Debug, Args)]
struct CatalogArgs {
    /// Folder of checkpoint manifests [default: ./checkpoints, else the built-in copies].
    #[arg(long, env = "LESSONPROBE_CHECKPOINTS", value_name = "DIR")]
    checkpoints: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Only this lesson's checkpoint.
    #[arg(long, visible_alias = "checkpoint", value_name = "N")]
    lesson: Option<u32>,
    #[command(flatten)]
    catalog: CatalogArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Run this lesson's checkpoint [default: every checkpoint].
    #[arg(long, visible_alias = "checkpoint", value_name = "N")]
    lesson: Option<u32>,
    /// Run only probes whose id or name matches (substring, or `*` glob); repeatable.
    #[arg(long, value_name = "PATTERN")]
    select: Vec<String>,
    /// Where to write JUnit XML [default: reports/lesson-NN.xml, or reports/lessonprobe.xml].
    #[arg(long, value_name = "PATH")]
    junit: Option<PathBuf>,
    /// Do not write a JUnit report.
    #[arg(long, conflicts_with = "junit")]
    no_junit: bool,
    /// What to print on standard output.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Probes run at once [default: the number of CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,
    /// Deadline of a probe whose manifest sets none (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
    /// PENDING probes fail the run (exit 1).
    #[arg(long)]
    strict: bool,
    /// Show each probe's claim, output and, for prose exercises, the answer key.
    #[arg(long, short)]
    verbose: bool,
    /// The course checkout that `command` probes run in.
    #[arg(long, env = "LESSONPROBE_COURSE", value_name = "DIR", default_value = ".")]
    course: PathBuf,
    /// SQL backend of the SQL probes: sqlite (in memory), sqlite:PATH; repeatable.
    #[arg(long, env = "LESSONPROBE_DB", value_name = "DB", value_delimiter = ',', default_value = "sqlite")]
    db: Vec<String>,
    #[command(flatten)]
    catalog: CatalogArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (write e.g. 30s or 2m)"))?;
    if d.is_zero() {
        return Err("must be positive".into());
    }
    Ok(d)
}

pub fn dispatch(cli: Cli) -> Result<Code, Error> {
    match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::List(args)) => list(args),
    }
}

fn builtin_names() -> Vec<&'static str> {
    registry::builtins().iter().map(|p| p.name).collect()
}

fn sql_targets(values: &[String]) -> Result<Vec<SqlTarget>, Error> {
    let mut targets: Vec<SqlTarget> = Vec::new();
    for value in values {
        let target = match value.trim() {
            "sqlite" | "sqlite::memory:" => SqlTarget { backend: Backend::Sqlite, target: DbTarget::SqliteMemory },
            v if v.starts_with("sqlite:") => {
                let path = &v["sqlite:".len()..];
                if path.is_empty() {
                    return Err(Error::Usage("--db sqlite:PATH needs a path".into()));
                }
                SqlTarget { backend: Backend::Sqlite, target: DbTarget::SqliteFile(PathBuf::from(path)) }
            }
            other => {
                return Err(Error::Usage(format!("--db {other:?}: expected sqlite or sqlite:PATH")));
            }
        };
        if targets.iter().any(|t| t.backend == target.backend) {
            return Err(Error::Usage(format!("--db names {} twice", target.backend.label())));
        }
        targets.push(target);
    }
    Ok(targets)
}

fn run(args: RunArgs) -> Result<Code, Error> {
    let started = Instant::now();
    let catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &builtin_names())?;
    let selection = Selection::new(&catalog, args.lesson, &args.select)?;
    let config = RunConfig {
        jobs: args.jobs.map_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()), usize::from),
        default_timeout: args.timeout,
        course_root: args.course.clone(),
        sql: sql_targets(&args.db)?,
        kafka: KafkaTarget::Embedded,
        remote_enabled: std::env::var("TICKETFLOW_REMOTE_TESTS").is_ok_and(|v| v == "1"),
    };
    let junit_path = (!args.no_junit).then(|| {
        args.junit.clone().unwrap_or_else(|| match args.lesson {
            Some(n) => PathBuf::from(format!("reports/lesson-{n:02}.xml")),
            None => PathBuf::from("reports/lessonprobe.xml"),
        })
    });
    let plan = Plan::new(&selection, &config);
    let run_id = format!("{}-{}", std::process::id(), chrono::Utc::now().format("%Y%m%d%H%M%S%3f"));
    let terminal = report::terminal::Terminal::new(args.verbose);
    let outcomes = run::execute(&plan, &config, &run_id, |o| {
        if args.format == Format::Human {
            terminal.outcome(o);
        }
    });
    debug_assert_eq!(outcomes.len(), plan.cases.len());
    let counts = Counts::of(&outcomes);
    if let Some(path) = &junit_path {
        let xml = report::junit::render(&outcomes, started.elapsed())
            .map_err(|e| Error::io(path, format!("cannot render JUnit: {e}")))?;
        report::junit::write(path, &xml)?;
    }
    match args.format {
        Format::Human => terminal.finish(&counts, junit_path.as_deref()),
        Format::Json => println!("{}", report::json::render(&run_id, &outcomes)),
    }
    Ok(if counts.succeeded(args.strict) { Code::Ok } else { Code::ProbesFailed })
}

fn list(args: ListArgs) -> Result<Code, Error> {
    let catalog = Catalog::load(args.catalog.checkpoints.as_deref(), &builtin_names())?;
    let selection = Selection::new(&catalog, args.lesson, &[])?;
    for (checkpoint, probes) in &selection.checkpoints {
        println!("lesson {}: {} ({})", checkpoint.lesson, checkpoint.title, checkpoint.source.display());
        for probe in probes {
            let runs_on = match &probe.kind {
                ProbeKind::Prose { .. } => "-".to_owned(),
                ProbeKind::Remote { .. } => "remote host".to_owned(),
                ProbeKind::Command { .. } => "local command".to_owned(),
                ProbeKind::Builtin { .. } if probe.backends.is_empty() => "in process".to_owned(),
                ProbeKind::Builtin { .. } => {
                    probe.backends.iter().map(|b| b.label()).collect::<Vec<_>>().join(", ")
                }
            };
            println!("  {:<10} {:<48} {:<8} {}", probe.id, probe.name, probe.kind.label(), runs_on);
        }
    }
    Ok(Code::Ok)
}
