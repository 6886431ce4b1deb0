//! One SSH connection under a watchdog: TCP connect, handshake, host-key verification against the
//! host's known_hosts (before any authentication; no trust on first use), key or agent
//! authentication, commands and file reads. Every step runs under a deadline; when it passes, or
//! the run is cancelled, the watchdog shuts the socket so every pending libssh2 call returns
//! instead of hanging.

use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use lessonprobe_probes::Cancel;
use ssh2::{CheckResult, HashType, KnownHostFileKind, Session};

use super::hosts::AuthorizedHost;

/// A moment a step must end by, and how messages name it ("the deadline of 2s"); and the
/// run's cancellation, which ends the step sooner.
#[derive(Debug, Clone)]
pub struct Deadline {
    at: Instant,
    name: String,
    cancel: Option<Cancel>,
}

impl Deadline {
    /// `span` from now; `what` names it in messages ("the connect timeout").
    pub fn after(span: Duration, what: &str) -> Deadline {
        Deadline {
            at: Instant::now() + span,
            name: format!("{what} of {}", humantime::format_duration(span)),
            cancel: None,
        }
    }

    /// The same deadline, also ended by `cancel`.
    pub fn or_cancelled(mut self, cancel: &Cancel) -> Deadline {
        self.cancel = Some(cancel.clone());
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancel::is_cancelled)
    }

    /// The same deadline, under the same name, `by` later: a grace for an answer.
    pub fn extended(mut self, by: Duration) -> Deadline {
        self.at += by;
        self
    }

    /// Whichever of the two comes first, ended by either's cancellation.
    pub fn or(self, other: Deadline) -> Deadline {
        let cancel = self.cancel.clone().or_else(|| other.cancel.clone());
        let mut first = if other.at < self.at { other } else { self };
        first.cancel = cancel;
        first
    }

    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }
}

/// Why a connection step failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StepError {
    /// The deadline passed and the watchdog shut the connection.
    #[error("{limit} exceeded while {doing}")]
    TimedOut { doing: String, limit: String },
    /// The run was cancelled and the watchdog shut the connection.
    #[error("interrupted while {doing}")]
    Interrupted { doing: String },
    /// The server or the connection failed the step.
    #[error("{doing}: {reason}")]
    Failed { doing: String, reason: String },
    /// The host is not the one known_hosts lists, or it cannot be checked.
    #[error("{0}")]
    HostKey(String),
}

/// A command that ran to its end.
#[derive(Debug)]
pub struct Ran {
    /// stdout and stderr together.
    pub output: String,
    pub status: i32,
}

/// A command cut short, with what it had printed so far.
#[derive(Debug)]
pub struct Cut {
    pub error: StepError,
    pub output: String,
}

/// Why the watchdog shut the socket.
#[derive(Debug, Clone)]
enum Fired {
    /// The deadline of this name passed.
    Deadline(String),
    Cancelled,
}

impl Fired {
    fn error(self, doing: &str) -> StepError {
        let doing = doing.to_owned();
        match self {
            Fired::Deadline(limit) => StepError::TimedOut { doing, limit },
            Fired::Cancelled => StepError::Interrupted { doing },
        }
    }
}

/// Shuts a socket when its deadline passes or the run is cancelled, and remembers why.
struct Watchdog {
    deadline: Arc<Mutex<Deadline>>,
    done: Arc<AtomicBool>,
    fired: Arc<Mutex<Option<Fired>>>,
}

impl Watchdog {
    fn start(stream: TcpStream, deadline: Deadline) -> Watchdog {
        let dog = Watchdog {
            deadline: Arc::new(Mutex::new(deadline)),
            done: Arc::new(AtomicBool::new(false)),
            fired: Arc::new(Mutex::new(None)),
        };
        let (deadline, done, fired) = (dog.deadline.clone(), dog.done.clone(), dog.fired.clone());
        std::thread::spawn(move || loop {
            if done.load(Ordering::SeqCst) {
                return;
            }
            let (due, why) = match deadline.lock() {
                Ok(d) if d.cancelled() => (Instant::now(), Fired::Cancelled),
                Ok(d) => (d.at, Fired::Deadline(d.name.clone())),
                Err(_) => (Instant::now(), Fired::Deadline("the deadline".to_owned())),
            };
            let now = Instant::now();
            if now >= due {
                if let Ok(mut f) = fired.lock() {
                    *f = Some(why);
                }
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(20)));
        });
        dog
    }

    fn set(&self, deadline: &Deadline) {
        if let Ok(mut d) = self.deadline.lock() {
            *d = deadline.clone();
        }
    }

    /// Why the socket was shut, if it was.
    fn fired(&self) -> Option<Fired> {
        self.fired.lock().ok().and_then(|f| f.clone())
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

pub struct SshConnection {
    ssh: Session,
    watchdog: Watchdog,
    /// Shut when the connection is dropped, so freeing libssh2's state never waits on the peer.
    socket: TcpStream,
    /// Set by any failed libssh2 call: the connection may be gone, open a new one.
    broken: AtomicBool,
    pub fingerprint: String,
}

impl SshConnection {
    /// Connects, verifies the host key and authenticates, all by `deadline` and within the
    /// host's connect timeout.
    pub fn open(host: &AuthorizedHost, deadline: &Deadline) -> Result<SshConnection, StepError> {
        let deadline = deadline
            .clone()
            .or(Deadline::after(host.connect_timeout, "the connect timeout"));
        let timed_out = |doing: &str| StepError::TimedOut {
            doing: doing.to_owned(),
            limit: deadline.name.clone(),
        };
        let failed = |doing: &str, reason: String| StepError::Failed {
            doing: doing.to_owned(),
            reason,
        };
        let addr = resolve(&host.address, host.port, &deadline)?;
        let remaining = deadline.remaining();
        if remaining.is_zero() {
            return Err(timed_out("connecting"));
        }
        let stream = TcpStream::connect_timeout(&addr, remaining).map_err(|e| {
            if e.kind() == std::io::ErrorKind::TimedOut {
                timed_out("connecting")
            } else {
                failed("connecting", e.to_string())
            }
        })?;
        let clone = || {
            stream
                .try_clone()
                .map_err(|e| failed("connecting", e.to_string()))
        };
        let (dog_stream, socket) = (clone()?, clone()?);
        let watchdog = Watchdog::start(dog_stream, deadline.clone());
        let ssh_error = |doing: &str, e: ssh2::Error| match watchdog.fired() {
            Some(why) => why.error(doing),
            None => failed(doing, e.to_string()),
        };

        let mut ssh = Session::new().map_err(|e| failed("starting SSH", e.to_string()))?;
        ssh.set_tcp_stream(stream);
        let handshake = ssh.handshake();
        // From here on a failure must not leave the socket to a drop that waits on the peer.
        let close = |e: StepError| {
            let _ = socket.shutdown(Shutdown::Both);
            e
        };
        handshake.map_err(|e| close(ssh_error("doing the SSH handshake", e)))?;

        // Host key first: nothing is sent about the user before the key is known.
        let (key, _) = ssh
            .host_key()
            .ok_or_else(|| close(StepError::HostKey("the server sent no host key".into())))?;
        let key = key.to_vec();
        let fingerprint = ssh
            .host_key_hash(HashType::Sha256)
            .map(|h| {
                format!(
                    "SHA256:{}",
                    base64::engine::general_purpose::STANDARD_NO_PAD.encode(h)
                )
            })
            .unwrap_or_else(|| "unknown".into());
        verify_host_key(&ssh, host, &key, &fingerprint)
            .map_err(|e| close(StepError::HostKey(e)))?;

        let auth = match &host.identity {
            Some(identity) => ssh
                .userauth_pubkey_file(&host.user, None, identity, None)
                .map_err(|e| {
                    ssh_error(
                        &format!(
                            "authentication as {} with key {} refused",
                            host.user,
                            identity.display()
                        ),
                        e,
                    )
                }),
            None => ssh.userauth_agent(&host.user).map_err(|e| {
                ssh_error(
                    &format!(
                        "authentication as {} through the SSH agent refused",
                        host.user
                    ),
                    e,
                )
            }),
        };
        auth.map_err(close)?;
        if !ssh.authenticated() {
            return Err(close(failed(
                &format!("authenticating as {}", host.user),
                "refused".into(),
            )));
        }
        Ok(SshConnection {
            ssh,
            watchdog,
            socket,
            broken: AtomicBool::new(false),
            fingerprint,
        })
    }

    /// Whether a step failed on this connection: it may be gone.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst) || self.watchdog.fired().is_some()
    }

    fn error(&self, doing: &str, reason: impl std::fmt::Display) -> StepError {
        self.broken.store(true, Ordering::SeqCst);
        match self.watchdog.fired() {
            Some(why) => why.error(doing),
            None => StepError::Failed {
                doing: doing.to_owned(),
                reason: reason.to_string(),
            },
        }
    }

    /// Runs `command` (stderr merged into stdout) by `deadline`; `doing` names it in errors.
    pub fn exec(&self, doing: &str, command: &str, deadline: &Deadline) -> Result<Ran, Cut> {
        self.watchdog.set(deadline);
        let cut = |error: StepError, output: String| Cut { error, output };
        let mut channel = self.ssh.channel_session().map_err(|e| {
            cut(
                self.error(doing, format!("opening a channel: {e}")),
                String::new(),
            )
        })?;
        channel.exec(&format!("{command} 2>&1")).map_err(|e| {
            cut(
                self.error(doing, format!("starting the command: {e}")),
                String::new(),
            )
        })?;
        let mut bytes = Vec::new();
        let read = channel.read_to_end(&mut bytes);
        let output = String::from_utf8_lossy(&bytes).into_owned();
        if let Err(e) = read {
            return Err(cut(
                self.error(doing, format!("reading its output: {e}")),
                output,
            ));
        }
        if let Err(e) = channel.wait_close() {
            return Err(cut(
                self.error(doing, format!("closing the channel: {e}")),
                output,
            ));
        }
        match channel.exit_status() {
            Ok(status) => Ok(Ran { output, status }),
            Err(e) => Err(cut(
                self.error(doing, format!("reading the exit status: {e}")),
                output,
            )),
        }
    }

    /// Reads a remote file over SFTP by `deadline`; `Ok(None)` when it does not exist.
    pub fn read_file(&self, path: &str, deadline: &Deadline) -> Result<Option<Vec<u8>>, StepError> {
        self.watchdog.set(deadline);
        let doing = format!("fetching {path}");
        let sftp = self
            .ssh
            .sftp()
            .map_err(|e| self.error(&doing, format!("opening SFTP: {e}")))?;
        let mut file = match sftp.open(std::path::Path::new(path)) {
            Ok(f) => f,
            Err(e) if e.code() == ssh2::ErrorCode::SFTP(2) => return Ok(None), // no such file
            Err(e) => return Err(self.error(&doing, e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| self.error(&doing, e))?;
        Ok(Some(bytes))
    }
}

impl Drop for SshConnection {
    fn drop(&mut self) {
        // libssh2 may wait for the peer while freeing a channel or the connection (ssh2-rs
        // issue 165); a shut socket makes those waits return at once.
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// Resolves `address:port` by `deadline`: a resolver that does not answer must not hold the run.
fn resolve(address: &str, port: u16, deadline: &Deadline) -> Result<SocketAddr, StepError> {
    let (tx, rx) = mpsc::channel();
    let name = (address.to_owned(), port);
    std::thread::spawn(move || {
        let _ = tx.send(name.to_socket_addrs().map(|mut a| a.next()));
    });
    match rx.recv_timeout(deadline.remaining()) {
        Ok(Ok(Some(addr))) => Ok(addr),
        Ok(Ok(None)) => Err(StepError::Failed {
            doing: "resolving the address".into(),
            reason: "it resolves to nothing".into(),
        }),
        Ok(Err(e)) => Err(StepError::Failed {
            doing: "resolving the address".into(),
            reason: e.to_string(),
        }),
        Err(_) => Err(StepError::TimedOut {
            doing: "resolving the address".into(),
            limit: deadline.name.clone(),
        }),
    }
}

fn verify_host_key(
    ssh: &Session,
    host: &AuthorizedHost,
    key: &[u8],
    fingerprint: &str,
) -> Result<(), String> {
    let path = &host.known_hosts;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read known_hosts {}: {e}", path.display()))?;
    if let Some(marker) = text
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("@cert-authority") || l.starts_with("@revoked"))
    {
        let word = marker.split_whitespace().next().unwrap_or("@");
        return Err(format!(
            "{}: {word} lines are not supported (libssh2 cannot check them); list the host's key itself",
            path.display()
        ));
    }
    let mut known = ssh.known_hosts().map_err(|e| format!("ssh: {e}"))?;
    known
        .read_file(path, KnownHostFileKind::OpenSSH)
        .map_err(|e| format!("cannot parse known_hosts {}: {e}", path.display()))?;
    match known.check_port(&host.address, host.port, key) {
        CheckResult::Match => Ok(()),
        CheckResult::Mismatch => Err(format!(
            "HOST KEY MISMATCH: the server's key {fingerprint} differs from the one {} lists for it; refusing to authenticate",
            path.display()
        )),
        CheckResult::NotFound => Err(format!(
            "host key {fingerprint} is not in {}; refusing to authenticate (no trust on first use: add the key to known_hosts after checking it)",
            path.display()
        )),
        CheckResult::Failure => Err(format!("cannot check the host key against {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earlier_deadline_wins_and_keeps_its_name() {
        let long = Deadline::after(Duration::from_secs(10), "the connect timeout");
        let short = Deadline::after(Duration::from_secs(2), "the deadline");
        assert_eq!(long.clone().or(short.clone()).name, "the deadline of 2s");
        assert_eq!(short.or(long).name, "the deadline of 2s");
    }
}
