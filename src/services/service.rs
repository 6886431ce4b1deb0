//! A declared service as a run uses it: its start command, when it counts as ready, the signal
//! that stops it, and what the probes needing it see.

use std::collections::BTreeMap;
use std::time::Duration;

/// A service a course declares: a command lessonprobe starts and checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub name: String,
    /// Run through the shell, in a process group of its own; a template.
    pub start: String,
    pub ready: Ready,
    pub ready_timeout: Duration,
    /// Variables the probes needing the service see; their values are templates.
    pub env: BTreeMap<String, String>,
    pub stop: StopSignal,
    pub stop_timeout: Duration,
}

/// When a started service counts as ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Its `{port}` accepts a connection on the loopback address.
    Tcp,
    /// This command (a template, run through the shell) exits with status 0.
    Command(String),
}

/// The signal that asks a service to stop, by its name and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopSignal {
    pub name: &'static str,
    pub number: libc::c_int,
}

pub(super) const SIGNALS: [(&str, libc::c_int); 7] = [
    ("TERM", libc::SIGTERM),
    ("INT", libc::SIGINT),
    ("HUP", libc::SIGHUP),
    ("QUIT", libc::SIGQUIT),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("USR2", libc::SIGUSR2),
];

impl StopSignal {
    /// `TERM` or `SIGTERM` (any case).
    pub(super) fn parse(text: &str) -> Option<StopSignal> {
        let upper = text.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        SIGNALS
            .iter()
            .find(|(name, _)| *name == bare)
            .map(|&(name, number)| StopSignal { name, number })
    }
}
