//! Which Kafka-protocol broker to use, in one grammar: `embedded` or `HOST:PORT[,HOST:PORT…]`,
//! with client properties (SASL, SSL, …) for a real broker.

use std::fmt;
use std::str::FromStr;

/// A broker and its client properties; `Debug` shows secret-looking values as `***`.
#[derive(Clone, PartialEq, Eq)]
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

/// Words that make a property's value a secret, as they appear in property names.
const SECRET_WORDS: [&str; 7] = [
    "password",
    "passwd",
    "secret",
    "token",
    "credentials",
    "key",
    "pem",
];

/// Levenshtein distance, for property names that misspell a secret word (`sasl.pasword`).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Whether a client property's value must never be shown: its name holds a word of secrets
/// (`sasl.password`, `ssl.key.password`, `sasl.oauthbearer.client.secret`, `…token…`), or a
/// misspelling of one (`sasl.pasword`, `sasl.passwrod`), or it is a config string that may
/// carry them (`sasl.jaas.config`, `sasl.oauthbearer.config`).
pub fn is_secret_property(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if name.starts_with("sasl.") && name.ends_with(".config") {
        return true;
    }
    name.split(['.', '_', '-']).any(|part| {
        SECRET_WORDS.iter().any(|word| {
            part.contains(word) || (word.len() >= 5 && part.len() >= 4 && distance(part, word) <= 2)
        })
    })
}

/// `text` with the value of every secret-looking property in `properties` replaced by `***`.
pub fn redact(properties: &[(String, String)], text: &str) -> String {
    let mut out = text.to_owned();
    for (name, value) in properties {
        if is_secret_property(name) && !value.is_empty() {
            out = out.replace(value.as_str(), "***");
        }
    }
    out
}

impl fmt::Debug for KafkaTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KafkaTarget::Embedded => f.write_str("Embedded"),
            KafkaTarget::Bootstrap {
                servers,
                properties,
            } => {
                let shown: Vec<(&str, &str)> = properties
                    .iter()
                    .map(|(k, v)| {
                        let v = if is_secret_property(k) {
                            "***"
                        } else {
                            v.as_str()
                        };
                        (k.as_str(), v)
                    })
                    .collect();
                f.debug_struct("Bootstrap")
                    .field("servers", servers)
                    .field("properties", &shown)
                    .finish()
            }
        }
    }
}

impl KafkaTarget {
    /// `text` with the values of this target's secret-looking properties replaced by `***`.
    pub fn redact(&self, text: &str) -> String {
        match self {
            KafkaTarget::Embedded => text.to_owned(),
            KafkaTarget::Bootstrap { properties, .. } => redact(properties, text),
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

    #[test]
    fn secret_looking_properties_and_their_misspellings_are_redacted() {
        for name in [
            "sasl.password",
            "sasl.pasword",
            "sasl.passwrod",
            "ssl.key.password",
            "ssl.keystore.password",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.secrett",
            "sasl.oauthbearer.config",
            "ssl.key.pem",
            "sasl.jaas.config",
            "my_token",
        ] {
            assert!(is_secret_property(name), "{name}");
        }
        for name in [
            "sasl.username",
            "security.protocol",
            "client.id",
            "isolation.level",
        ] {
            assert!(!is_secret_property(name), "{name}");
        }
        let target = "b:9092"
            .parse::<KafkaTarget>()
            .unwrap()
            .with_properties(vec![
                ("sasl.pasword".into(), "hunter2".into()),
                ("sasl.username".into(), "alice".into()),
            ])
            .unwrap();
        let said = target
            .redact("Client config error: No such configuration property sasl.pasword hunter2");
        assert!(!said.contains("hunter2") && said.contains("***"), "{said}");
        let debug = format!("{target:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("alice"),
            "{debug}"
        );
    }
}
