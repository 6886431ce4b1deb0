//! One module per subcommand: each turns its parsed arguments into work and an exit code.

pub mod broker;
pub mod list;
pub mod run;

use lessonprobe_probes::{registry, KafkaTarget};

use crate::cli::KafkaArgs;
use crate::exit::Error;

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
