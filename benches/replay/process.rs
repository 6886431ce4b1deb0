//! Whole `lessonprobe` processes, measured: wall time, CPU, peak RSS and the figures they
//! print.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Finished {
    pub wall: Duration,
    /// CPU seconds (user + system) the process used, its threads and children included.
    pub cpu: f64,
    /// Partitions the replay ran at once, as it reported (0: not reported).
    pub lanes: usize,
    pub peak_rss_mib: f64,
    pub stdout: String,
    pub stderr: String,
    /// Records/s of the execution phase, as the command reported it.
    pub execute_rate: f64,
    /// Seconds the command reported for planning.
    pub planning: f64,
    /// Seconds the command reported for its execution phase (replay) or its reading and
    /// comparing (verify).
    pub reported: f64,
}

/// Runs `lessonprobe ARGS`, sampling its peak RSS (VmHWM of /proc/PID/status) until it exits.
/// (wait4's ru_maxrss would count the memory of this process at fork time as well.)
pub fn run_measured(args: &[String]) -> Finished {
    run_measured_with(env!("CARGO_BIN_EXE_lessonprobe"), args)
}

/// CPU seconds (user + system) of this process's children that have been waited for.
pub fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

pub fn run_measured_with(binary: &str, args: &[String]) -> Finished {
    // The one child waited for while it runs (the broker of the mock is waited for at the
    // end), so the difference is this process's CPU.
    let cpu_before = children_cpu();
    let started = Instant::now();
    let mut child = Command::new(binary)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lessonprobe");
    let stderr = child.stderr.take().expect("stderr");
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let status_file = format!("/proc/{}/status", child.id());
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let mut reader = BufReader::new(stdout);
        while reader.read_line(&mut out).map(|n| n > 0).unwrap_or(false) {}
        out
    });
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        let hwm = std::fs::read_to_string(&status_file).ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        });
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    };
    let cpu = children_cpu() - cpu_before;
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    assert!(status.success(), "lessonprobe {args:?} failed:\n{out}{err}");
    // From "… N records in X s (R records/s) after planning in Y s": the number after
    // `marker` on the first line that has one (R: the execution phase alone; Y: planning).
    let after = |marker: &str| {
        err.lines()
            .find_map(|l| {
                l.split(marker)
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    let execute_rate = after(" s (");
    let planning = after("after planning in ");
    let reported = after(" records in ");
    let lanes = err
        .lines()
        .find_map(|l| {
            l.split(" partition(s) at once")
                .next()
                .filter(|head| head.len() < l.len())?
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    Finished {
        wall: started.elapsed(),
        cpu,
        lanes,
        peak_rss_mib: peak_kib as f64 / 1024.0,
        stdout: out,
        stderr: err,
        execute_rate,
        planning,
        reported,
    }
}
