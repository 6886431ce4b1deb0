//! One module per subcommand: each turns its parsed arguments into work and an exit code.

pub mod bless;
pub mod broker;
mod course;
pub mod hosts;
pub mod list;
pub mod remote;
pub mod replay;
pub mod run;

use lessonprobe_probes::{registry, KafkaTarget};

use crate::cli::{Cli, Command, HostArgs, KafkaArgs};
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
        Some(Command::Bless(args)) => bless::bless(args),
        Some(Command::Replay(args)) => replay::replay(args),
        Some(Command::Remote(args)) => remote::remote(args),
        Some(Command::Hosts(args)) => hosts::hosts(args),
    }
}

fn builtin_names() -> Vec<&'static str> {
    registry::builtins().iter().map(|p| p.name).collect()
}

fn kafka_target(args: &KafkaArgs) -> Result<KafkaTarget, Error> {
    match args.kafka.as_deref().map(str::trim) {
        None => {
            if !args.property.is_empty() {
                return Err(Error::Usage(
                    "-X properties need --kafka: the embedded broker takes none".into(),
                ));
            }
            Ok(KafkaTarget::Embedded)
        }
        Some("") => Err(Error::Usage(
            "--kafka needs a bootstrap address (HOST:PORT)".into(),
        )),
        Some("embedded") => Ok(KafkaTarget::Embedded),
        Some(servers) => {
            for server in servers.split(',') {
                let ok = server
                    .rsplit_once(':')
                    .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
                if !ok {
                    return Err(Error::Usage(format!(
                        "--kafka {servers:?}: {server:?} is not HOST:PORT"
                    )));
                }
            }
            Ok(KafkaTarget::Bootstrap {
                servers: servers.to_owned(),
                properties: args.property.clone(),
            })
        }
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
