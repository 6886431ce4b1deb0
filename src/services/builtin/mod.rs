//! The service kinds lessonprobe knows how to start itself (`kind = "postgres"`, `kind = "kafka"`):
//! each becomes an ordinary declared service (a start command, its ready check, its stop signal)
//! and names the placeholders its `env` may use for the address it serves.

mod kafka;
mod postgres;

use super::service::{Ready, StopSignal};

/// What a built-in kind declares in place of `start`, `ready` and `stop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Builtin {
    /// A template over `{port}`, `{data}` and `{name}`, run through `sh -c`.
    pub start: String,
    pub ready: Ready,
    pub stop: StopSignal,
    /// The placeholders this kind adds for `env`, each with the template it stands for.
    pub placeholders: Vec<(&'static str, String)>,
}

/// The kinds, for messages.
pub const KINDS: &str = "\"postgres\" or \"kafka\"";

/// What is wrong with a `kind` and its `flavor`, said of the one at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Kind(String),
    Flavor(String),
}

/// The built-in service `kind`, of `flavor` where the kind has several.
pub fn builtin(kind: &str, flavor: Option<&str>) -> Result<Builtin, Refused> {
    match (kind, flavor) {
        ("postgres", None) => Ok(postgres::cluster()),
        ("kafka", None | Some("mock")) => Ok(kafka::mock_cluster()),
        ("kafka", Some("apache")) => Ok(kafka::apache()),
        ("kafka", Some(other)) => Err(Refused::Flavor(format!(
            "flavor {other:?} is not a flavor of kind \"kafka\"; use \"mock\" (the default) or \"apache\""
        ))),
        ("postgres", Some(_)) => Err(Refused::Flavor(
            "kind \"postgres\" has no flavors; remove flavor".into(),
        )),
        (other, _) => Err(Refused::Kind(format!(
            "kind {other:?} is not a built-in kind; use {KINDS}, or declare the service with start (and ready)"
        ))),
    }
}

/// `text` quoted for `sh`, whatever it holds.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `template` with each of `placeholders` put in.
pub fn fill(template: &str, placeholders: &[(&'static str, String)]) -> String {
    placeholders
        .iter()
        .fold(template.to_owned(), |text, (placeholder, value)| {
            text.replace(placeholder, value)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_names_its_placeholders_and_unknown_ones_are_refused() {
        let postgres = builtin("postgres", None).unwrap();
        assert_eq!(
            fill("{url}", &postgres.placeholders),
            "postgres://postgres@127.0.0.1:{port}/postgres"
        );
        assert_eq!(postgres.stop.number, libc::SIGINT);
        let kafka = builtin("kafka", None).unwrap();
        assert_eq!(fill("x={bootstrap}", &kafka.placeholders), "x={ready}");
        assert_eq!(builtin("kafka", Some("mock")).unwrap(), kafka);
        assert!(builtin("kafka", Some("apache"))
            .unwrap()
            .start
            .contains("kafka.Kafka"));
        let Err(Refused::Kind(e)) = builtin("mysql", None) else {
            panic!("mysql is a kind")
        };
        assert!(
            e.starts_with("kind \"mysql\" is not a built-in kind"),
            "{e}"
        );
        let Err(Refused::Flavor(e)) = builtin("kafka", Some("confluent")) else {
            panic!("confluent is a flavor")
        };
        assert!(
            e.contains("use \"mock\" (the default) or \"apache\""),
            "{e}"
        );
    }

    #[test]
    fn quoting_survives_any_text() {
        assert_eq!(quoted("/a b/it's"), r"'/a b/it'\''s'");
    }
}
