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
use crate::remote::{AuthorizedHost, HostsFile};

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

/// `TICKETFLOW_REMOTE_TESTS=1`: remote probes may connect.
fn remote_enabled() -> bool {
    std::env::var("TICKETFLOW_REMOTE_TESTS").is_ok_and(|v| v == "1")
}

/// The host remote probes run on: `Ok(Err(why))` when none is configured, which makes each
/// remote probe an ERROR naming why; a malformed hosts file is an error before anything runs.
fn authorized_host(args: &HostArgs) -> Result<Result<AuthorizedHost, String>, Error> {
    match HostsFile::find(args.hosts.as_deref())? {
        Ok(file) => Ok(Ok(file.pick(args.host.as_deref())?.clone())),
        Err(none) => Ok(Err(format!(
            "TICKETFLOW_REMOTE_TESTS=1 but no authorized host is configured: {none}"
        ))),
    }
}
