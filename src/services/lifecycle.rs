//! A run's started services: each started through the shell in a process group of its own,
//! its output in a log kept with the run, waited for until ready, and stopped (its signal,
//! then KILL of the whole group after `stop_timeout`) with its `{data}` folder removed.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::declaration::expand;
use super::service::{Ready, Service};

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

/// What a lesson's fault steps act on: the run's started services, by name. Each call returns
/// once done: stopped (the process group gone), or started and ready.
pub trait Faults: Sync + std::fmt::Debug {
    /// Stops service `name` as the run's end would, keeping its port and `{data}` folder.
    fn stop_service(&self, name: &str) -> Result<(), String>;
    /// Starts service `name` again (nothing when it runs) and waits until it is ready.
    fn start_service(&self, name: &str) -> Result<(), String>;
}

/// A started service's process, the leader of its own process group (whose id is its pid).
struct Process {
    child: Child,
    group: libc::pid_t,
}

/// One started service: its port, `{data}` folder and variables stay the same while it is
/// stopped and started again by fault steps.
struct Started {
    service: Service,
    port: u16,
    log: PathBuf,
    /// Its `{data}` folder, removed when it is stopped for good.
    data: Option<tempfile::TempDir>,
    /// Its `env`, with the templates filled in.
    env: BTreeMap<String, String>,
    /// Its process while it runs; `None` once a fault step stopped it.
    process: Option<Process>,
    /// Why it is down though it should run: a start after a fault step failed.
    broken: Option<String>,
}

impl Started {
    /// Why its process is no longer running, if it ended by itself.
    fn ended(&mut self) -> Option<ExitStatus> {
        self.process.as_mut()?.child.try_wait().ok().flatten()
    }

    fn is_running(&mut self) -> bool {
        self.process.is_some() && self.ended().is_none()
    }

    /// Stops its process: its stop signal to its group, up to `stop_timeout`, then KILL of
    /// the group, waited for until the group is gone. Its port and data folder stay.
    fn halt(&mut self) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        let group = process.group;
        if process.child.try_wait().ok().flatten().is_none() {
            // SAFETY: killpg only sends a signal to the group this service leads.
            unsafe { libc::killpg(group, self.service.stop.number) };
            let until = Instant::now() + self.service.stop_timeout;
            while process.child.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // What the leader left in its group goes too, whether it stopped in time or not.
        // SAFETY: as above.
        unsafe { libc::killpg(group, libc::SIGKILL) };
        forget(group);
        let _ = process.child.wait();
        // Killed members may take a moment to go (a port is free once they have).
        let until = Instant::now() + GROUP_GONE;
        // SAFETY: signal 0 only asks whether the group still has members.
        while unsafe { libc::killpg(group, 0) } == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops it for good: its process, then its data folder.
    fn stop(&mut self) {
        self.halt();
        if let Some(data) = self.data.take() {
            let _ = data.close();
        }
    }

    /// Runs its start command on its port and data folder, its output to its log (`fresh`:
    /// emptied first, else added to), and waits until it is ready; what it started is killed
    /// when it does not become ready.
    fn run(&mut self, fresh: bool) -> Result<(), Launch> {
        let name = self.service.name.clone();
        let log = self.log.clone();
        let log_error = |source| {
            Launch::Failed(StartError::Log {
                name: name.clone(),
                log: log.clone(),
                source,
            })
        };
        if let Some(folder) = log.parent() {
            std::fs::create_dir_all(folder).map_err(log_error)?;
        }
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(!fresh)
            .truncate(fresh)
            .open(&log)
            .map_err(log_error)?;
        let err = out.try_clone().map_err(log_error)?;
        let folder = self
            .data
            .as_ref()
            .map(|d| d.path().to_string_lossy().into_owned())
            .unwrap_or_default();
        let port = self.port;
        let fill = |template: &str| expand(template, port, &folder, &name);
        let command = fill(&self.service.start);
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
        let group = child.id() as libc::pid_t;
        remember(group);
        self.process = Some(Process { child, group });
        let ready = match &self.service.ready {
            Ready::Tcp => None,
            Ready::Command(template) => Some(fill(template)),
        };
        let until = Instant::now() + self.service.ready_timeout;
        loop {
            if let Some(status) = self.ended() {
                self.halt();
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
                // `{ready}`: what the ready command printed, for a service that learns its
                // address only once it runs (the embedded Kafka cluster), anew at each start.
                self.env = self
                    .service
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), fill(v).replace("{ready}", answer.trim())))
                    .collect();
                return Ok(());
            }
            if Instant::now() >= until {
                self.halt();
                return Err(Launch::Failed(StartError::NeverReady {
                    name,
                    ready: ready.unwrap_or_else(|| format!("tcp 127.0.0.1:{port}")),
                    limit: self.service.ready_timeout,
                    tail: last_lines(&log),
                    log,
                }));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Starts it again on the same port and data folder when it does not run (a fault step
    /// stopped it, or it ended), and waits until it is ready; a failure is kept as why it is
    /// down.
    fn start_again(&mut self) -> Result<(), StartError> {
        if self.is_running() {
            return Ok(());
        }
        self.halt();
        let result = self.run(false).map_err(|e| match e {
            Launch::Failed(e) => e,
            Launch::PortTaken => StartError::Exited {
                name: self.service.name.clone(),
                command: self.service.start.clone(),
                how: format!("ended while another program holds its port {}", self.port),
                tail: last_lines(&self.log),
                log: self.log.clone(),
            },
        });
        self.broken = result.as_ref().err().map(ToString::to_string);
        result
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long the members of a killed service's group may take to go.
const GROUP_GONE: Duration = Duration::from_secs(2);

type Shared = std::sync::Arc<Mutex<Started>>;

/// The services a run has started, by name; each is stopped by [`Running::stop_all`] or when
/// this is dropped (a panic's unwinding included).
pub struct Running {
    /// Where each service's log is written, as `NAME.log`.
    logs: PathBuf,
    /// Each service behind a lock of its own: a fault step waiting for one does not hold up
    /// the probes of the others.
    started: Mutex<BTreeMap<String, Shared>>,
    /// Kept up between runs (`--watch`): a run's end starts again what fault steps stopped
    /// instead of stopping everything.
    kept: AtomicBool,
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
            kept: AtomicBool::new(false),
        }
    }

    /// Keeps the services up between runs (`--watch`): see [`Running::end_of_run`].
    pub fn keep_between_runs(&self) {
        self.kept.store(true, Ordering::SeqCst);
    }

    /// Starts `service` and waits until it is ready (a port taken between the pick and the
    /// start is picked again, once). One already started as declared is left as it is (started
    /// again if it is down); one started under another declaration is stopped and started anew.
    pub fn start(&self, service: &Service) -> Result<(), StartError> {
        if let Some(shared) = self.get(&service.name) {
            let mut started = lock(&shared);
            if started.service == *service {
                return started.start_again();
            }
            tracing::info!(
                "service {}: its declaration changed; starting it anew",
                service.name
            );
            started.stop();
            drop(started);
            self.lock().remove(&service.name);
        }
        let started = match launch(service, &self.logs) {
            Err(Launch::PortTaken) => launch(service, &self.logs),
            other => other,
        }
        .map_err(|e| match e {
            Launch::Failed(e) => e,
            Launch::PortTaken => port_taken_twice(service, &self.logs),
        })?;
        self.lock().insert(
            service.name.clone(),
            std::sync::Arc::new(Mutex::new(started)),
        );
        Ok(())
    }

    /// The variables the probes needing `names` see.
    pub fn env(&self, names: &[String]) -> BTreeMap<String, String> {
        names
            .iter()
            .filter_map(|n| self.get(n))
            .flat_map(|s| lock(&s).env.clone())
            .collect()
    }

    /// The first of `names` that was started and is down though it should run, as a message:
    /// it ended by itself, or a start after a fault step failed. One a fault step stopped is
    /// not down: its chain holds it.
    pub fn dead(&self, names: &[String]) -> Option<String> {
        names.iter().find_map(|n| {
            let shared = self.get(n)?;
            let mut s = lock(&shared);
            if let Some(why) = &s.broken {
                return Some(format!("service {n} is down: {why}"));
            }
            let status = s.ended()?;
            Some(format!(
                "service {n} ended by itself during the run ({status}); its log {}{}",
                s.log.display(),
                shown(&last_lines(&s.log))
            ))
        })
    }

    /// Starts again each of `names` that does not run (a chain's fault steps left it stopped),
    /// waiting until it is ready; one that cannot start is down for the probes needing it.
    pub fn restore(&self, names: &[String]) {
        for name in names {
            if let Some(shared) = self.get(name) {
                if let Err(e) = lock(&shared).start_again() {
                    tracing::warn!("{e}");
                }
            }
        }
    }

    /// At the end of a run: every service stopped, or, kept between runs, every one a fault
    /// step left stopped started again.
    pub fn end_of_run(&self) {
        if self.kept.load(Ordering::SeqCst) {
            let names: Vec<String> = self.lock().keys().cloned().collect();
            self.restore(&names);
        } else {
            self.stop_all();
        }
    }

    /// Stops every started service `keep` does not name (a course no longer declares it),
    /// with its data folder.
    pub fn keep_only(&self, keep: &[&str]) {
        self.stop_where(|name| !keep.contains(&name));
    }

    /// Stops each of `names`, which no probe left in the run needs, with its data folder;
    /// kept between runs (`--watch`), they stay up for the next.
    pub fn release(&self, names: &[String]) {
        if names.is_empty() || self.kept.load(Ordering::SeqCst) {
            return;
        }
        self.stop_where(|name| names.iter().any(|n| n == name));
    }

    /// Stops every started service and removes their data folders.
    pub fn stop_all(&self) {
        self.stop_where(|_| true);
    }

    /// Stops the started services whose names `chosen` takes, side by side (each waits up to
    /// its own stop_timeout), and forgets them.
    fn stop_where(&self, chosen: impl Fn(&str) -> bool) {
        let stopping: Vec<Shared> = {
            let mut started = self.lock();
            let names: Vec<String> = started.keys().filter(|n| chosen(n)).cloned().collect();
            names.iter().filter_map(|n| started.remove(n)).collect()
        };
        std::thread::scope(|scope| {
            for shared in stopping {
                scope.spawn(move || lock(&shared).stop());
            }
        });
    }

    fn get(&self, name: &str) -> Option<Shared> {
        self.lock().get(name).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Shared>> {
        // A panic while holding the lock leaves the map whole: keep using it.
        self.started.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Faults for Running {
    fn stop_service(&self, name: &str) -> Result<(), String> {
        let shared = self.get(name).ok_or_else(|| not_started(name))?;
        lock(&shared).halt();
        Ok(())
    }

    fn start_service(&self, name: &str) -> Result<(), String> {
        let shared = self.get(name).ok_or_else(|| not_started(name))?;
        let result = lock(&shared).start_again();
        result.map_err(|e| e.to_string())
    }
}

fn not_started(name: &str) -> String {
    format!("service {name} was not started in this run")
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Started> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
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

/// Starts `service` once on a freshly picked port and data folder and waits until it is ready.
fn launch(service: &Service, logs: &Path) -> Result<Started, Launch> {
    let name = &service.name;
    let log = logs.join(format!("{name}.log"));
    let log_error = |source| {
        Launch::Failed(StartError::Log {
            name: name.clone(),
            log: log.clone(),
            source,
        })
    };
    let data = tempfile::Builder::new()
        .prefix(&format!("lessonprobe-service-{name}-"))
        .tempdir()
        .map_err(log_error)?;
    let port = free_port().map_err(log_error)?;
    let folder = data.path().to_string_lossy().into_owned();
    let mut started = Started {
        env: service
            .env
            .iter()
            .map(|(k, v)| (k.clone(), expand(v, port, &folder, name)))
            .collect(),
        service: service.clone(),
        port,
        log,
        data: Some(data),
        process: None,
        broken: None,
    };
    // On failure, dropping `started` removes its data folder.
    started.run(true)?;
    Ok(started)
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
        let data = lock(&running.lock()["s"])
            .data
            .as_ref()
            .unwrap()
            .path()
            .to_owned();
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
        let leader = leader(&running);
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

    fn leader(running: &Running) -> libc::pid_t {
        let shared = running.get("s").unwrap();
        let group = lock(&shared).process.as_ref().unwrap().group;
        group
    }

    /// A service ready once it accepts on its port.
    const LISTEN: &str = "exec python3 -m http.server --bind 127.0.0.1 {port}";

    #[test]
    fn a_fault_step_stops_and_starts_a_service_on_its_port_and_data_folder() {
        let (logs, running) = running();
        let s = service(
            &format!("echo start >> {{data}}/starts; echo up; {LISTEN}"),
            Ready::Tcp,
        );
        running.start(&s).unwrap();
        let env = running.env(&["s".into()]);
        let first = leader(&running);
        running.stop_service("s").unwrap();
        assert_eq!(living_in_group(first), 0, "its group outlived the stop");
        assert_eq!(running.dead(&["s".into()]), None, "stopped by a fault step");
        running.start_service("s").unwrap();
        assert_ne!(leader(&running), first);
        assert_eq!(running.env(&["s".into()]), env, "the same port");
        let data = lock(&running.get("s").unwrap())
            .data
            .as_ref()
            .unwrap()
            .path()
            .to_owned();
        assert_eq!(
            std::fs::read_to_string(data.join("starts")).unwrap(),
            "start\nstart\n"
        );
        // Restoring one that runs leaves it as it is; one stopped is started again.
        running.restore(&["s".into()]);
        let second = leader(&running);
        running.stop_service("s").unwrap();
        running.restore(&["s".into()]);
        assert_ne!(leader(&running), second);
        let log = std::fs::read_to_string(logs.path().join("s.log")).unwrap();
        let starts = log.lines().filter(|l| *l == "up").count();
        assert_eq!(starts, 3, "the log is added to: {log}");
        assert_eq!(
            running.start_service("other").unwrap_err(),
            "service other was not started in this run"
        );
    }

    #[test]
    fn a_failed_start_after_a_fault_step_leaves_the_service_down_with_why() {
        let (logs, running) = running();
        let s = service(
            &format!("test -f {{data}}/once && exit 5; touch {{data}}/once; {LISTEN}"),
            Ready::Tcp,
        );
        running.start(&s).unwrap();
        running.stop_service("s").unwrap();
        let e = running.start_service("s").unwrap_err();
        assert!(
            e.contains("ended before it was ready (exit status: 5)"),
            "{e}"
        );
        let down = running.dead(&["s".into()]).unwrap();
        assert!(
            down.starts_with("service s is down: service s: `"),
            "{down}"
        );
        drop(logs);
    }

    #[test]
    fn the_same_declaration_keeps_its_service_and_a_changed_one_starts_anew() {
        let (_logs, running) = running();
        let s = service("exec sleep 30", Ready::Command("true".into()));
        running.start(&s).unwrap();
        let first = leader(&running);
        running.start(&s).unwrap();
        assert_eq!(leader(&running), first);
        let changed = Service {
            stop_timeout: Duration::from_secs(2),
            ..s
        };
        running.start(&changed).unwrap();
        let second = leader(&running);
        assert_ne!(second, first);
        assert_eq!(living_in_group(first), 0);
        running.keep_only(&["s"]);
        assert_eq!(leader(&running), second);
        running.keep_only(&[]);
        assert_eq!(living_in_group(second), 0, "one no longer declared runs on");
    }

    #[test]
    fn a_panic_unwinding_past_the_runs_services_stops_them() {
        let (_logs, running) = running();
        running
            .start(&service("exec sleep 30", Ready::Command("true".into())))
            .unwrap();
        let group = leader(&running);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = running;
            panic!("a bug");
        }));
        assert!(unwound.is_err());
        assert_eq!(
            living_in_group(group),
            0,
            "a panic left the service running"
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
