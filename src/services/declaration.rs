//! A `[services.NAME]` table as written and as the run uses it: commands are templates over
//! `{port}`, `{data}` and `{name}`, durations and the stop signal parsed once.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::builtin::Refused;
use super::service::{Ready, Service, StopSignal, SIGNALS};
use crate::diagnostics::{Diagnostic, Source};

/// How long a service may take to become ready when its declaration does not say.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped service may take to exit before its process group is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A `[services.NAME]` table as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawService {
    kind: Option<Spanned<String>>,
    flavor: Option<Spanned<String>>,
    start: Option<Spanned<String>>,
    ready: Option<Spanned<String>>,
    ready_timeout: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    stop: Option<Spanned<String>>,
    stop_timeout: Option<Spanned<String>>,
}

impl RawService {
    /// The typed declaration of service `name`, whose key is at `key` in `source`.
    pub fn declare(
        self,
        name: &str,
        key: Range<usize>,
        source: &Source<'_>,
    ) -> Result<Service, Diagnostic> {
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(source.error(
                key,
                format!("services.{name}: a service name is letters, digits, _ and -, not {bad:?}"),
            ));
        }
        let duration = |value: Option<Spanned<String>>, field: &str, default: Duration| {
            let Some(value) = value else {
                return Ok(default);
            };
            crate::config::duration::parse(value.get_ref())
                .map_err(|e| source.error(value.span(), format!("services.{name}.{field} {e}")))
        };
        let ready_timeout = duration(self.ready_timeout.clone(), "ready_timeout", READY_TIMEOUT)?;
        let stop_timeout = duration(self.stop_timeout.clone(), "stop_timeout", STOP_TIMEOUT)?;
        let (start, ready, stop, env) = match &self.kind {
            Some(kind) => self.builtin(kind, name, source)?,
            None => self.commands(name, key, source)?,
        };
        Ok(Service {
            name: name.to_owned(),
            start,
            ready,
            ready_timeout,
            env,
            stop,
            stop_timeout,
        })
    }

    /// A service of a built-in kind: its start, ready and stop are the kind's, and its `env`
    /// may use the kind's placeholders (`{url}`, `{bootstrap}`).
    fn builtin(
        &self,
        kind: &Spanned<String>,
        name: &str,
        source: &Source<'_>,
    ) -> Result<Declared, Diagnostic> {
        let given = [
            ("start", &self.start),
            ("ready", &self.ready),
            ("stop", &self.stop),
        ];
        if let Some((field, Some(value))) = given.into_iter().find(|(_, v)| v.is_some()) {
            return Err(source.error(
                value.span(),
                format!(
                    "services.{name}.{field}: kind {:?} starts, checks and stops the service itself; remove {field}",
                    kind.get_ref()
                ),
            ));
        }
        let flavor = self.flavor.as_ref().map(|f| f.get_ref().as_str());
        let builtin = super::builtin::builtin(kind.get_ref(), flavor).map_err(|refused| {
            let (at, e) = match (refused, &self.flavor) {
                (Refused::Flavor(e), Some(f)) => (f.span(), e),
                (Refused::Flavor(e) | Refused::Kind(e), _) => (kind.span(), e),
            };
            source.error(at, format!("services.{name}: {e}"))
        })?;
        let env = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), super::builtin::fill(v, &builtin.placeholders)))
            .collect();
        Ok((builtin.start, builtin.ready, builtin.stop, env))
    }

    /// A service declared by its commands: `start` (required), `ready` and `stop`.
    fn commands(
        &self,
        name: &str,
        key: Range<usize>,
        source: &Source<'_>,
    ) -> Result<Declared, Diagnostic> {
        if let Some(flavor) = &self.flavor {
            return Err(source.error(
                flavor.span(),
                format!("services.{name}: flavor chooses among a built-in kind's; it needs kind"),
            ));
        }
        let Some(start) = &self.start else {
            return Err(source.error(
                key,
                format!("services.{name}: missing start (the command that starts the service)"),
            ));
        };
        if start.get_ref().trim().is_empty() {
            return Err(source.error(start.span(), format!("services.{name}: start is empty")));
        }
        let ready = match &self.ready {
            Some(r) if r.get_ref().trim() == "tcp" => Ready::Tcp,
            Some(r) if r.get_ref().trim().is_empty() => {
                return Err(source.error(
                    r.span(),
                    format!("services.{name}: ready is a command or \"tcp\", not empty"),
                ))
            }
            Some(r) => Ready::Command(r.get_ref().clone()),
            None => Ready::Tcp,
        };
        let stop = match &self.stop {
            Some(s) => StopSignal::parse(s.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
                source.error(
                    s.span(),
                    format!(
                        "services.{name}.stop {:?} is not a signal lessonprobe sends; use one of {}",
                        s.get_ref(),
                        names.join(", ")
                    ),
                )
            })?,
            None => StopSignal {
                name: "TERM",
                number: libc::SIGTERM,
            },
        };
        Ok((start.get_ref().clone(), ready, stop, self.env.clone()))
    }
}

/// A declaration's start command, ready check, stop signal and `env`.
type Declared = (String, Ready, StopSignal, BTreeMap<String, String>);

/// The services of a `[services]` table, in name order.
pub fn declare_all(
    raw: BTreeMap<Spanned<String>, RawService>,
    source: &Source<'_>,
) -> Result<BTreeMap<String, Service>, Diagnostic> {
    raw.into_iter()
        .map(|(key, service)| {
            let span = key.span();
            let name = key.into_inner();
            service
                .declare(&name, span, source)
                .map(|declared| (name, declared))
        })
        .collect()
}

/// `template` with `{port}`, `{data}` and `{name}` put in.
pub fn expand(template: &str, port: u16, data: &str, name: &str) -> String {
    template
        .replace("{port}", &port.to_string())
        .replace("{data}", data)
        .replace("{name}", name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[derive(Deserialize)]
    struct Raw {
        services: BTreeMap<Spanned<String>, RawService>,
    }

    fn parse(text: &str) -> Result<BTreeMap<String, Service>, String> {
        let source = Source::new(Path::new("lessonprobe.toml"), text);
        let raw: Raw = source.toml().map_err(|e| e.to_string())?;
        declare_all(raw.services, &source).map_err(|e| e.to_string())
    }

    #[test]
    fn a_declaration_takes_its_defaults_and_its_given_values() {
        let services = parse(
            "[services.cache]\nstart = \"redis-server --port {port}\"\nready = \"redis-cli -p {port} ping\"\nenv = { URL = \"redis://127.0.0.1:{port}\" }\nstop = \"SIGINT\"\nstop_timeout = \"2s\"\n[services.plain]\nstart = \"sleep 9\"\n",
        )
        .unwrap();
        let cache = &services["cache"];
        assert_eq!(
            cache.ready,
            Ready::Command("redis-cli -p {port} ping".into())
        );
        assert_eq!(
            (cache.stop.name, cache.stop_timeout),
            ("INT", Duration::from_secs(2))
        );
        assert_eq!(cache.env["URL"], "redis://127.0.0.1:{port}");
        let plain = &services["plain"];
        assert_eq!(plain.ready, Ready::Tcp);
        assert_eq!(
            (plain.ready_timeout, plain.stop_timeout),
            (READY_TIMEOUT, STOP_TIMEOUT)
        );
        assert_eq!(plain.stop.number, libc::SIGTERM);
    }

    #[test]
    fn bad_declarations_are_named_at_their_place() {
        let cases = [
            (
                "[services.c]\nready = \"tcp\"\n",
                "lessonprobe.toml:1:11: services.c: missing start",
            ),
            (
                "[services.c]\nstart = \"x\"\nstrat = 1\n",
                "lessonprobe.toml:3:1: unknown field `strat`",
            ),
            (
                "[services.c]\nstart = \"x\"\nready_timeout = \"soon\"\n",
                "lessonprobe.toml:3:17: services.c.ready_timeout",
            ),
            (
                "[services.c]\nstart = \"x\"\nstop = \"NOPE\"\n",
                "lessonprobe.toml:3:8: services.c.stop \"NOPE\" is not a signal",
            ),
            (
                "[services.c]\nkind = \"mysql\"\n",
                "lessonprobe.toml:2:8: services.c: kind \"mysql\" is not a built-in kind; use \"postgres\" or \"kafka\"",
            ),
            (
                "[services.c]\nkind = \"kafka\"\nflavor = \"confluent\"\n",
                "lessonprobe.toml:3:10: services.c: flavor \"confluent\" is not a flavor of kind \"kafka\"",
            ),
            (
                "[services.c]\nkind = \"postgres\"\nstart = \"x\"\n",
                "lessonprobe.toml:3:9: services.c.start: kind \"postgres\" starts, checks and stops the service itself",
            ),
            (
                "[services.c]\nstart = \"x\"\nflavor = \"apache\"\n",
                "lessonprobe.toml:3:10: services.c: flavor chooses among a built-in kind's",
            ),
        ];
        for (text, expected) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(expected), "{text}: {e}");
        }
    }

    #[test]
    fn a_built_in_kind_declares_its_commands_and_fills_its_placeholders() {
        let services = parse(
            "[services.db]\nkind = \"postgres\"\nenv = { DB = \"{url}\" }\nready_timeout = \"5s\"\n[services.bus]\nkind = \"kafka\"\nenv = { BOOT = \"{bootstrap}\" }\n",
        )
        .unwrap();
        let db = &services["db"];
        assert_eq!(
            db.env["DB"],
            "postgres://postgres@127.0.0.1:{port}/postgres"
        );
        assert_eq!(
            (db.stop.name, db.ready_timeout),
            ("INT", Duration::from_secs(5))
        );
        assert!(db.start.contains("initdb"), "{}", db.start);
        let bus = &services["bus"];
        assert_eq!(bus.env["BOOT"], "{ready}");
        assert!(bus.start.contains(" broker --brokers 1"), "{}", bus.start);
    }

    #[test]
    fn templates_take_port_data_and_name() {
        assert_eq!(
            expand("x {port} {data}/{name} {port}", 7, "/d", "c"),
            "x 7 /d/c 7"
        );
    }
}
