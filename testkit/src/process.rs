//! Processes on this machine: whether one or a whole process group is gone, which still run
//! with a given command line, and their parents (read from /proc).

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether the process whose pid is in `pid_file` is gone (or a zombie) within 5 s: a SIGKILL
/// takes effect when the process is next scheduled, which on a loaded machine is not at once.
#[track_caller]
pub fn process_gone(pid_file: &Path) -> bool {
    let pid = std::fs::read_to_string(pid_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", pid_file.display()));
    let started = Instant::now();
    loop {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        let running = status
            .lines()
            .any(|l| l.starts_with("State:") && !l.contains('Z'));
        if !running {
            return true;
        }
        if started.elapsed() > Duration::from_secs(5) {
            eprintln!("process {} still running: {status}", pid.trim());
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes on this machine (a loopback "remote" host's too) whose command line contains
/// `needle`: `(pid, command line)`.
pub fn processes_with(needle: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some((pid, cmd))
        })
        .collect()
}

/// Waits up to `within` for every process with `needle` in its command line to be gone;
/// returns those still there.
pub fn gone_within(needle: &str, within: Duration) -> Vec<(u32, String)> {
    let started = Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() || started.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether no process of group `pgid` is left within 5 s.
pub fn group_gone(pgid: i32) -> bool {
    let started = Instant::now();
    loop {
        // SAFETY: signal 0 only checks that the group exists.
        if unsafe { libc::kill(-pgid, 0) } != 0 {
            return true;
        }
        if started.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The command line of `pid`, arguments joined by spaces ("" if it is gone).
pub fn cmdline(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}
