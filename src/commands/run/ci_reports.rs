//! The reports of a run beside its standard output and JUnit — GitHub Actions annotations and
//! step summary, the HTML report, the failure recap, the slow notices — decided from the
//! command line, the GitHub Actions variables and the course.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use ticketflow::KafkaTarget;

use crate::checkpoint::Uncollected;
use crate::cli::RunArgs;
use crate::config::db::DbChoice;
use crate::exit::Error;
use crate::report::github::Github;
use crate::report::html::Html;
use crate::report::provenance::{Provenance, Verified};
use crate::report::recap::{Recap, Rerun};
use crate::report::slow::Slow;
use crate::report::{Format, Reporters};
use crate::run::{RemoteHost, RunConfig};

use super::course::OpenCourse;

/// What a run reports beside standard output and JUnit.
#[derive(Default)]
pub(in crate::commands) struct Extras {
    pub html: Option<PathBuf>,
    /// Whether to write GitHub Actions workflow commands and the step summary.
    pub github: bool,
    pub uncollected: Vec<Uncollected>,
    pub provenance: Provenance,
    pub rerun: Rerun,
    pub slow_after: Option<Duration>,
}

impl Extras {
    /// The extras `lessonprobe run` asks for; a `--html` path that is a folder is refused
    /// before anything runs.
    pub fn of(
        args: &RunArgs,
        course: Option<&OpenCourse>,
        uncollected: Vec<Uncollected>,
        config: &RunConfig,
    ) -> Result<Extras, Error> {
        if let Some(path) = args.html.as_ref().filter(|p| p.is_dir()) {
            return Err(Error::Usage(format!(
                "{}: is a folder; give --html the path of a file",
                path.display()
            )));
        }
        let github = args
            .annotations
            .enabled(std::env::var("GITHUB_ACTIONS").ok().as_deref());
        Ok(Extras {
            html: args.html.clone(),
            github,
            uncollected,
            provenance: provenance(args, course, config),
            rerun: rerun(args),
            slow_after: Some(args.slow_after),
        })
    }

    /// A run with nothing to verify still says so on GitHub's run page, when it would have
    /// written a step summary.
    pub fn nothing_to_verify(args: &RunArgs, why: &str) -> Result<(), Error> {
        if !args
            .annotations
            .enabled(std::env::var("GITHUB_ACTIONS").ok().as_deref())
        {
            return Ok(());
        }
        let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) else {
            return Ok(());
        };
        crate::report::github::append_summary(
            std::path::Path::new(&path),
            &format!("## lessonprobe: nothing to verify\n\n{why}.\n\n"),
        )
        .map_err(Error::from)
    }

    /// Adds the reporters, before the one of standard output: the recap and the annotations
    /// are written before its closing lines, which stay the last of the output. Machine
    /// formats keep standard output to themselves: notices and annotations go to standard
    /// error then, and so do the human lines when a report is written to standard output
    /// (`stdout_taken`).
    pub fn add_to(
        &self,
        reporters: &mut Reporters,
        format: Format,
        strict: bool,
        stdout_taken: bool,
    ) {
        let human = format == Format::Human;
        let human_out = || -> Box<dyn std::io::Write> {
            if stdout_taken {
                Box::new(std::io::stderr())
            } else {
                Box::new(std::io::stdout())
            }
        };
        if let Some(after) = self.slow_after {
            if human && !stdout_taken {
                let terminal = std::io::stdout().is_terminal();
                reporters.add(Slow::new(after, std::io::stdout(), terminal));
            } else {
                reporters.add(Slow::new(after, std::io::stderr(), false));
            }
        }
        if human {
            reporters.add(Recap::to(human_out(), self.rerun.clone()).strict(strict));
        }
        if let Some(path) = &self.html {
            reporters.add(Html::new(path, self.provenance.clone()).strict(strict));
        }
        if self.github {
            let out: Box<dyn std::io::Write> = if human {
                human_out()
            } else {
                Box::new(std::io::stderr())
            };
            let var = |name| {
                std::env::var_os(name)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            };
            reporters.add(
                Github::new(out, self.provenance.clone())
                    .summary(var("GITHUB_STEP_SUMMARY"))
                    .workspace(var("GITHUB_WORKSPACE"))
                    .uncollected(self.uncollected.clone())
                    .strict(strict),
            );
        }
    }
}

fn provenance(args: &RunArgs, course: Option<&OpenCourse>, config: &RunConfig) -> Provenance {
    let verified = match (
        &args.rev,
        &args.changed_since,
        course.and_then(|c| c.commit()),
    ) {
        (Some(rev), _, Some(commit)) => Verified::Revision {
            rev: rev.clone(),
            commit: commit.to_owned(),
        },
        (_, Some(base), _) => Verified::ChangedSince { base: base.clone() },
        _ => Verified::Checkout,
    };
    let mut backends: Vec<String> = config
        .sql
        .iter()
        .map(|t| t.backend.label().to_owned())
        .collect();
    backends.dedup();
    Provenance {
        course: course.map(|_| {
            args.course
                .course
                .as_deref()
                .map_or_else(|| ".".into(), |c| c.display().to_string())
        }),
        verified,
        backends,
        broker: match &config.kafka {
            KafkaTarget::Embedded => "embedded (the mock cluster in this process)".into(),
            KafkaTarget::Bootstrap { servers, .. } => servers.clone(),
        },
        remote: match &config.remote {
            RemoteHost::Host(host) => format!("{} ({}@{})", host.name, host.user, host.address),
            other => other.unavailable_reason().unwrap_or_default(),
        },
    }
}

/// The options of this run that decide what a rerun runs against. Client properties (`-X`)
/// are left out: they may hold secrets, and a log is no place for them.
fn rerun(args: &RunArgs) -> Rerun {
    let mut words: Vec<String> = Vec::new();
    let mut opt = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            words.extend([name.to_owned(), value]);
        }
    };
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    opt("--checkpoints", path(&args.catalog.checkpoints));
    opt("--course", path(&args.course.course));
    opt("--python", args.course.python.clone());
    opt(
        "--notebook-outputs",
        args.course.notebook_outputs.map(|o| o.as_str().to_owned()),
    );
    opt("--rev", args.rev.clone());
    opt(
        "--kafka",
        match &args.kafka.kafka {
            Some(KafkaTarget::Bootstrap { servers, .. }) => Some(servers.clone()),
            _ => None,
        },
    );
    opt("--hosts", path(&args.hosts.hosts));
    opt("--host", args.hosts.host.clone());
    if args.timeout != Duration::from_secs(30) {
        opt(
            "--timeout",
            Some(humantime::format_duration(args.timeout).to_string()),
        );
    }
    if args.strict {
        words.push("--strict".into());
    }
    let mut db = Vec::new();
    for choice in &args.db {
        match choice {
            DbChoice::Sqlite => db.push(("sqlite", "sqlite".to_owned())),
            DbChoice::SqliteDir(dir) => db.push(("sqlite", format!("sqlite:{}", dir.display()))),
            // A URL may carry a password: the rerun names the variable instead.
            DbChoice::Postgres(_) | DbChoice::PostgresFromEnv => {
                db.push(("postgres", "postgres".to_owned()))
            }
            DbChoice::All => {
                db.push(("sqlite", "sqlite".to_owned()));
                db.push(("postgres", "postgres".to_owned()));
            }
        }
    }
    Rerun {
        program: std::env::args()
            .next()
            .unwrap_or_else(|| "lessonprobe".into()),
        args: words,
        db,
    }
}
