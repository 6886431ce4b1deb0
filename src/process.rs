//! Runs a child program in its own process group under a deadline, keeping bounded tails of
//! its stdout and stderr, and kills the whole group when the deadline passes, when the run is
//! cancelled, and after it exits; or keeps one running to be fed on its stdin ([`Fed`]), its
//! group killed with it.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

/// Bytes of each stream kept: a block that prints megabytes keeps its last 64 KiB.
pub const TAIL_BYTES: usize = 64 * 1024;

/// The end of one output stream: at most [`TAIL_BYTES`] of its last bytes, and how many bytes
/// it had in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tail {
    pub text: String,
    pub total_bytes: u64,
}

impl Tail {
    /// More was written than kept.
    pub fn truncated(&self) -> bool {
        self.total_bytes > self.text.len() as u64
    }

    /// The kept text, after a line saying how much came before it when that was cut.
    pub fn shown(&self) -> String {
        if self.truncated() {
            format!(
                "[first {} bytes not kept]\n{}",
                self.total_bytes - self.text.len() as u64,
                self.text
            )
        } else {
            self.text.clone()
        }
    }
}

/// stdout, then stderr under a `--- stderr ---` line when it said anything: what a report
/// shows of a command that did not pass.
pub fn transcript(stdout: &Tail, stderr: &Tail) -> String {
    let mut out = stdout.shown();
    if !stderr.text.trim().is_empty() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("--- stderr ---\n");
        out.push_str(&stderr.shown());
    }
    out
}

#[derive(Debug)]
pub struct Finished {
    /// `None` when the deadline passed or the run was cancelled.
    pub status: Option<ExitStatus>,
    pub stdout: Tail,
    pub stderr: Tail,
    /// The deadline passed and the process group was killed.
    pub timed_out: bool,
    /// The run was cancelled and the process group was killed.
    pub cancelled: bool,
}

/// `program args` in `cwd` with `env` added, its stdout piped, in a process group of its own:
/// what it starts can be killed with it.
fn in_own_group(
    program: impl AsRef<OsStr>,
    args: impl IntoIterator<Item = impl AsRef<OsStr>>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .envs(env)
        .stdout(Stdio::piped())
        .process_group(0);
    command
}

/// Runs `program args` in `cwd` with `env` added, stdin closed, in a process group of its own.
pub fn run(
    program: &str,
    args: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    deadline: Duration,
    cancel: &Cancel,
) -> std::io::Result<Finished> {
    let mut child = in_own_group(program, args, cwd, env)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let pgid = child.id() as libc::pid_t;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let started = Instant::now();
    let exit = exit_notice(pgid);
    let (mut timed_out, mut cancelled) = (false, false);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        timed_out = started.elapsed() >= deadline;
        cancelled = cancel.is_cancelled();
        if timed_out || cancelled {
            kill_group(pgid);
            break child.wait()?;
        }
        pause_until_exit(exit.as_ref(), Duration::from_millis(5));
    };
    // The leader is gone; whatever it left running in its group goes with it, so the pipes
    // close and nothing outlives the probe.
    kill_group(pgid);
    Ok(Finished {
        status: (!timed_out && !cancelled).then_some(status),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
        cancelled,
    })
}

/// A descriptor that becomes readable when the child `pid` (not yet waited for) exits
/// (`pidfd_open`, Linux 5.3 and later); `None` where the kernel has none.
fn exit_notice(pid: libc::pid_t) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags, no pointer.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor the call just opened, owned by nothing else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Waits `pause`, or less when the child of `exit` ([`exit_notice`]) exits first: a probe's end
/// is seen at once, not at the next look (a worker's next probe waited 2.5 ms on average).
fn pause_until_exit(exit: Option<&std::os::fd::OwnedFd>, pause: Duration) {
    use std::os::fd::AsRawFd;
    let Some(exit) = exit else {
        return std::thread::sleep(pause);
    };
    let mut ready = libc::pollfd {
        fd: exit.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd that outlives the call.
    unsafe { libc::poll(&mut ready, 1, pause.as_millis() as libc::c_int) };
}

/// A program kept running to be fed on its stdin (a document's shell or interpreter), in a
/// process group of its own: killing it, or dropping it, takes whatever it started with it.
pub(crate) struct Fed {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Fed {
    /// Starts `program args` in `cwd` with `env` added, its stderr going to `stderr`; with its
    /// stdout, and its stderr when piped, to read.
    pub(crate) fn start(
        program: impl AsRef<OsStr>,
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        stderr: Stdio,
    ) -> std::io::Result<(Fed, Option<ChildStdout>, Option<ChildStderr>)> {
        let mut child = in_own_group(program, args, cwd, env)
            .stdin(Stdio::piped())
            .stderr(stderr)
            .spawn()?;
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let stdin = child.stdin.take();
        Ok((Fed { child, stdin }, stdout, stderr))
    }

    /// Writes `bytes` to its stdin and flushes them; an error once its input is closed.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the program's input is closed"))?;
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    /// Waits for it to exit.
    pub(crate) fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }

    /// Closes its input and kills its process group.
    pub(crate) fn kill(&mut self) {
        self.stdin = None;
        kill_group(self.child.id() as libc::pid_t);
        let _ = self.child.wait();
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        // Whatever it left running in its group goes with it.
        self.kill();
    }
}

fn kill_group(pgid: libc::pid_t) {
    // SAFETY: killpg only sends a signal; a group that no longer exists yields ESRCH.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Tail> {
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        if let Some(mut pipe) = pipe {
            let mut buf = [0u8; 8192];
            loop {
                match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        total += n as u64;
                        kept.extend_from_slice(&buf[..n]);
                        // Trim in halves so the copying stays linear in what was read.
                        if kept.len() > 2 * TAIL_BYTES {
                            kept.drain(..kept.len() - TAIL_BYTES);
                        }
                    }
                }
            }
        }
        if kept.len() > TAIL_BYTES {
            kept.drain(..kept.len() - TAIL_BYTES);
        }
        let mut text = String::from_utf8_lossy(&kept).into_owned();
        // A cut inside a multi-byte character leaves a replacement character at the start.
        if total > kept.len() as u64 {
            text = text.trim_start_matches('\u{fffd}').to_owned();
        }
        Tail {
            text,
            total_bytes: total,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, deadline: Duration) -> Finished {
        run(
            "sh",
            &["-c".to_string(), script.to_string()],
            Path::new("."),
            &BTreeMap::new(),
            deadline,
            &Cancel::new(),
        )
        .unwrap()
    }

    #[test]
    fn captures_output_and_status() {
        let done = sh("echo out; echo err >&2; exit 3", Duration::from_secs(5));
        assert_eq!(done.stdout.text, "out\n");
        assert_eq!(done.stderr.text, "err\n");
        assert_eq!(done.status.and_then(|s| s.code()), Some(3));
        assert!(!done.timed_out && !done.stdout.truncated());
    }

    #[test]
    fn megabytes_of_output_keep_a_bounded_tail() {
        let done = sh(
            "yes 0123456789 | head -c 5000000; echo END",
            Duration::from_secs(20),
        );
        assert_eq!(done.stdout.total_bytes, 5_000_004);
        assert!(done.stdout.truncated());
        assert!(done.stdout.text.len() <= TAIL_BYTES);
        assert!(done.stdout.text.ends_with("END\n"));
    }

    #[test]
    fn a_missing_program_is_an_io_error() {
        assert!(run(
            "/nonexistent/program",
            &[],
            Path::new("."),
            &BTreeMap::new(),
            Duration::from_secs(1),
            &Cancel::new(),
        )
        .is_err());
    }

    #[test]
    fn a_pause_ends_when_the_child_exits() {
        let mut child = Command::new("true").spawn().unwrap();
        let exit = exit_notice(child.id() as libc::pid_t);
        assert!(
            exit.is_some(),
            "pidfd_open is missing (Linux 5.3 and later have it)"
        );
        let started = Instant::now();
        pause_until_exit(exit.as_ref(), Duration::from_secs(60));
        assert!(started.elapsed() < Duration::from_secs(30));
        assert!(child.try_wait().unwrap().is_some());
    }

    #[test]
    fn a_cancelled_run_kills_the_group_at_once() {
        let cancel = Cancel::new();
        let later = cancel.clone();
        let trigger = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            later.cancel();
        });
        let started = Instant::now();
        let done = run(
            "sh",
            &["-c".to_string(), "echo begun; sleep 87".to_string()],
            Path::new("."),
            &BTreeMap::new(),
            Duration::from_secs(60),
            &cancel,
        )
        .unwrap();
        trigger.join().unwrap();
        assert!(done.cancelled && !done.timed_out && done.status.is_none());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(done.stdout.text, "begun\n");
    }

    #[test]
    fn a_transcript_shows_both_tails_and_what_was_cut() {
        let tail = |text: &str, total_bytes| Tail {
            text: text.into(),
            total_bytes,
        };
        assert_eq!(transcript(&tail("out\n", 4), &tail("", 0)), "out\n");
        assert_eq!(
            transcript(&tail("out", 3), &tail("err\n", 4)),
            "out\n--- stderr ---\nerr\n"
        );
        assert_eq!(
            transcript(&tail("end\n", 10), &tail("", 0)),
            "[first 6 bytes not kept]\nend\n"
        );
    }

    #[test]
    fn a_background_child_dies_with_its_group_after_the_leader_exits() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg.pid");
        let done = sh(
            &format!("sleep 60 & echo $! > {}; echo started", pidfile.display()),
            Duration::from_secs(10),
        );
        assert_eq!(done.stdout.text, "started\n");
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let state =
            std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        assert!(
            !state
                .lines()
                .any(|l| l.starts_with("State:") && !l.contains('Z')),
            "background child still running: {state}"
        );
    }
}
