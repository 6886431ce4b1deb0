//! Which Kafka-protocol broker to use, in one grammar: `embedded` or `HOST:PORT[,HOST:PORT…]`,
//! with client properties (SASL, SSL, …) for a real broker.

use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaTarget {
    /// librdkafka's mock cluster, started in this process.
    Embedded,
    /// A broker given by bootstrap address, with extra client properties.
    Bootstrap {
        servers: String,
        properties: Vec<(String, String)>,
    },
}

/// Why a text names no broker, or properties do not fit it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KafkaTargetError {
    #[error("needs a bootstrap address (HOST:PORT)")]
    Empty,
    #[error("{server:?} is not HOST:PORT")]
    NotHostPort { server: String },
    #[error("client properties need a broker address: the embedded broker takes none")]
    PropertiesForEmbedded,
}

impl FromStr for KafkaTarget {
    type Err = KafkaTargetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "" => Err(KafkaTargetError::Empty),
            "embedded" => Ok(KafkaTarget::Embedded),
            servers => {
                for server in servers.split(',') {
                    let ok = server
                        .rsplit_once(':')
                        .is_some_and(|(h, p)| !h.trim().is_empty() && p.parse::<u16>().is_ok());
                    if !ok {
                        return Err(KafkaTargetError::NotHostPort {
                            server: server.to_owned(),
                        });
                    }
                }
                Ok(KafkaTarget::Bootstrap {
                    servers: servers.to_owned(),
                    properties: Vec::new(),
                })
            }
        }
    }
}

/// Client properties a replay sets itself, whatever `-X` says: its own group, commits only
/// after the effect is durable, an error instead of a silent jump when an offset is gone, and
/// only records of committed transactions.
pub const REPLAY_OWNED_PROPERTIES: [&str; 5] = [
    "group.id",
    "isolation.level",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
];

impl KafkaTarget {
    /// The first client property given that a replay sets itself ([`REPLAY_OWNED_PROPERTIES`]).
    pub fn replay_owned_property(&self) -> Option<&str> {
        match self {
            KafkaTarget::Embedded => None,
            KafkaTarget::Bootstrap { properties, .. } => properties
                .iter()
                .map(|(k, _)| k.as_str())
                .find(|k| REPLAY_OWNED_PROPERTIES.contains(k)),
        }
    }

    /// This target with client `properties` added; the embedded broker takes none.
    pub fn with_properties(
        self,
        extra: Vec<(String, String)>,
    ) -> Result<KafkaTarget, KafkaTargetError> {
        match self {
            KafkaTarget::Embedded if extra.is_empty() => Ok(KafkaTarget::Embedded),
            KafkaTarget::Embedded => Err(KafkaTargetError::PropertiesForEmbedded),
            KafkaTarget::Bootstrap {
                servers,
                mut properties,
            } => {
                properties.extend(extra);
                Ok(KafkaTarget::Bootstrap {
                    servers,
                    properties,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_or_host_port_lists_and_properties_only_for_a_broker() {
        assert_eq!("embedded".parse(), Ok(KafkaTarget::Embedded));
        assert_eq!(
            "a:9092,b:9093"
                .parse::<KafkaTarget>()
                .map(|t| t.with_properties(vec![("security.protocol".into(), "SSL".into())])),
            Ok(Ok(KafkaTarget::Bootstrap {
                servers: "a:9092,b:9093".into(),
                properties: vec![("security.protocol".into(), "SSL".into())],
            }))
        );
        assert_eq!("".parse::<KafkaTarget>(), Err(KafkaTargetError::Empty));
        assert_eq!(
            "no-port".parse::<KafkaTarget>().unwrap_err().to_string(),
            "\"no-port\" is not HOST:PORT"
        );
        assert!(":9092".parse::<KafkaTarget>().is_err());
        assert_eq!(
            KafkaTarget::Embedded.with_properties(vec![("k".into(), "v".into())]),
            Err(KafkaTargetError::PropertiesForEmbedded)
        );
        let with = |k: &str| {
            "a:1"
                .parse::<KafkaTarget>()
                .and_then(|t| {
                    t.with_properties(vec![
                        ("sasl.username".into(), "u".into()),
                        (k.into(), "x".into()),
                    ])
                })
                .unwrap()
        };
        assert_eq!(
            with("isolation.level").replay_owned_property(),
            Some("isolation.level")
        );
        assert_eq!(with("group.id").replay_owned_property(), Some("group.id"));
        assert_eq!(with("client.id").replay_owned_property(), None);
    }
}
