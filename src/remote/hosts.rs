//! Authorized hosts: the TOML file that lists them, its validation with file:line errors, and
//! where it is looked for.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::selector::{invalid_env, render, render_env, unknown_placeholder, CommandSet};
use crate::config::duration::TomlDuration;
use crate::diagnostics::{Diagnostic, Source};

/// The default `run` template: a pytest selector writing JUnit.
pub const DEFAULT_RUN: &str = "python -m pytest {selector} --junitxml={report}";

/// A host that may run remote selectors: listed in the hosts file, with a known_hosts file
/// whose entry its key must match.
#[derive(Debug, Clone)]
pub struct AuthorizedHost {
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    /// A private key file; `None` means the SSH agent.
    pub identity: Option<PathBuf>,
    pub known_hosts: PathBuf,
    /// Expected `ID` of the host's /etc/os-release.
    pub os: String,
    pub workdir: String,
    pub prepare: Option<String>,
    pub run: String,
    pub teardown: Option<String>,
    /// Environment variables of prepare, run and teardown, set in their command line.
    pub env: BTreeMap<String, String>,
    pub connect_timeout: Duration,
    pub teardown_timeout: Duration,
}

impl AuthorizedHost {
    /// `address:port`, as messages name it.
    pub fn place(&self) -> String {
        format!("{}:{}", self.address, self.port)
    }

    /// `name (address:port)`, as reports name the host a case would run on.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.place())
    }

    /// The commands a run of `selector` for `checkpoint` would execute, writing `report`.
    pub fn commands(&self, checkpoint: u32, selector: &str, report: &str) -> CommandSet {
        CommandSet {
            env: render_env(&self.env),
            prepare: self
                .prepare
                .as_deref()
                .map(|t| render(t, checkpoint, selector, report)),
            run: render(&self.run, checkpoint, selector, report),
            teardown: self
                .teardown
                .as_deref()
                .map(|t| render(t, checkpoint, selector, report)),
        }
    }
}

/// A parsed hosts file.
#[derive(Debug, Clone)]
pub struct HostsFile {
    pub path: PathBuf,
    pub hosts: Vec<AuthorizedHost>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    host: Vec<Spanned<RawHost>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Spanned<String>,
    address: Spanned<String>,
    #[serde(default = "default_port")]
    port: u16,
    user: Spanned<String>,
    identity: Option<Spanned<String>>,
    #[serde(default)]
    agent: bool,
    known_hosts: Option<Spanned<String>>,
    #[serde(default = "default_os")]
    os: String,
    #[serde(default = "default_workdir")]
    workdir: String,
    prepare: Option<Spanned<String>>,
    run: Option<Spanned<String>>,
    teardown: Option<Spanned<String>>,
    env: Option<Spanned<BTreeMap<String, String>>>,
    connect_timeout: Option<Spanned<TomlDuration>>,
    teardown_timeout: Option<Spanned<TomlDuration>>,
}

fn default_port() -> u16 {
    22
}
fn default_os() -> String {
    "ubuntu".into()
}
fn default_workdir() -> String {
    ".".into()
}

/// No hosts file was given and none exists where one is looked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no hosts file (give --hosts FILE or LESSONPROBE_HOSTS; looked in {})", .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
pub struct NoHostsFile(pub Vec<PathBuf>);

/// Why no authorized host could be had from the hosts file.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    /// Nothing to read: the caller decides whether that is an error.
    #[error(transparent)]
    NotFound(#[from] NoHostsFile),
    #[error("{}: cannot read hosts file: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Malformed or invalid, at file:line:column.
    #[error(transparent)]
    Invalid(#[from] Diagnostic),
    #[error("{}: no host named {name:?} (known: {})", path.display(), known.join(", "))]
    UnknownHost {
        path: PathBuf,
        name: String,
        known: Vec<String>,
    },
    #[error("{}: no hosts", path.display())]
    Empty { path: PathBuf },
}

impl HostsFile {
    /// The hosts file to use: `explicit` (from --hosts or LESSONPROBE_HOSTS), else
    /// `./lessonprobe-hosts.toml`, else `$XDG_CONFIG_HOME/lessonprobe/hosts.toml`
    /// (`~/.config/lessonprobe/hosts.toml`). [`HostsError::NotFound`] names the places looked at.
    pub fn find(explicit: Option<&Path>) -> Result<HostsFile, HostsError> {
        if let Some(path) = explicit {
            return Self::load(path);
        }
        let mut candidates = vec![PathBuf::from("lessonprobe-hosts.toml")];
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        if let Some(dir) = config_home {
            candidates.push(dir.join("lessonprobe/hosts.toml"));
        }
        match candidates.iter().find(|path| path.is_file()) {
            Some(path) => Self::load(path),
            None => Err(NoHostsFile(candidates).into()),
        }
    }

    pub fn load(path: &Path) -> Result<HostsFile, HostsError> {
        let bytes = std::fs::read(path).map_err(|source| HostsError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        let text = Source::decode(path, bytes)?;
        Ok(Self::parse(path, &text)?)
    }

    pub fn parse(path: &Path, text: &str) -> Result<HostsFile, Diagnostic> {
        let src = Source::new(path, text);
        let raw: RawFile = src.toml()?;
        if raw.host.is_empty() {
            return Err(src.error(0..0, "no [[host]] entries"));
        }
        let mut hosts: Vec<AuthorizedHost> = Vec::new();
        for spanned in raw.host {
            let whole = spanned.span();
            let host = host(&src, whole, spanned.into_inner(), &hosts)?;
            hosts.push(host);
        }
        Ok(HostsFile {
            path: path.to_owned(),
            hosts,
        })
    }

    /// The host named `name`, or the first one.
    pub fn pick(&self, name: Option<&str>) -> Result<&AuthorizedHost, HostsError> {
        match name {
            None => self.hosts.first().ok_or_else(|| HostsError::Empty {
                path: self.path.clone(),
            }),
            Some(n) => {
                self.hosts
                    .iter()
                    .find(|h| h.name == n)
                    .ok_or_else(|| HostsError::UnknownHost {
                        path: self.path.clone(),
                        name: n.to_owned(),
                        known: self.hosts.iter().map(|h| h.name.clone()).collect(),
                    })
            }
        }
    }
}

/// One `[[host]]` entry, `whole` its span; `earlier` are the entries before it.
fn host(
    src: &Source<'_>,
    whole: Range<usize>,
    h: RawHost,
    earlier: &[AuthorizedHost],
) -> Result<AuthorizedHost, Diagnostic> {
    let name = host_name(src, &h.name, earlier)?;
    let at = |span: Range<usize>, what: String| src.error(span, format!("host {name}: {what}"));
    for (field, value) in [("address", &h.address), ("user", &h.user)] {
        if value.get_ref().trim().is_empty() {
            return Err(at(value.span(), format!("{field} must not be empty")));
        }
    }
    let identity = match (&h.identity, h.agent) {
        (Some(i), false) => Some(expand_home(i.get_ref())),
        (None, true) => None,
        (Some(i), true) => {
            return Err(at(
                i.span(),
                "give `identity` or `agent = true`, not both".into(),
            ))
        }
        (None, false) => {
            return Err(at(
                whole,
                "needs `identity = \"PATH\"` or `agent = true`".into(),
            ))
        }
    };
    let known_hosts = match &h.known_hosts {
        Some(k) => expand_home(k.get_ref()),
        None => {
            return Err(at(
                whole,
                "needs `known_hosts`: a host is authorized only by a key listed there".into(),
            ))
        }
    };
    for template in [&h.prepare, &h.run, &h.teardown].into_iter().flatten() {
        if let Some(unknown) = unknown_placeholder(template.get_ref()) {
            return Err(at(
                template.span(),
                format!("unknown placeholder {{{unknown}}} (known: {{checkpoint}}, {{selector}}, {{report}})"),
            ));
        }
    }
    if let Some(env) = &h.env {
        if let Some(why) = env.get_ref().iter().find_map(|(k, v)| invalid_env(k, v)) {
            return Err(at(env.span(), why));
        }
    }
    let duration = |field: &Option<Spanned<TomlDuration>>, what: &str, default: u64| match field {
        None => Ok(Duration::from_secs(default)),
        Some(v) => v
            .get_ref()
            .duration()
            .map_err(|e| at(v.span(), format!("{what} {e}"))),
    };
    Ok(AuthorizedHost {
        connect_timeout: duration(&h.connect_timeout, "connect_timeout", 10)?,
        teardown_timeout: duration(&h.teardown_timeout, "teardown_timeout", 30)?,
        address: h.address.into_inner(),
        port: h.port,
        user: h.user.into_inner(),
        identity,
        known_hosts,
        os: h.os,
        workdir: h.workdir,
        prepare: h.prepare.map(Spanned::into_inner),
        run: h
            .run
            .map_or_else(|| DEFAULT_RUN.to_owned(), Spanned::into_inner),
        teardown: h.teardown.map(Spanned::into_inner),
        env: h.env.map(Spanned::into_inner).unwrap_or_default(),
        name,
    })
}

/// A host's name: letters, digits, '-', '_' and '.', unique in the file.
fn host_name(
    src: &Source<'_>,
    name: &Spanned<String>,
    earlier: &[AuthorizedHost],
) -> Result<String, Diagnostic> {
    let text = name.get_ref();
    if text.is_empty()
        || !text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(src.error(
            name.span(),
            format!("host name {text:?} may hold only letters, digits, '-', '_' and '.'"),
        ));
    }
    if earlier.iter().any(|o| o.name == *text) {
        return Err(src.error(name.span(), format!("duplicate host name {text:?}")));
    }
    Ok(text.clone())
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[host]]
name = "ubuntu-ci"
address = "127.0.0.1"
port = 2222
user = "ci"
identity = "/keys/id"
known_hosts = "/keys/known_hosts"
teardown = "rm -f {report}"
"#;

    fn err(text: &str) -> String {
        HostsFile::parse(Path::new("hosts.toml"), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_host_gets_defaults_and_renders_quoted_commands() {
        let file = HostsFile::parse(Path::new("hosts.toml"), GOOD).unwrap();
        let host = file.pick(None).unwrap();
        assert_eq!(
            (host.os.as_str(), host.place()),
            ("ubuntu", "127.0.0.1:2222".to_owned())
        );
        let cmds = host.commands(30, "t.py::x", "/tmp/r.xml");
        assert_eq!(
            cmds.run,
            "python -m pytest 't.py::x' --junitxml='/tmp/r.xml'"
        );
        assert_eq!(cmds.teardown.as_deref(), Some("rm -f '/tmp/r.xml'"));
        assert!(file.pick(Some("other")).is_err());
    }

    #[test]
    fn missing_known_hosts_credentials_and_bad_templates_are_refused_with_a_line() {
        let e = err(&GOOD.replace("known_hosts = \"/keys/known_hosts\"\n", ""));
        assert!(
            e.starts_with("hosts.toml:2:1:") && e.contains("needs `known_hosts`"),
            "{e}"
        );
        let e = err(&GOOD.replace("identity = \"/keys/id\"\n", ""));
        assert!(e.contains("needs `identity"), "{e}");
        let e = err(&GOOD.replace("rm -f {report}", "rm -f {reprot}"));
        assert!(
            e.starts_with("hosts.toml:9:") && e.contains("unknown placeholder {reprot}"),
            "{e}"
        );
        let e = err(&GOOD.replace("port = 2222", "port = \"ssh\""));
        assert!(e.starts_with("hosts.toml:5:"), "{e}");
        let e = err(&format!("{GOOD}{GOOD}"));
        assert!(e.contains("duplicate host name"), "{e}");
        assert!(err(&format!("{GOOD}password = \"x\"\n")).contains("unknown field `password`"));
        let e = err(&format!(
            "{GOOD}env = {{ \"KAFKA-PROFILE\" = \"replay\" }}\n"
        ));
        assert!(
            e.starts_with("hosts.toml:10:") && e.contains("\"KAFKA-PROFILE\""),
            "{e}"
        );
    }

    #[test]
    fn timeouts_are_strings_or_integers_of_seconds_and_errors_name_the_field() {
        let text = format!("{GOOD}connect_timeout = 5\nteardown_timeout = \"1m\"\n");
        let file = HostsFile::parse(Path::new("hosts.toml"), &text).unwrap();
        let host = file.pick(None).unwrap();
        assert_eq!(
            (host.connect_timeout, host.teardown_timeout),
            (Duration::from_secs(5), Duration::from_secs(60))
        );
        let defaults = HostsFile::parse(Path::new("hosts.toml"), GOOD).unwrap();
        assert_eq!(
            defaults.hosts[0].connect_timeout,
            Duration::from_secs(10),
            "the default"
        );
        let e = err(&format!("{GOOD}connect_timeout = \"soon\"\n"));
        assert!(
            e.starts_with(
                "hosts.toml:10:19: host ubuntu-ci: connect_timeout \"soon\" is not a duration"
            ),
            "{e}"
        );
        let e = err(&format!("{GOOD}teardown_timeout = 0\n"));
        assert!(
            e.starts_with("hosts.toml:10:20: host ubuntu-ci: teardown_timeout \"0\": a duration must be positive"),
            "{e}"
        );
    }
}
