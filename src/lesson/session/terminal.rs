//! The shell of a document's terminal sessions: one `bash` in a process group of its own, its
//! stderr on its stdout's pipe, fed one command at a time; a line carrying a random nonce and
//! `$?` after each tells where its output ends and how it exited.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use crate::process::Fed;

/// Output kept of one command: more is cut from its start.
const KEPT_BYTES: usize = 1024 * 1024;
/// How often a wait looks at the run's cancellation.
const POLL: Duration = Duration::from_millis(50);

/// Why a command gave no status.
#[derive(Debug)]
pub enum Stop {
    /// Past its deadline: the shell's process group was killed.
    TimedOut,
    Cancelled,
    /// The shell itself ended (`exit`, or killed), with its status if it has one.
    ShellEnded(Option<i32>),
}

/// A command's output (stdout and stderr interleaved) and how it ended.
#[derive(Debug)]
pub struct Ran {
    pub output: String,
    pub end: Result<i32, Stop>,
}

pub struct Shell {
    fed: Fed,
    chunks: Receiver<Vec<u8>>,
    pending: Vec<u8>,
    nonce: String,
    ended: bool,
}

impl Shell {
    /// Starts `bash` in `cwd` with `env` added.
    pub fn start(cwd: &Path, env: &BTreeMap<String, String>) -> std::io::Result<Shell> {
        let (fed, mut stdout, _) =
            Fed::start("bash", ["--noprofile", "--norc"], cwd, env, Stdio::null())?;
        let (tx, chunks) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(out) = stdout.as_mut() else { return };
            let mut buf = [0u8; 8192];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let nonce = format!("{:016x}", rand::random::<u64>());
        let mut shell = Shell {
            fed,
            chunks,
            pending: Vec::new(),
            nonce,
            ended: false,
        };
        // Errors go where output goes, in the order written, as a terminal shows them.
        shell.write("exec 2>&1\n")?;
        Ok(shell)
    }

    fn write(&mut self, text: &str) -> std::io::Result<()> {
        self.fed.write(text.as_bytes())
    }

    /// Runs `script` (one command, its continuation lines included) until `deadline`.
    pub fn run(&mut self, script: &str, deadline: Instant, cancel: &Cancel) -> Ran {
        if self.ended {
            return Ran {
                output: String::new(),
                end: Err(Stop::ShellEnded(None)),
            };
        }
        let end = format!("__LP_{}_END", self.nonce);
        // Read through eval from a quoted here-document: a command with an unclosed quote is a
        // syntax error of its own and cannot swallow the next one; its stdin is /dev/null so it
        // cannot read the commands after it.
        let wrapped = format!(
            "eval \"$(cat <<'{end}'\n{}\n{end}\n)\" < /dev/null\nprintf '\\n__LP_%s__ %s\\n' {} \"$?\"\n",
            script.trim_end_matches('\n'),
            self.nonce
        );
        if self.write(&wrapped).is_err() {
            return self.ended_now();
        }
        let marker = format!("\n__LP_{}__ ", self.nonce);
        loop {
            if let Some(at) = find(&self.pending, marker.as_bytes()) {
                let after = at + marker.len();
                if let Some(nl) = self.pending[after..].iter().position(|&b| b == b'\n') {
                    let status = String::from_utf8_lossy(&self.pending[after..after + nl])
                        .trim()
                        .parse::<i32>()
                        .unwrap_or(-1);
                    let output = kept(&self.pending[..at]);
                    self.pending.drain(..after + nl + 1);
                    return Ran {
                        output,
                        end: Ok(status),
                    };
                }
            }
            if cancel.is_cancelled() {
                return self.stop(Stop::Cancelled);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return self.stop(Stop::TimedOut);
            }
            match self.chunks.recv_timeout(left.min(POLL)) {
                Ok(chunk) => {
                    self.pending.extend_from_slice(&chunk);
                    if self.pending.len() > 2 * KEPT_BYTES {
                        let cut = self.pending.len() - KEPT_BYTES;
                        self.pending.drain(..cut);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return self.ended_now(),
            }
        }
    }

    /// The shell ended before the command's status line: what it printed, and its status.
    fn ended_now(&mut self) -> Ran {
        self.ended = true;
        let status = self.fed.wait().ok().and_then(|s| s.code());
        self.fed.kill();
        let output = kept(&std::mem::take(&mut self.pending));
        Ran {
            output,
            end: Err(Stop::ShellEnded(status)),
        }
    }

    fn stop(&mut self, why: Stop) -> Ran {
        self.ended = true;
        self.fed.kill();
        let output = kept(&std::mem::take(&mut self.pending));
        Ran {
            output,
            end: Err(why),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn kept(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(KEPT_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}
