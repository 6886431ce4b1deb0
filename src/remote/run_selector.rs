//! One remote selector run under one deadline — connect and verify, check the OS, make a temp
//! folder, prepare, run, fetch the JUnit report — then always teardown and cleanup, over a
//! fresh connection when the first one failed. Prepare, run and teardown each lead a process group
//! of their own that the host kills at their deadline, so nothing they start outlives the run.

use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::hosts::AuthorizedHost;
use super::selector::{quote, CommandSet};
use super::ssh::{Deadline, SshConnection, StepError};
use super::{junit_in, RemoteError, RemoteReport};

/// How long after this side's deadline the host kills prepare and run by itself: late enough
/// that this side reports the deadline, soon enough that nothing lingers if this side is gone.
const HOST_KILL_GRACE: Duration = Duration::from_secs(1);

/// What was verified about a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub fingerprint: String,
    pub os: String,
}

/// Connects, verifies the host key and the OS, within the connect timeout; runs nothing else.
pub fn check_host(host: &AuthorizedHost) -> Result<HostFacts, RemoteError> {
    let connection = open(host, &connect_timeout(host))?;
    check_os(host, &connection, &connect_timeout(host))
}

/// The preflight's check of `host`: [`check_host`] within `limit`, or within the host's own
/// connect timeout when that is shorter.
pub fn answers(host: &AuthorizedHost, limit: Duration) -> Result<(), RemoteError> {
    let mut host = host.clone();
    host.connect_timeout = host.connect_timeout.min(limit);
    check_host(&host).map(drop)
}

/// What to do when a host fails [`answers`].
pub const UNANSWERED_FIX: &str = "check the host is up and its key is the one in known_hosts \
                                  (lessonprobe hosts check says more)";

/// Runs `selector` of `checkpoint` on `host`. `deadline` bounds everything up to the fetched
/// report, connecting included, and `cancel` cuts it short; teardown has its own bound and
/// runs either way.
pub fn run_selector(
    host: &AuthorizedHost,
    checkpoint: u32,
    selector: &str,
    deadline: Duration,
    cancel: &Cancel,
) -> Result<RemoteReport, RemoteError> {
    let end = Deadline::after(deadline, "the deadline").or_cancelled(cancel);
    let connection = open(host, &end)?;
    // Steps that should answer at once get the connect timeout, within the deadline.
    let quick = || end.clone().or(connect_timeout(host));
    let facts = check_os(host, &connection, &quick())?;
    let made = connection
        .exec(
            "creating a temp folder",
            "mktemp -d /tmp/lessonprobe.XXXXXX",
            &quick(),
        )
        .map_err(|cut| error(host, cut.error.to_string(), Some(facts.clone()), cut.output))?;
    let path = made.output.trim();
    if made.status != 0 || !path.starts_with("/tmp/lessonprobe.") || path.contains('\n') {
        return Err(error(
            host,
            format!("mktemp failed ({}): {path}", made.status),
            Some(facts),
            String::new(),
        ));
    }
    let folder = TempFolder(path.to_owned());
    let commands = host.commands(checkpoint, selector, &folder.file("report.xml"));
    let outcome = prepare_run_fetch(host, &connection, &folder, &commands, &end, &facts);
    teardown(host, connection, &folder, &commands);
    outcome
}

/// The run's remote temp folder: the report and each command's process-group id live there.
struct TempFolder(String);

impl TempFolder {
    fn file(&self, name: &str) -> String {
        format!("{}/{name}", self.0)
    }

    /// A shell command that kills the process group of every command started in this folder.
    fn kill_groups(&self) -> String {
        format!(
            "for f in {}/*.pid; do [ -f \"$f\" ] && kill -KILL -- \"-$(cat \"$f\")\"; done 2>/dev/null; true",
            quote(&self.0)
        )
    }
}

/// `command` in the host's workdir with its variables, started by `setsid`, leading a new
/// process group whose id goes to `pidfile`. The host kills the whole group after `limit` by
/// itself (`timeout` signals its own group), so it ends even when this side cannot reconnect;
/// teardown kills it again by its id.
fn in_own_group(
    host: &AuthorizedHost,
    env: &str,
    pidfile: &str,
    limit: Duration,
    command: &str,
) -> String {
    // `timeout 0` would mean no limit at all.
    let millis = limit.as_millis().max(1);
    let env = match env {
        "" => String::new(),
        vars => format!("env {vars} "),
    };
    format!(
        "cd {} && setsid -w {env}sh -c 'echo $$ > \"$1\" && exec timeout -s KILL \"$2\" sh -c \"$3\"' lessonprobe {} {}.{:03}s {}",
        quote(&host.workdir),
        quote(pidfile),
        millis / 1000,
        millis % 1000,
        quote(command)
    )
}

fn prepare_run_fetch(
    host: &AuthorizedHost,
    connection: &SshConnection,
    folder: &TempFolder,
    commands: &CommandSet,
    end: &Deadline,
    facts: &HostFacts,
) -> Result<RemoteReport, RemoteError> {
    let fail = |reason: String, output: String| error(host, reason, Some(facts.clone()), output);
    let step = |doing: &str, pidfile: &str, command: &str| {
        let limit = end.remaining() + HOST_KILL_GRACE;
        let wrapped = in_own_group(host, &commands.env, &folder.file(pidfile), limit, command);
        connection
            .exec(doing, &wrapped, end)
            .map_err(|cut| fail(cut.error.to_string(), cut.output))
    };
    if let Some(prepare) = &commands.prepare {
        let ran = step("preparing", "prepare.pid", prepare)?;
        if ran.status != 0 {
            return Err(fail(
                format!("prepare exited with status {}", ran.status),
                ran.output,
            ));
        }
    }
    let ran = step("running the selector", "run.pid", &commands.run)?;
    let report = folder.file("report.xml");
    let xml = connection
        .read_file(&report, &end.clone().or(connect_timeout(host)))
        .map_err(|e| fail(e.to_string(), ran.output.clone()))?;
    let Some(xml) = xml else {
        return Err(fail(
            format!(
                "selector matched nothing on {}: no report was written (run exited with status {})",
                host.name, ran.status
            ),
            ran.output,
        ));
    };
    let cases = junit_in::cases(&xml).map_err(|e| fail(e, ran.output.clone()))?;
    if cases.is_empty() {
        return Err(fail(
            format!("selector matched nothing on {}", host.name),
            ran.output,
        ));
    }
    Ok(RemoteReport {
        facts: facts.clone(),
        cases,
        output: ran.output,
    })
}

/// Kills every process group the run started, runs the teardown command in a group of its own
/// under the teardown timeout, kills what it left, and removes the temp folder. A connection that
/// failed is replaced by a fresh one, and a teardown that fails midway is finished on another;
/// the teardown command runs at most once. Problems are logged: the outcome of the run stands.
fn teardown(
    host: &AuthorizedHost,
    connection: SshConnection,
    folder: &TempFolder,
    commands: &CommandSet,
) {
    let mut connection = Some(connection).filter(|s| !s.is_broken());
    let mut command = commands.teardown.as_deref();
    for attempt in 1..=2 {
        let current = match connection.take() {
            Some(s) => s,
            None => match SshConnection::open(host, &connect_timeout(host)) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        "{}: teardown could not reconnect ({e}): {} is left behind, and what the run started there ends only at its own deadline",
                        host.place(),
                        folder.0
                    );
                    return;
                }
            },
        };
        match teardown_on(host, &current, folder, &commands.env, &mut command) {
            Ok(()) => return,
            Err(e) if attempt == 1 => tracing::warn!(
                "{}: teardown: {e}; finishing it over a new connection",
                host.place()
            ),
            Err(e) => tracing::warn!("{}: teardown: {e}", host.place()),
        }
    }
}

fn teardown_on(
    host: &AuthorizedHost,
    connection: &SshConnection,
    folder: &TempFolder,
    env: &str,
    command: &mut Option<&str>,
) -> Result<(), StepError> {
    let exec = |doing: &str, script: &str, limit: &Deadline| {
        connection
            .exec(doing, script, limit)
            .map_err(|cut| cut.error)
    };
    exec(
        "stopping what the run started",
        &folder.kill_groups(),
        &connect_timeout(host),
    )?;
    if let Some(teardown) = command.take() {
        let wrapped = in_own_group(
            host,
            env,
            &folder.file("teardown.pid"),
            host.teardown_timeout,
            teardown,
        );
        // The host kills the teardown at its timeout; this side waits a connect timeout more
        // for that answer, so the folder can still be removed over this connection.
        let limit = Deadline::after(host.teardown_timeout, "the teardown timeout")
            .extended(host.connect_timeout);
        let started = Instant::now();
        let ran = exec("tearing down", &wrapped, &limit)?;
        if ran.status != 0 {
            let why = if ran.status == 137 && started.elapsed() >= host.teardown_timeout {
                format!(
                    "killed at the teardown timeout of {}",
                    humantime::format_duration(host.teardown_timeout)
                )
            } else {
                format!("exited with status {}", ran.status)
            };
            tracing::warn!("{}: teardown {why}: {}", host.place(), ran.output.trim());
        }
        exec(
            "stopping what the teardown started",
            &folder.kill_groups(),
            &connect_timeout(host),
        )?;
    }
    let ran = exec(
        "removing the temp folder",
        &format!("rm -rf {}", quote(&folder.0)),
        &connect_timeout(host),
    )?;
    if ran.status != 0 {
        tracing::warn!(
            "{}: removing {} exited with status {}: {}",
            host.place(),
            folder.0,
            ran.status,
            ran.output.trim()
        );
    }
    Ok(())
}

fn connect_timeout(host: &AuthorizedHost) -> Deadline {
    Deadline::after(host.connect_timeout, "the connect timeout")
}

fn open(host: &AuthorizedHost, deadline: &Deadline) -> Result<SshConnection, RemoteError> {
    SshConnection::open(host, deadline).map_err(|e| error(host, e.to_string(), None, String::new()))
}

/// The host's OS as /etc/os-release names it; another than the host entry expects is an error
/// that still carries what was verified.
fn check_os(
    host: &AuthorizedHost,
    connection: &SshConnection,
    limit: &Deadline,
) -> Result<HostFacts, RemoteError> {
    let ran = connection
        .exec("reading /etc/os-release", "cat /etc/os-release", limit)
        .map_err(|cut| error(host, cut.error.to_string(), None, cut.output))?;
    let id = ran
        .output
        .lines()
        .find_map(|l| l.strip_prefix("ID="))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_default();
    let facts = HostFacts {
        fingerprint: connection.fingerprint.clone(),
        os: id,
    };
    if facts.os != host.os {
        return Err(error(
            host,
            format!(
                "expected OS {:?}, the host reports {:?} in /etc/os-release",
                host.os, facts.os
            ),
            Some(facts),
            String::new(),
        ));
    }
    Ok(facts)
}

fn error(
    host: &AuthorizedHost,
    reason: String,
    facts: Option<HostFacts>,
    output: String,
) -> RemoteError {
    RemoteError {
        place: format!("{} ({})", host.place(), host.name),
        reason,
        facts,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_in_its_own_group_is_quoted_and_limited() {
        let host = crate::remote::HostsFile::parse(
            std::path::Path::new("hosts.toml"),
            "[[host]]\nname = \"h\"\naddress = \"a\"\nuser = \"u\"\nagent = true\nknown_hosts = \"k\"\nworkdir = \"/srv/it's\"\n",
        )
        .unwrap()
        .hosts
        .remove(0);
        let cmd = in_own_group(
            &host,
            "K='v'",
            "/tmp/lessonprobe.x/run.pid",
            Duration::from_millis(2500),
            "pytest 'a b'",
        );
        assert_eq!(
            cmd,
            "cd '/srv/it'\\''s' && setsid -w env K='v' sh -c 'echo $$ > \"$1\" && exec timeout -s KILL \"$2\" sh -c \"$3\"' lessonprobe '/tmp/lessonprobe.x/run.pid' 2.500s 'pytest '\\''a b'\\'''"
        );
        assert_eq!(
            in_own_group(&host, "", "p", Duration::ZERO, "x"),
            "cd '/srv/it'\\''s' && setsid -w sh -c 'echo $$ > \"$1\" && exec timeout -s KILL \"$2\" sh -c \"$3\"' lessonprobe 'p' 0.001s 'x'"
        );
    }
}
