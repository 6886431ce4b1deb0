//! Authorized hosts: the TOML file that lists them, its validation with file:line errors, and
//! where it is looked for.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::selector::{render, unknown_placeholder, CommandSet};
use crate::exit::Error;

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
    pub connect_timeout: Duration,
    pub teardown_timeout: Duration,
}

impl AuthorizedHost {
    /// `address:port`, as messages name it.
    pub fn place(&self) -> String {
        format!("{}:{}", self.address, self.port)
    }

    /// The commands a run of `selector` for `checkpoint` would execute, writing `report`.
    pub fn commands(&self, checkpoint: u32, selector: &str, report: &str) -> CommandSet {
        CommandSet {
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
    connect_timeout: Option<Spanned<String>>,
    teardown_timeout: Option<Spanned<String>>,
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

impl HostsFile {
    /// The hosts file to use: `explicit` (from --hosts or LESSONPROBE_HOSTS), else
    /// `./lessonprobe-hosts.toml`, else `$XDG_CONFIG_HOME/lessonprobe/hosts.toml`
    /// (`~/.config/lessonprobe/hosts.toml`). The inner error names the places looked at.
    pub fn find(explicit: Option<&Path>) -> Result<Result<HostsFile, NoHostsFile>, Error> {
        if let Some(path) = explicit {
            return Self::load(path).map(Ok);
        }
        let mut candidates = vec![PathBuf::from("lessonprobe-hosts.toml")];
        let config_home = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
        if let Some(dir) = config_home {
            candidates.push(dir.join("lessonprobe/hosts.toml"));
        }
        for path in &candidates {
            if path.is_file() {
                return Self::load(path).map(Ok);
            }
        }
        Ok(Err(NoHostsFile(candidates)))
    }

    pub fn load(path: &Path) -> Result<HostsFile, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(path, format!("cannot read hosts file: {e}")))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<HostsFile, Error> {
        let at = |span: std::ops::Range<usize>, message: String| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Error::Manifest {
                path: path.to_owned(),
                line,
                column,
                message,
            }
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| match e.span() {
            Some(span) => at(span, e.message().to_owned()),
            None => at(0..0, e.message().to_owned()),
        })?;
        if raw.host.is_empty() {
            return Err(at(0..0, "no [[host]] entries".into()));
        }
        let mut hosts: Vec<AuthorizedHost> = Vec::new();
        for spanned in raw.host {
            let whole = spanned.span();
            let h = spanned.into_inner();
            let name = h.name.get_ref().clone();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(at(
                    h.name.span(),
                    format!("host name {name:?} may hold only letters, digits, '-', '_' and '.'"),
                ));
            }
            if hosts.iter().any(|o| o.name == name) {
                return Err(at(h.name.span(), format!("duplicate host name {name:?}")));
            }
            if h.address.get_ref().trim().is_empty() {
                return Err(at(
                    h.address.span(),
                    format!("host {name}: address must not be empty"),
                ));
            }
            if h.user.get_ref().trim().is_empty() {
                return Err(at(
                    h.user.span(),
                    format!("host {name}: user must not be empty"),
                ));
            }
            let identity = match (&h.identity, h.agent) {
                (Some(i), false) => Some(expand_home(i.get_ref())),
                (None, true) => None,
                (Some(i), true) => {
                    return Err(at(
                        i.span(),
                        format!("host {name}: give `identity` or `agent = true`, not both"),
                    ))
                }
                (None, false) => {
                    return Err(at(
                        whole,
                        format!("host {name}: needs `identity = \"PATH\"` or `agent = true`"),
                    ))
                }
            };
            let known_hosts = match &h.known_hosts {
                Some(k) => expand_home(k.get_ref()),
                None => {
                    return Err(at(whole, format!("host {name}: needs `known_hosts`: a host is authorized only by a key listed there")))
                }
            };
            for template in [&h.prepare, &h.run, &h.teardown].into_iter().flatten() {
                if let Some(unknown) = unknown_placeholder(template.get_ref()) {
                    return Err(at(
                        template.span(),
                        format!("host {name}: unknown placeholder {{{unknown}}} (known: {{checkpoint}}, {{selector}}, {{report}})"),
                    ));
                }
            }
            let duration =
                |field: &Option<Spanned<String>>, default: u64| -> Result<Duration, Error> {
                    match field {
                        None => Ok(Duration::from_secs(default)),
                        Some(v) => crate::config::duration::parse(v.get_ref())
                            .map_err(|e| at(v.span(), format!("host {name}: {e}"))),
                    }
                };
            hosts.push(AuthorizedHost {
                connect_timeout: duration(&h.connect_timeout, 10)?,
                teardown_timeout: duration(&h.teardown_timeout, 30)?,
                name,
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
            });
        }
        Ok(HostsFile {
            path: path.to_owned(),
            hosts,
        })
    }

    /// The host named `name`, or the first one.
    pub fn pick(&self, name: Option<&str>) -> Result<&AuthorizedHost, Error> {
        match name {
            None => self
                .hosts
                .first()
                .ok_or_else(|| Error::Usage(format!("{}: no hosts", self.path.display()))),
            Some(n) => self.hosts.iter().find(|h| h.name == n).ok_or_else(|| {
                let known: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
                Error::Usage(format!(
                    "{}: no host named {n:?} (known: {})",
                    self.path.display(),
                    known.join(", ")
                ))
            }),
        }
    }
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
    }
}
