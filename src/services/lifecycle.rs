//! A run's started services: each started through the shell in a process group of its own,
//! its output in a log kept with the run, waited for until ready, and stopped (its signal,
//! then KILL of the whole group after `stop_timeout`) with its `{data}` folder removed.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::declaration::{expand, Ready, Service};

/// How often a starting service is looked at, and the most one ready command may take.
const POLL: Duration = Duration::from_millis(100);
const READY_COMMAND_LIMIT: Duration = Duration::from_secs(2);
/// Lines of a service's log shown when it does not start.
const LOG_LINES: usize = 5;

/// A service that could not be started or made ready.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("service {name}: cannot write its log {}: {source}", log.display())]
    Log {
        name: String,
        log: PathBuf,
        source: std::io::Error,
    },
    #[error("service {name}: cannot start `{command}`: {source}")]
    Spawn {
        name: String,
        command: String,
        source: std::io::Error,
    },
    #[error("service {name}: `{command}` {how}; its log {}{}", log.display(), shown(tail))]
    Exited {
        name: String,
        command: String,
        how: String,
        log: PathBuf,
        tail: String,
    },
    #[error("service {name}: not ready within {} (ready: {ready}); its log {}{}", humantime::format_duration(*limit), log.display(), shown(tail))]
    NeverReady {
        name: String,
        ready: String,
        limit: Duration,
        log: PathBuf,
        tail: String,
    },
}

impl StartError {
    /// What to do about it.
    pub fn fix(&self) -> String {
        match self {
            StartError::Log { .. } => "make the course's .lessonprobe folder writable".into(),
            StartError::Exited { how, .. } if how.contains("not found") => {
                "install the program, or correct start in lessonprobe.toml's [services]".into()
            }
            _ => "read its log, then correct start, ready or ready_timeout in lessonprobe.toml's [services]".into(),
        }
    }
}

fn shown(tail: &str) -> String {
    match tail.trim() {
        "" => " is empty".into(),
        t => format!(" ends: {}", t.lines().collect::<Vec<_>>().join(" | ")),
    }
}

/// The process groups of the services this process has started and not yet stopped, for the
/// signal handler: a second Ctrl-C ends the process at once, and must not leave them running.
/// A slot holds a group id, or 0.
static GROUPS: [AtomicI32; 64] = [const { AtomicI32::new(0) }; 64];

fn remember(group: libc::pid_t) {
    if !GROUPS.iter().any(|slot| {
        slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }) {
        tracing::warn!("more than {} services at once: a second Ctrl-C may leave process group {group} running", GROUPS.len());
    }
}

fn forget(group: libc::pid_t) {
    for slot in &GROUPS {
        let _ = slot.compare_exchange(group, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Kills the process group of every service still running, at once. Only atomics and
/// `killpg`, both async-signal-safe: the signal handler calls it before the process exits
/// (their `{data}` folders stay behind in the temporary folder).
pub fn kill_all_now() {
    for slot in &GROUPS {
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            // SAFETY: killpg only sends a signal to a group this process started.
            unsafe { libc::killpg(group, libc::SIGKILL) };
        }
    }
}

/// One started service.
struct Started {
    child: Child,
    /// The leader's pid, which is its process group's id.
    group: libc::pid_t,
    service: Service,
    log: PathBuf,
    /// Its `{data}` folder, removed when it is stopped.
    data: Option<tempfile::TempDir>,
    /// Its `env`, with the templates filled in.
    env: BTreeMap<String, String>,
}

impl Started {
    /// Why it is no longer running, if it is not.
    fn ended(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends its stop signal to its group, waits up to `stop_timeout`, then kills the group.
    fn stop(&mut self) {
        if self.ended().is_none() {
            // SAFETY: killpg only sends a signal to the group this service leads.
            unsafe { libc::killpg(self.group, self.service.stop.number) };
            let until = Instant::now() + self.service.stop_timeout;
            while self.ended().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // What the leader left in its group goes too, whether it stopped in time or not.
        // SAFETY: as above.
        unsafe { libc::killpg(self.group, libc::SIGKILL) };
        forget(self.group);
        let _ = self.child.wait();
        if let Some(data) = self.data.take() {
            let _ = data.close();
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The services a run has started, by name; each is stopped by [`Running::stop_all`] or when
/// this is dropped.
pub struct Running {
    /// Where each service's log is written, as `NAME.log`.
    logs: PathBuf,
    started: Mutex<BTreeMap<String, Started>>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("logs", &self.logs)
            .finish_non_exhaustive()
    }
}

impl Running {
    /// None started yet; their logs to go in `dir`'s `.lessonprobe/services/`. A run keeps
    /// them in the folder it runs in, beside its other state: the course checkout is never
    /// written to.
    pub fn in_folder(dir: &Path) -> Running {
        Running::new(dir.join(crate::history::FOLDER).join("services"))
    }

    pub fn new(logs: PathBuf) -> Running {
        Running {
            logs,
            started: Mutex::new(BTreeMap::new()),
        }
    }

    /// Starts `service` and waits until it is ready (a port taken between the pick and the
    /// start is picked again, once); one already started is left as it is.
    pub fn start(&self, service: &Service) -> Result<(), StartError> {
        if self.lock().contains_key(&service.name) {
            return Ok(());
        }
        let started = match launch(service, &self.logs) {
            Err(Launch::PortTaken) => launch(service, &self.logs),
            other => other,
        }
        .map_err(|e| match e {
            Launch::Failed(e) => e,
            Launch::PortTaken => port_taken_twice(service, &self.logs),
        })?;
        self.lock().insert(service.name.clone(), started);
        Ok(())
    }

    /// The variables the probes needing `names` see.
    pub fn env(&self, names: &[String]) -> BTreeMap<String, String> {
        let started = self.lock();
        names
            .iter()
            .filter_map(|n| started.get(n))
            .flat_map(|s| s.env.clone())
            .collect()
    }

    /// The first of `names` that was started and has since ended by itself, as a message.
    pub fn dead(&self, names: &[String]) -> Option<String> {
        let mut started = self.lock();
        names.iter().find_map(|n| {
            let s = started.get_mut(n)?;
            let status = s.ended()?;
            Some(format!(
                "service {n} ended by itself during the run ({status}); its log {}{}",
                s.log.display(),
                shown(&last_lines(&s.log))
            ))
        })
    }

    /// Stops every started service and removes their data folders.
    pub fn stop_all(&self) {
        let stopping = std::mem::take(&mut *self.lock());
        // Each waits up to its own stop_timeout: stopped side by side.
        std::thread::scope(|scope| {
            for (_, mut s) in stopping {
                scope.spawn(move || s.stop());
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Started>> {
        // A panic while holding the lock leaves the map whole: keep using it.
        self.started.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_all();
    }
}

enum Launch {
    Failed(StartError),
    /// It ended before it was ready and something else accepts on its port.
    PortTaken,
}

fn port_taken_twice(service: &Service, logs: &Path) -> StartError {
    let log = logs.join(format!("{}.log", service.name));
    StartError::Exited {
        name: service.name.clone(),
        command: service.start.clone(),
        how: "ended twice while another program took the port picked for it".into(),
        tail: last_lines(&log),
        log,
    }
}

/// Starts `service` once on a freshly picked port and waits until it is ready.
fn launch(service: &Service, logs: &Path) -> Result<Started, Launch> {
    let name = service.name.clone();
    let log = logs.join(format!("{name}.log"));
    let log_error = |source| {
        Launch::Failed(StartError::Log {
            name: name.clone(),
            log: log.clone(),
            source,
        })
    };
    std::fs::create_dir_all(logs).map_err(log_error)?;
    let out = File::create(&log).map_err(log_error)?;
    let err = out.try_clone().map_err(log_error)?;
    let data = tempfile::Builder::new()
        .prefix(&format!("lessonprobe-service-{name}-"))
        .tempdir()
        .map_err(log_error)?;
    let port = free_port().map_err(log_error)?;
    let folder = data.path().to_string_lossy().into_owned();
    let fill = |template: &str| expand(template, port, &folder, &name);
    let command = fill(&service.start);
    let child = Command::new("sh")
        .args(["-c", &command])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|source| {
            Launch::Failed(StartError::Spawn {
                name: name.clone(),
                command: command.clone(),
                source,
            })
        })?;
    remember(child.id() as libc::pid_t);
    let mut started = Started {
        group: child.id() as libc::pid_t,
        child,
        service: service.clone(),
        log: log.clone(),
        data: Some(data),
        env: BTreeMap::new(),
    };
    let ready = match &service.ready {
        Ready::Tcp => None,
        Ready::Command(template) => Some(fill(template)),
    };
    let until = Instant::now() + service.ready_timeout;
    loop {
        if let Some(status) = started.ended() {
            // Dropping `started` kills what it left and removes its data folder.
            if accepts(port) {
                return Err(Launch::PortTaken);
            }
            let how = match status.code() {
                Some(127) => "was not found (the shell's status 127)".to_owned(),
                _ => format!("ended before it was ready ({status})"),
            };
            return Err(Launch::Failed(StartError::Exited {
                name,
                command,
                how,
                tail: last_lines(&log),
                log,
            }));
        }
        let answer = match &ready {
            None => accepts(port).then(String::new),
            Some(command) => ready_command(command, until),
        };
        if let Some(answer) = answer {
            // `{ready}`: what the ready command printed, for a service that learns its address
            // only once it runs (the embedded Kafka cluster).
            started.env = service
                .env
                .iter()
                .map(|(k, v)| (k.clone(), fill(v).replace("{ready}", answer.trim())))
                .collect();
            return Ok(started);
        }
        if Instant::now() >= until {
            return Err(Launch::Failed(StartError::NeverReady {
                name,
                ready: ready.unwrap_or_else(|| format!("tcp 127.0.0.1:{port}")),
                limit: service.ready_timeout,
                tail: last_lines(&log),
                log,
            }));
        }
        std::thread::sleep(POLL);
    }
}

/// What `command` printed, when it exits with status 0 before `until` (and within its own
/// limit).
fn ready_command(command: &str, until: Instant) -> Option<String> {
    let left = until.saturating_duration_since(Instant::now());
    let args = ["-c".to_owned(), command.to_owned()];
    crate::process::run(
        "sh",
        &args,
        Path::new("/"),
        &BTreeMap::new(),
        left.min(READY_COMMAND_LIMIT),
        &Cancel::new(),
    )
    .ok()
    .filter(|done| done.status.is_some_and(|s| s.success()))
    .map(|done| done.stdout.text)
}

/// A loopback port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// The last lines of a log, or nothing when it cannot be read.
fn last_lines(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(LOG_LINES)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::{Ready, StopSignal};

    /// No service started yet, logging in a folder of its own.
    fn running() -> (tempfile::TempDir, Running) {
        let logs = tempfile::tempdir().unwrap();
        let running = Running::new(logs.path().to_owned());
        (logs, running)
    }

    fn service(start: &str, ready: Ready) -> Service {
        Service {
            name: "s".into(),
            start: start.into(),
            ready,
            ready_timeout: Duration::from_secs(2),
            env: BTreeMap::from([("S_PORT".to_owned(), "{port}".to_owned())]),
            stop: StopSignal {
                name: "TERM",
                number: libc::SIGTERM,
            },
            stop_timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_service_starts_gets_its_env_and_stops_with_its_data_folder() {
        let (logs, running) = running();
        let s = service(
            "touch {data}/here; echo started; exec sleep 30",
            Ready::Command("test -f {data}/here".into()),
        );
        running.start(&s).unwrap();
        let env = running.env(&["s".into()]);
        assert!(env["S_PORT"].parse::<u16>().is_ok(), "{env:?}");
        let data = running.lock()["s"].data.as_ref().unwrap().path().to_owned();
        assert!(data.join("here").exists());
        assert_eq!(running.dead(&["s".into()]), None);
        running.stop_all();
        assert!(!data.exists(), "the data folder is removed");
        let log = std::fs::read_to_string(logs.path().join("s.log")).unwrap();
        assert_eq!(log, "started\n");
    }

    #[test]
    fn what_the_ready_command_prints_is_the_env_placeholder_ready() {
        let (_logs, running) = running();
        let mut s = service("exec sleep 30", Ready::Command("echo 127.0.0.1:7".into()));
        s.env = BTreeMap::from([("BOOT".to_owned(), "{ready}".to_owned())]);
        running.start(&s).unwrap();
        assert_eq!(running.env(&["s".into()])["BOOT"], "127.0.0.1:7");
    }

    #[test]
    fn a_start_not_found_exiting_or_never_ready_is_an_error_with_its_log() {
        let (logs, running) = running();
        let e = running
            .start(&service("no-such-program-here", Ready::Tcp))
            .unwrap_err();
        assert!(e.to_string().contains("was not found"), "{e}");
        assert!(e.fix().starts_with("install the program"), "{}", e.fix());
        let e = running
            .start(&service("echo bye; exit 3", Ready::Tcp))
            .unwrap_err();
        assert!(e.to_string().contains("exit status: 3"), "{e}");
        assert!(e.to_string().ends_with("ends: bye"), "{e}");
        let e = running
            .start(&service(
                "echo {data}; exec sleep 30",
                Ready::Command("false".into()),
            ))
            .unwrap_err();
        assert!(
            e.to_string().contains("not ready within 2s (ready: false)"),
            "{e}"
        );
        assert!(running.lock().is_empty());
        let data = std::fs::read_to_string(logs.path().join("s.log")).unwrap();
        assert!(
            !Path::new(data.trim()).exists(),
            "a failed start left its data folder {data}"
        );
    }

    #[test]
    fn a_service_ignoring_its_stop_signal_is_killed_after_stop_timeout() {
        let (_logs, running) = running();
        let stubborn = service(
            "trap '' TERM; while true; do sleep 0.1; done",
            Ready::Command("true".into()),
        );
        running.start(&stubborn).unwrap();
        let leader = running.lock()["s"].group;
        let started = Instant::now();
        running.stop_all();
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "not waited for"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            living_in_group(leader),
            0,
            "its group outlived stop_timeout"
        );
    }

    /// Processes of group `group` that are not zombies (killed children wait for a reaper).
    fn living_in_group(group: libc::pid_t) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("stat")).ok())
            .filter(|stat| {
                // After the command's closing parenthesis: state, ppid, pgrp.
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
                fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
            })
            .count()
    }

    #[test]
    fn a_service_ending_by_itself_is_told() {
        let (_logs, running) = running();
        let s = service("sleep 0.5; echo gone", Ready::Command("true".into()));
        running.start(&s).unwrap();
        std::thread::sleep(Duration::from_millis(900));
        let dead = running.dead(&["s".into()]).unwrap();
        assert!(dead.starts_with("service s ended by itself"), "{dead}");
        assert!(dead.ends_with("ends: gone"), "{dead}");
    }
}
