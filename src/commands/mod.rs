//! One module per subcommand: each turns its parsed arguments into work and an exit code.

pub mod bless;
pub mod broker;
mod ci_reports;
pub mod clean;
mod course;
pub mod hosts;
pub mod list;
pub mod remote;
pub mod replay;
pub mod run;
pub mod verify;

use lessonprobe_probes::registry;
use ticketflow::kafka::{KafkaTarget, KafkaTargetError};

use crate::cli::{Cli, Command, HostArgs, KafkaArgs, ReplayAction};
use crate::exit::{Code, Error};
use crate::remote::{AuthorizedHost, HostsError, HostsFile};
use crate::run::{RemoteFlag, RemoteHost};

/// Runs the subcommand the command line names (`run` when it names none).
pub fn dispatch(cli: Cli) -> Result<Code, Error> {
    match cli.command {
        None => run::run(cli.run),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::List(args)) => list::list(args),
        Some(Command::Broker(args)) => broker::broker(args),
        Some(Command::Clean(args)) => clean::clean(args),
        Some(Command::Bless(args)) => bless::bless(args),
        Some(Command::Replay(mut args)) => match args.action.take() {
            Some(ReplayAction::Status(status)) => replay::status(status),
            Some(ReplayAction::Verify(window)) => verify::verify(*window),
            None => replay::replay(args),
        },
        Some(Command::Remote(args)) => remote::remote(args),
        Some(Command::Hosts(args)) => hosts::hosts(args),
    }
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
