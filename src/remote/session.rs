//! One SSH session under a watchdog: TCP connect, handshake, host-key verification against the
//! host's known_hosts (before any authentication; no trust on first use), key or agent
//! authentication, commands and file reads. At the watchdog's deadline the socket is shut, so
//! every pending libssh2 call returns with an error instead of hanging.

use std::io::Read;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use ssh2::{CheckResult, HashType, KnownHostFileKind, Session};

use super::hosts::AuthorizedHost;

/// Shuts a socket when its deadline passes.
struct Watchdog {
    deadline: Arc<Mutex<Instant>>,
    done: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(stream: TcpStream, deadline: Instant) -> Watchdog {
        let dog = Watchdog {
            deadline: Arc::new(Mutex::new(deadline)),
            done: Arc::new(AtomicBool::new(false)),
            fired: Arc::new(AtomicBool::new(false)),
        };
        let (deadline, done, fired) = (dog.deadline.clone(), dog.done.clone(), dog.fired.clone());
        std::thread::spawn(move || loop {
            if done.load(Ordering::SeqCst) {
                return;
            }
            let due = deadline
                .lock()
                .map(|d| *d)
                .unwrap_or_else(|_| Instant::now());
            let now = Instant::now();
            if now >= due {
                fired.store(true, Ordering::SeqCst);
                let _ = stream.shutdown(Shutdown::Both);
                return;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(20)));
        });
        dog
    }

    fn set(&self, deadline: Instant) {
        if let Ok(mut d) = self.deadline.lock() {
            *d = deadline;
        }
    }

    fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// Why a session step failed; `timed_out` when the watchdog ended it.
#[derive(Debug)]
pub struct StepError {
    pub reason: String,
    pub timed_out: bool,
}

pub struct SshSession {
    session: Session,
    watchdog: Watchdog,
    pub fingerprint: String,
}

impl SshSession {
    /// Connects, verifies the host key and authenticates, all within `host.connect_timeout`.
    pub fn open(host: &AuthorizedHost) -> Result<SshSession, StepError> {
        let started = Instant::now();
        let fail = |reason: String| StepError {
            reason,
            timed_out: false,
        };
        let addr = (host.address.as_str(), host.port)
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| fail("the address resolves to nothing".into()))?;
        let stream = TcpStream::connect_timeout(&addr, host.connect_timeout)
            .map_err(|e| fail(format!("cannot connect: {e}")))?;
        let dog_stream = stream
            .try_clone()
            .map_err(|e| fail(format!("socket: {e}")))?;
        let watchdog = Watchdog::start(dog_stream, started + host.connect_timeout);
        let timed_out = |watchdog: &Watchdog, what: &str, e: ssh2::Error| StepError {
            reason: if watchdog.fired() {
                format!(
                    "{what}: no answer within the connect timeout of {}",
                    humantime::format_duration(host.connect_timeout)
                )
            } else {
                format!("{what}: {e}")
            },
            timed_out: watchdog.fired(),
        };

        let mut session = Session::new().map_err(|e| fail(format!("ssh: {e}")))?;
        session.set_tcp_stream(stream);
        session
            .handshake()
            .map_err(|e| timed_out(&watchdog, "SSH handshake", e))?;

        // Host key first: nothing is sent about the user before the key is known.
        let (key, _) = session
            .host_key()
            .ok_or_else(|| fail("the server sent no host key".into()))?;
        let key = key.to_vec();
        let fingerprint = session
            .host_key_hash(HashType::Sha256)
            .map(|h| {
                format!(
                    "SHA256:{}",
                    base64::engine::general_purpose::STANDARD_NO_PAD.encode(h)
                )
            })
            .unwrap_or_else(|| "unknown".into());
        verify_host_key(&session, host, &key, &fingerprint).map_err(fail)?;

        let auth = match &host.identity {
            Some(identity) => session
                .userauth_pubkey_file(&host.user, None, identity, None)
                .map_err(|e| {
                    timed_out(
                        &watchdog,
                        &format!(
                            "authentication as {} with key {} refused",
                            host.user,
                            identity.display()
                        ),
                        e,
                    )
                }),
            None => session.userauth_agent(&host.user).map_err(|e| {
                timed_out(
                    &watchdog,
                    &format!(
                        "authentication as {} through the SSH agent refused",
                        host.user
                    ),
                    e,
                )
            }),
        };
        auth?;
        if !session.authenticated() {
            return Err(fail(format!("authentication as {} refused", host.user)));
        }
        Ok(SshSession {
            session,
            watchdog,
            fingerprint,
        })
    }

    /// Moves the watchdog's deadline.
    pub fn deadline(&self, deadline: Instant) {
        self.watchdog.set(deadline);
    }

    pub fn is_dead(&self) -> bool {
        self.watchdog.fired()
    }

    /// Runs `command` (stderr merged into stdout); returns its output and exit status.
    pub fn exec(&self, command: &str) -> Result<(String, i32), StepError> {
        let err = |what: &str, e: ssh2::Error| StepError {
            reason: if self.watchdog.fired() {
                format!("{what}: deadline reached")
            } else {
                format!("{what}: {e}")
            },
            timed_out: self.watchdog.fired(),
        };
        let mut channel = self
            .session
            .channel_session()
            .map_err(|e| err("opening a channel", e))?;
        channel
            .exec(&format!("{command} 2>&1"))
            .map_err(|e| err("starting the command", e))?;
        let mut bytes = Vec::new();
        let read = channel.read_to_end(&mut bytes);
        let output = String::from_utf8_lossy(&bytes).into_owned();
        if let Err(e) = read {
            return Err(StepError {
                reason: if self.watchdog.fired() {
                    "deadline reached".into()
                } else {
                    format!("reading output: {e}")
                },
                timed_out: self.watchdog.fired(),
            });
        }
        channel
            .wait_close()
            .map_err(|e| err("closing the channel", e))?;
        let status = channel
            .exit_status()
            .map_err(|e| err("reading the exit status", e))?;
        Ok((output, status))
    }

    /// Reads a remote file over SFTP; `Ok(None)` when it does not exist.
    pub fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, StepError> {
        let err = |what: &str, e: String| StepError {
            reason: format!("{what}: {e}"),
            timed_out: self.watchdog.fired(),
        };
        let sftp = self
            .session
            .sftp()
            .map_err(|e| err("opening SFTP", e.to_string()))?;
        let mut file = match sftp.open(std::path::Path::new(path)) {
            Ok(f) => f,
            Err(e) if e.code() == ssh2::ErrorCode::SFTP(2) => return Ok(None), // no such file
            Err(e) => return Err(err(&format!("opening {path}"), e.to_string())),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| err(&format!("reading {path}"), e.to_string()))?;
        Ok(Some(bytes))
    }
}

fn verify_host_key(
    session: &Session,
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
    let mut known = session.known_hosts().map_err(|e| format!("ssh: {e}"))?;
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
