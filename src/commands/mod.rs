//! One module per subcommand: each turns its parsed arguments into work and an exit code.

pub mod bless;
pub mod broker;
pub mod clean;
pub mod doc;
mod doctor;
mod env;
pub mod hosts;
pub mod list;
pub mod remote;
pub mod replay;
pub mod run;
mod watch;

// Found by list, bless and doctor as by a run.
use run::course;

use lessonprobe_probes::registry;
use ticketflow::kafka::{KafkaTarget, KafkaTargetError};
use ticketflow::replay::Window;
use ticketflow::store::AuditDb;

use crate::cli::{Cli, Command, HostArgs, KafkaArgs, ReplayAction, RunArgs, WindowArgs};
use crate::config::db::replay_target;
use crate::exit::{Code, Error};
use crate::remote::{AuthorizedHost, HostsError, HostsFile};
use crate::run::{RemoteFlag, RemoteHost};

/// Runs the subcommand the command line names (`run` when it names none).
pub fn dispatch(cli: Cli) -> Result<Code, Error> {
    match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::List(args)) => list::list(args),
        Some(Command::Broker(args)) => broker::broker(args),
        Some(Command::Clean(args)) => clean::clean(args),
        Some(Command::Env(args)) => env::env(args),
        Some(Command::Doctor(args)) => doctor::doctor(args),
        Some(Command::Bless(args)) => bless::bless(args),
        Some(Command::Replay(mut args)) => match args.action.take() {
            Some(ReplayAction::Status(status)) => replay::status(status),
            Some(ReplayAction::Verify(window)) => replay::verify::verify(*window),
            None => replay::replay(args),
        },
        Some(Command::Remote(args)) => remote::remote(args),
        Some(Command::Hosts(args)) => hosts::hosts(args),
        Some(Command::Doc(args)) => doc::doc(args),
    }
}

/// `lessonprobe run` (and `lessonprobe` alone): one run of the selection, or with `--watch` one
/// after each change until Ctrl-C.
fn run(args: RunArgs) -> Result<Code, Error> {
    let interrupt = run::interruptible()?;
    if args.watch {
        return watch::watch(&args, &interrupt);
    }
    run::run_once(&args, &interrupt, run::Order::AsPlanned)
}

fn builtin_names() -> Vec<&'static str> {
    registry::builtins().iter().map(|p| p.name).collect()
}

/// The broker of `--kafka` (embedded when absent) with the `-X` client properties.
fn kafka_target(args: &KafkaArgs) -> Result<KafkaTarget, Error> {
    let target = args.kafka.clone().unwrap_or(KafkaTarget::Embedded);
    target
        .with_properties(args.property.clone())
        .map_err(|e| match e {
            KafkaTargetError::PropertiesForEmbedded => {
                Error::Usage("-X properties need --kafka: the embedded broker takes none".into())
            }
            other => Error::Usage(other.to_string()),
        })
}

/// The fewest probes run at once by default: most probes wait (on a broker, a database, a
/// child process, a timeout they check) far more than they compute, so on a laptop of two cores
/// lesson 30's run ends in half the time with four.
const MIN_DEFAULT_JOBS: usize = 4;

/// The probes run at once: `--jobs`, else the number of CPUs, at least [`MIN_DEFAULT_JOBS`].
fn jobs(given: Option<u16>) -> usize {
    given.map_or_else(
        || {
            std::thread::available_parallelism()
                .map_or(MIN_DEFAULT_JOBS, |n| n.get().max(MIN_DEFAULT_JOBS))
        },
        usize::from,
    )
}

/// The broker of `--kafka`: `command` works on real data, so the embedded broker is refused.
fn real_kafka(args: &KafkaArgs, command: &str) -> Result<KafkaTarget, Error> {
    let kafka = kafka_target(args)?;
    if kafka == KafkaTarget::Embedded {
        return Err(Error::Usage(format!("{command} works on real data: give --kafka HOST:PORT (the embedded broker is refused here)")));
    }
    Ok(kafka)
}

/// The replay's target database: `--db`, else `LESSONPROBE_REPLAY_DB` (never the probe
/// runner's `LESSONPROBE_DB`).
fn target_db(db: Option<AuditDb>) -> Result<AuditDb, Error> {
    replay_target(db, std::env::var_os("LESSONPROBE_DB").is_some())
        .map_err(|e| Error::Usage(e.to_string()))
}

/// The window of `--since`/`--until` or `--start`/`--stop`.
fn window(w: &WindowArgs) -> Result<Window, Error> {
    match (w.since, w.until, w.start, w.stop) {
        (Some(since_ms), Some(until_ms), None, None) if until_ms <= since_ms => Err(Error::Usage(
            "empty window: --until must be later than --since".into(),
        )),
        (Some(since_ms), Some(until_ms), None, None) => Ok(Window::Time { since_ms, until_ms }),
        (None, None, Some(start), Some(stop)) if stop <= start => Err(Error::Usage(format!(
            "empty window: --stop {stop} must be greater than --start {start}"
        ))),
        (None, None, Some(start), Some(stop)) => Ok(Window::Offsets { start, stop }),
        _ => Err(Error::Usage(
            "give --since and --until, or --start and --stop".into(),
        )),
    }
}

/// Where remote probes run. Only `TICKETFLOW_REMOTE_TESTS=1` lets them connect; without it
/// the host they would run on is only named. When `wanted` (remote probes are selected), a
/// hosts file that is unreadable, invalid or lacks the named host stops the run; a missing
/// one makes each remote probe an ERROR saying so.
fn remote_host(args: &HostArgs, wanted: bool) -> Result<RemoteHost, Error> {
    let flag = RemoteFlag::from_env();
    let host = configured_host(args);
    Ok(match (flag.is_on(), host) {
        (true, Ok(host)) => RemoteHost::Host(Box::new(host)),
        (true, Err(e @ HostsError::NotFound(_))) => RemoteHost::Unavailable(e),
        (true, Err(e)) if wanted => return Err(e.into()),
        (true, Err(e)) => RemoteHost::Unavailable(e),
        (false, host) => RemoteHost::Disabled {
            flag,
            host: host.ok().map(|h| h.label()),
        },
    })
}

/// The host `--host` names in the hosts file, or its first.
fn configured_host(args: &HostArgs) -> Result<AuthorizedHost, HostsError> {
    let file = HostsFile::find(args.hosts.as_deref())?;
    file.pick(args.host.as_deref()).cloned()
}
