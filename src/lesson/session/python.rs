//! The interpreter of a document's Python sessions: the course's Python running the embedded
//! driver (`driver.py`), which hands each block to its own `doctest` module (or `exec`s a plain
//! code block) in one namespace and answers with doctest's verdict and report.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use crate::process::Fed;
use serde::{Deserialize, Serialize};

const DRIVER: &str = concat!(include_str!("channels.py"), include_str!("driver.py"));
/// Bytes of the interpreter's stderr kept, for a message when it dies.
const STDERR_KEPT: usize = 16 * 1024;
const POLL: Duration = Duration::from_millis(50);

#[derive(Serialize)]
pub struct Request<'a> {
    /// `session` (doctest) or `code` (exec).
    pub kind: &'static str,
    pub text: &'a str,
    pub name: &'a str,
    pub filename: &'a str,
    /// The document line before the text's first line.
    pub offset: usize,
    /// doctest option flags for the whole block (`+ELLIPSIS`).
    pub flags: &'a [String],
}

#[derive(Debug, Deserialize)]
pub struct Reply {
    pub failures: Vec<Failure>,
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Failure {
    pub line: usize,
    pub report: String,
    /// For a failing example: the document line of its expected output (where it would go when
    /// it shows none), how many lines that output has, and doctest's "Got" as it would be
    /// written there (bless).
    #[serde(default)]
    pub want_line: Option<usize>,
    #[serde(default)]
    pub want_lines: Option<usize>,
    #[serde(default)]
    pub got: Option<String>,
}

/// Why a block got no reply.
#[derive(Debug)]
pub enum Stop {
    TimedOut,
    Cancelled,
    /// The interpreter ended; the end of its stderr.
    Ended(String),
}

pub struct Interpreter {
    fed: Fed,
    replies: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    ended: bool,
}

impl Interpreter {
    /// Starts `python` on the driver in `cwd` with `env` added.
    pub fn start(
        python: &Path,
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> std::io::Result<Interpreter> {
        Interpreter::running(python, DRIVER, cwd, env)
    }

    /// Starts `python` on `script` (a driver answering JSON lines) in `cwd` with `env` added.
    pub(crate) fn running(
        python: &Path,
        script: &str,
        cwd: &Path,
        env: &BTreeMap<String, String>,
    ) -> std::io::Result<Interpreter> {
        let (fed, stdout, stderr_pipe) =
            Fed::start(python, ["-c", script], cwd, env, Stdio::piped())?;
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(out) = stdout else { return };
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut err) = stderr_pipe {
            let kept = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut kept) = kept.lock() {
                        kept.extend_from_slice(&buf[..n]);
                        let over = kept.len().saturating_sub(STDERR_KEPT);
                        kept.drain(..over);
                    }
                }
            });
        }
        Ok(Interpreter {
            fed,
            replies,
            stderr,
            ended: false,
        })
    }

    /// Sends one block and waits for its reply until `deadline`.
    pub fn ask(
        &mut self,
        request: &Request<'_>,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Reply, Stop> {
        self.send(&serde_json::to_string(request).unwrap_or_default())?;
        let line = self.receive(deadline, cancel)?;
        serde_json::from_str(&line).map_err(|e| {
            self.kill();
            Stop::Ended(format!("the driver answered {line:?}: {e}"))
        })
    }

    /// Sends one line to the driver.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), Stop> {
        if self.ended {
            return Err(Stop::Ended(String::new()));
        }
        if self.fed.write(format!("{line}\n").as_bytes()).is_err() {
            return Err(self.end());
        }
        Ok(())
    }

    /// Waits for the driver's next line until `deadline`.
    pub(crate) fn receive(&mut self, deadline: Instant, cancel: &Cancel) -> Result<String, Stop> {
        if self.ended {
            return Err(Stop::Ended(String::new()));
        }
        loop {
            if cancel.is_cancelled() {
                self.kill();
                return Err(Stop::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.kill();
                return Err(Stop::TimedOut);
            }
            match self.replies.recv_timeout(left.min(POLL)) {
                Ok(line) => return Ok(line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.end()),
            }
        }
    }

    /// The interpreter ended before it answered: the end of what it wrote on stderr.
    fn end(&mut self) -> Stop {
        let _ = self.fed.wait();
        self.kill();
        // Its stderr reader may still be draining the last bytes.
        std::thread::sleep(Duration::from_millis(20));
        let text = self
            .stderr
            .lock()
            .map(|k| String::from_utf8_lossy(&k).into_owned())
            .unwrap_or_default();
        Stop::Ended(text)
    }

    /// What the interpreter wrote on stderr so far (what examples printed outside doctest).
    pub fn take_stderr(&self) -> String {
        self.stderr
            .lock()
            .map(|mut k| String::from_utf8_lossy(&std::mem::take(&mut *k)).into_owned())
            .unwrap_or_default()
    }

    /// Kills the driver's process group.
    pub(crate) fn kill(&mut self) {
        self.ended = true;
        self.fed.kill();
    }
}
