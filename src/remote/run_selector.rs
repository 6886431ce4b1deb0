//! One remote selector run: connect and verify, check the OS, make a temp folder, prepare,
//! run under the deadline, fetch the JUnit report, and always tear down and clean up — over a
//! fresh session if the deadline killed the first.

use std::time::{Duration, Instant};

use super::hosts::AuthorizedHost;
use super::selector::quote;
use super::session::{SshSession, StepError};
use super::{junit_in, RemoteError, RemoteReport};

/// What was verified about a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    pub fingerprint: String,
    pub os: String,
}

/// Connects, verifies the host key and the OS; runs nothing else.
pub fn check_host(host: &AuthorizedHost) -> Result<HostFacts, RemoteError> {
    let session = open(host)?;
    session.deadline(Instant::now() + host.connect_timeout);
    let os = check_os(host, &session)?;
    Ok(HostFacts {
        fingerprint: session.fingerprint.clone(),
        os,
    })
}

/// Runs `selector` of `checkpoint` on `host` within `deadline` (teardown has its own bound).
pub fn run_selector(
    host: &AuthorizedHost,
    checkpoint: u32,
    selector: &str,
    deadline: Duration,
) -> Result<RemoteReport, RemoteError> {
    let started = Instant::now();
    let session = open(host)?;
    let step = |session: &SshSession,
                what: &str,
                bound: Instant,
                command: &str|
     -> Result<(String, i32), RemoteError> {
        session.deadline(bound);
        session
            .exec(command)
            .map_err(|e| error(host, format!("{what}: {}", e.reason), None, String::new()))
    };
    let short = Instant::now() + host.connect_timeout;
    let os = check_os(host, &session)?;
    let facts = HostFacts {
        fingerprint: session.fingerprint.clone(),
        os,
    };
    let (tmp, status) = step(
        &session,
        "creating a temp folder",
        short,
        "mktemp -d /tmp/lessonprobe.XXXXXX",
    )?;
    let tmp = tmp.trim().to_owned();
    if status != 0 || !tmp.starts_with("/tmp/lessonprobe.") {
        return Err(error(
            host,
            format!("mktemp failed ({status}): {tmp}"),
            Some(facts),
            String::new(),
        ));
    }
    let report = format!("{tmp}/report.xml");
    let pidfile = format!("{tmp}/run.pid");
    let commands = host.commands(checkpoint, selector, &report);
    let cd = format!("cd {} && ", quote(&host.workdir));
    let end = started + deadline;

    let outcome = (|| {
        if let Some(prepare) = &commands.prepare {
            let (out, status) = step(&session, "prepare", end, &format!("{cd}{prepare}"))?;
            if status != 0 {
                return Err(error(
                    host,
                    format!("prepare exited with status {status}"),
                    Some(facts.clone()),
                    out,
                ));
            }
        }
        // Its own session and process group, so teardown can kill whatever it leaves behind.
        let wrapped = format!(
            "{cd}setsid -w sh -c 'echo $$ > \"$1\"; exec sh -c \"$2\"' lessonprobe-run {} {}",
            quote(&pidfile),
            quote(&commands.run)
        );
        session.deadline(end);
        let (output, status) = match session.exec(&wrapped) {
            Ok(done) => done,
            Err(StepError {
                timed_out: true, ..
            }) => {
                return Err(error(
                    host,
                    format!(
                        "deadline of {} exceeded while running the selector",
                        humantime::format_duration(deadline)
                    ),
                    Some(facts.clone()),
                    String::new(),
                ))
            }
            Err(e) => {
                return Err(error(
                    host,
                    format!("run: {}", e.reason),
                    Some(facts.clone()),
                    String::new(),
                ))
            }
        };
        session.deadline(Instant::now() + host.connect_timeout);
        let xml = session.read_file(&report).map_err(|e| {
            error(
                host,
                format!("fetching {report}: {}", e.reason),
                Some(facts.clone()),
                output.clone(),
            )
        })?;
        let Some(xml) = xml else {
            return Err(error(
                host,
                format!("selector matched nothing on {}: no report was written (run exited with status {status})", host.name),
                Some(facts.clone()),
                output,
            ));
        };
        let cases = junit_in::cases(&xml)
            .map_err(|e| error(host, e, Some(facts.clone()), output.clone()))?;
        if cases.is_empty() {
            return Err(error(
                host,
                format!("selector matched nothing on {}", host.name),
                Some(facts.clone()),
                output,
            ));
        }
        Ok(RemoteReport {
            facts: facts.clone(),
            cases,
            output,
        })
    })();

    teardown(
        host,
        session,
        &cd,
        commands.teardown.as_deref(),
        &pidfile,
        &tmp,
    );
    outcome
}

/// Kills what the run left, runs the teardown command, removes the temp folder. Uses a fresh
/// session when the first one was shut by the deadline. Failures are logged: the outcome of
/// the run stands.
fn teardown(
    host: &AuthorizedHost,
    session: SshSession,
    cd: &str,
    command: Option<&str>,
    pidfile: &str,
    tmp: &str,
) {
    let session = if session.is_dead() {
        drop(session);
        match SshSession::open(host) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(
                    "{}: teardown could not reconnect: {}",
                    host.place(),
                    e.reason
                );
                return;
            }
        }
    } else {
        session
    };
    session.deadline(Instant::now() + host.teardown_timeout);
    let kill = format!(
        "[ -f {p} ] && kill -KILL -- -$(cat {p}) 2>/dev/null; true",
        p = quote(pidfile)
    );
    let mut steps = vec![kill];
    if let Some(command) = command {
        steps.push(format!("{cd}{command}"));
    }
    steps.push(format!("rm -rf {}", quote(tmp)));
    for step in steps {
        match session.exec(&step) {
            Ok((_, 0)) => {}
            Ok((out, status)) => tracing::warn!(
                "{}: teardown step exited {status}: {}",
                host.place(),
                out.trim()
            ),
            Err(e) => tracing::warn!("{}: teardown step failed: {}", host.place(), e.reason),
        }
    }
}

fn open(host: &AuthorizedHost) -> Result<SshSession, RemoteError> {
    SshSession::open(host).map_err(|e| error(host, e.reason, None, String::new()))
}

fn check_os(host: &AuthorizedHost, session: &SshSession) -> Result<String, RemoteError> {
    session.deadline(Instant::now() + host.connect_timeout);
    let (text, _) = session.exec("cat /etc/os-release").map_err(|e| {
        error(
            host,
            format!("reading /etc/os-release: {}", e.reason),
            None,
            String::new(),
        )
    })?;
    let id = text
        .lines()
        .find_map(|l| l.strip_prefix("ID="))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_default();
    if id != host.os {
        return Err(error(
            host,
            format!(
                "expected OS {:?}, the host reports {:?} in /etc/os-release",
                host.os, id
            ),
            None,
            String::new(),
        ));
    }
    Ok(id)
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
