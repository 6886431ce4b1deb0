//! One declarative run of a program, the built `lessonprobe` unless told otherwise: arguments,
//! environment, folder and deadline in; expected exit status and output checked in one place,
//! every mismatch reported at once with both streams; what it printed handed back.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Variables that choose what the binary does: a run starts without them, so the environment
/// the tests run in cannot change a result. A test sets the ones it needs.
const OWN_VARIABLES: [&str; 12] = [
    // A suite run by GitHub Actions must not annotate its pull request or write its summary.
    "GITHUB_ACTIONS",
    "GITHUB_STEP_SUMMARY",
    "LESSONPROBE_CHECKPOINTS",
    "LESSONPROBE_DB",
    "LESSONPROBE_REPLAY_DB",
    "LESSONPROBE_KAFKA",
    "LESSONPROBE_HOSTS",
    "TICKETFLOW_REMOTE_TESTS",
    "LESSONPROBE_RUN_ID",
    "LESSONPROBE_COURSE",
    "LESSONPROBE_PYTHON",
    "NO_COLOR",
];

/// The built `lessonprobe` of this workspace. Cargo builds it before the root package's tests
/// and benches and names it in `CARGO_BIN_EXE_lessonprobe`; without that variable it is found
/// beside the running test (`target/PROFILE/deps/TEST` → `target/PROFILE/lessonprobe`).
pub fn bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(path) = std::env::var_os("CARGO_BIN_EXE_lessonprobe") {
            return PathBuf::from(path);
        }
        let exe = std::env::current_exe().expect("the path of the running test");
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("a test runs from target/PROFILE/deps");
        let path = profile.join(format!("lessonprobe{}", std::env::consts::EXE_SUFFIX));
        assert!(
            path.exists(),
            "{} does not exist: only the tests and benches of the root package run the binary \
             (cargo builds it for them)",
            path.display()
        );
        path
    })
    .clone()
}

/// The cache the suite's runs keep their working copies (and anything else) in, unless a test
/// sets its own `XDG_CACHE_HOME`: beside the binary under `target/`, never the user's
/// `~/.cache`, which a suite of thousands of runs over throwaway courses would fill.
pub fn test_cache() -> PathBuf {
    bin().with_file_name("test-cache")
}

/// The built `lessonprobe`, run in a fresh empty folder unless given one, with the suite's
/// cache ([`test_cache`]).
pub fn lessonprobe() -> Test {
    Test::new(bin()).env("XDG_CACHE_HOME", test_cache())
}

/// The built `lessonprobe` with `args` (as a shell reads them) under a pseudo-terminal
/// (`script`), as a user at a terminal runs it: stdout is what the terminal showed, both
/// streams together. Check first that `script` is there ([`crate::tool`]).
pub fn on_a_terminal(args: &str) -> Test {
    let command = format!("{} {args}", bin().display());
    Test::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("XDG_CACHE_HOME", test_cache())
}

enum Expect {
    Is(String),
    Has(String),
    Lacks(String),
    Matches(String),
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
    Either,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
            Stream::Either => "output",
        }
    }
}

/// A run to make: build it, then end with [`Test::success`], [`Test::failure`] or
/// [`Test::status`] (which run it and check everything stated), or [`Test::spawn`].
#[must_use = "a Test runs only at success(), failure(), status() or spawn()"]
pub struct Test {
    command: Command,
    shown: Vec<OsString>,
    cwd: Option<PathBuf>,
    /// The folder of [`Test::in_repo`], removed when the run is over.
    own_dir: Option<tempfile::TempDir>,
    expects: Vec<(Stream, Expect)>,
    within: Option<Duration>,
}

impl Test {
    /// `program` (any program, e.g. `script` wrapping [`bin`]) with our own variables removed
    /// and stdin closed.
    pub fn new(program: impl AsRef<OsStr>) -> Test {
        let mut command = Command::new(program.as_ref());
        for var in OWN_VARIABLES {
            command.env_remove(var);
        }
        command.stdin(Stdio::null());
        let name = Path::new(program.as_ref())
            .file_name()
            .unwrap_or(program.as_ref())
            .to_owned();
        Test {
            command,
            shown: vec![name],
            cwd: None,
            own_dir: None,
            expects: Vec::new(),
            within: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Test {
        self.command.arg(arg.as_ref());
        self.shown.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Test
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for arg in args {
            self = self.arg(arg);
        }
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Test {
        self.command.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Test {
        self.command.env_remove(key);
        self
    }

    /// Where the program runs (default: a fresh empty folder, removed afterwards).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Test {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Runs as a step of GitHub Actions (`GITHUB_ACTIONS=true`) whose step summary is the file
    /// `summary`.
    pub fn in_github_actions(self, summary: impl AsRef<Path>) -> Test {
        self.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_STEP_SUMMARY", summary.as_ref())
    }

    /// Runs in the repository: its `checkpoints/` and `examples/` as a user's checkout has them,
    /// in a folder of their links ([`Dir::like_repo`]), so that what the run writes in its
    /// folder (`reports/`, `.lessonprobe/`) is removed with it.
    pub fn in_repo(mut self) -> Test {
        let dir = crate::Dir::like_repo();
        self.cwd = Some(dir.path().to_owned());
        self.own_dir = Some(dir.into_temp_dir());
        self
    }

    /// stdout must be exactly `text`.
    pub fn stdout(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stdout, Expect::Is(text.into()))
    }

    /// stdout must contain `text` (repeatable: each must).
    pub fn stdout_has(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stdout, Expect::Has(text.into()))
    }

    /// stdout must not contain `text`.
    pub fn stdout_lacks(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stdout, Expect::Lacks(text.into()))
    }

    /// stdout must match `pattern` line by line, where `[..]` stands for any text within a line
    /// and a line `...` for any number of lines.
    pub fn stdout_matches(self, pattern: impl Into<String>) -> Test {
        self.expect(Stream::Stdout, Expect::Matches(pattern.into()))
    }

    /// stderr must be exactly `text`.
    pub fn stderr(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stderr, Expect::Is(text.into()))
    }

    pub fn stderr_has(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stderr, Expect::Has(text.into()))
    }

    pub fn stderr_lacks(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Stderr, Expect::Lacks(text.into()))
    }

    /// stderr must match `pattern`, with the elisions of [`Test::stdout_matches`].
    pub fn stderr_matches(self, pattern: impl Into<String>) -> Test {
        self.expect(Stream::Stderr, Expect::Matches(pattern.into()))
    }

    /// stdout followed by stderr must match `pattern`, with the elisions of
    /// [`Test::stdout_matches`]: what a terminal shows of a run that prints to one of them.
    pub fn output_matches(self, pattern: impl Into<String>) -> Test {
        self.expect(Stream::Either, Expect::Matches(pattern.into()))
    }

    /// stdout or stderr must contain `text` (for messages whose stream does not matter).
    pub fn output_has(self, text: impl Into<String>) -> Test {
        self.expect(Stream::Either, Expect::Has(text.into()))
    }

    /// The run must end within `limit`: past it the program is killed and the test fails.
    /// The limit bounds a hang; it is not a benchmark.
    pub fn within(mut self, limit: Duration) -> Test {
        self.within = Some(limit);
        self
    }

    /// Runs it and checks that it exits 0 and printed what was stated.
    #[track_caller]
    pub fn success(self) -> Ran {
        self.spawn().success()
    }

    /// Runs it and checks that it exits 1 and printed what was stated.
    #[track_caller]
    pub fn failure(self) -> Ran {
        self.spawn().failure()
    }

    /// Runs it and checks that it exits `code` and printed what was stated.
    #[track_caller]
    pub fn status(self, code: i32) -> Ran {
        self.spawn().status(code)
    }

    /// Starts it and returns at once, for a test that acts while it runs; the expectations are
    /// checked when [`Running::status`] waits for it.
    #[track_caller]
    pub fn spawn(mut self) -> Running {
        let scratch = match &self.cwd {
            Some(dir) => {
                self.command.current_dir(dir);
                self.own_dir.take()
            }
            None => {
                let dir = tempfile::tempdir().expect("create a temporary folder");
                self.command.current_dir(dir.path());
                Some(dir)
            }
        };
        let shown = self.describe();
        // SIGINT at its default, as an interactive shell starts a program: a suite started in
        // the background of a script (a shell without job control) runs with SIGINT ignored,
        // which exec passes on, and lessonprobe rightly keeps an inherited ignored SIGINT — the
        // tests that send one would then see it ignored.
        // SAFETY: between fork and exec the closure only calls signal(2), which is
        // async-signal-safe.
        unsafe {
            self.command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        // A group of its own, so a run past its limit goes with everything it started.
        let mut child = self
            .command
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
        // Both pipes are drained as the program writes, so it never blocks on a full pipe.
        let stdout = drain(child.stdout.take().unwrap());
        let stderr = drain(child.stderr.take().unwrap());
        let started = Instant::now();
        Running {
            child,
            exited: None,
            stdout,
            stderr,
            started,
            shown,
            expects: self.expects,
            limit: self.within.map(|limit| Limit {
                limit,
                ends: started + limit,
            }),
            _scratch: scratch,
        }
    }

    fn expect(mut self, stream: Stream, expect: Expect) -> Test {
        self.expects.push((stream, expect));
        self
    }

    fn describe(&self) -> String {
        let words: Vec<String> = self
            .shown
            .iter()
            .map(|w| {
                let w = w.to_string_lossy();
                match w.is_empty() || w.contains([' ', '"', '\'']) {
                    true => format!("{w:?}"),
                    false => w.into_owned(),
                }
            })
            .collect();
        let place = self
            .cwd
            .as_deref()
            .map_or("a fresh folder".to_owned(), |d| d.display().to_string());
        format!("`{}` in {place}", words.join(" "))
    }
}

/// What a pipe has delivered so far, and word when it closes.
struct Drained {
    bytes: Arc<Mutex<Vec<u8>>>,
    closed: Receiver<()>,
}

fn drain(mut pipe: impl Read + Send + 'static) -> Drained {
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let (tell, closed) = mpsc::channel();
    let sink = bytes.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n @ 1..) = pipe.read(&mut chunk) {
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
        let _ = tell.send(());
    });
    Drained { bytes, closed }
}

/// How long a pipe may stay open after the program ended: a process it left behind holds it.
const PIPE_GRACE: Duration = Duration::from_secs(10);

impl Drained {
    fn text(&self) -> String {
        let closed = self.closed.recv_timeout(PIPE_GRACE).is_ok();
        let mut text = String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned();
        if !closed {
            text.push_str(&format!(
                "\n[still open {PIPE_GRACE:?} after the end: a process the run started outlived it]"
            ));
        }
        text
    }
}

/// How long a run may take, and when that is up.
#[derive(Clone, Copy)]
struct Limit {
    limit: Duration,
    ends: Instant,
}

/// How a run ended: its status and the processor time it used (user and system).
#[derive(Clone, Copy)]
struct Exited {
    status: ExitStatus,
    cpu: Duration,
}

/// A started run (from [`Test::spawn`]).
pub struct Running {
    child: Child,
    /// Set once reaped: the child is waited for with `wait4`, which reports its processor time.
    exited: Option<Exited>,
    stdout: Drained,
    stderr: Drained,
    started: Instant,
    shown: String,
    expects: Vec<(Stream, Expect)>,
    limit: Option<Limit>,
    _scratch: Option<tempfile::TempDir>,
}

impl Running {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What it has written to standard error so far, for a test that acts on its progress.
    pub fn stderr_so_far(&self) -> String {
        String::from_utf8_lossy(&self.stderr.bytes.lock().unwrap()).into_owned()
    }

    /// Waits until `done` holds of its standard error so far, failing the test (and saying what
    /// it printed) when `limit` passes first or the program ends.
    #[track_caller]
    pub fn wait_for_stderr(&mut self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) {
        let started = Instant::now();
        loop {
            let so_far = self.stderr_so_far();
            if done(&so_far) {
                return;
            }
            let ended = !self.is_running();
            assert!(
                !ended && started.elapsed() < limit,
                "{}: {what}: {} within {limit:?}; its stderr so far:\n{so_far}",
                self.shown,
                if ended { "ended before" } else { "not" },
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it has not ended yet.
    pub fn is_running(&mut self) -> bool {
        self.reap(false).is_none()
    }

    /// Sends `signal` (e.g. `libc::SIGINT`, as Ctrl-C would) to the program alone.
    #[track_caller]
    pub fn signal(&mut self, signal: i32) {
        assert!(
            self.is_running(),
            "{} ended before signal {signal}",
            self.shown
        );
        // SAFETY: kill only sends a signal, to our own child, which is not reaped yet.
        let sent = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(sent, 0, "signal {signal} to {}", self.shown);
    }

    /// From now on it must end within `limit` (replacing any earlier limit): past it, it is
    /// killed and the test fails. For a bound counted from an event, such as a signal.
    pub fn within(mut self, limit: Duration) -> Running {
        self.limit = Some(Limit {
            limit,
            ends: Instant::now() + limit,
        });
        self
    }

    /// Ends it with SIGKILL, as a crash or an operator would, and reaps it.
    pub fn kill(mut self) {
        if self.is_running() {
            let _ = self.child.kill();
            self.reap(true);
        }
    }

    #[track_caller]
    pub fn success(self) -> Ran {
        self.status(0)
    }

    #[track_caller]
    pub fn failure(self) -> Ran {
        self.status(1)
    }

    /// Waits for the end (within the limit, if one was set) and checks that it exited `code`
    /// and printed what was stated; every mismatch is reported at once, with both streams.
    #[track_caller]
    pub fn status(self, code: i32) -> Ran {
        self.status_among(&[code])
    }

    /// [`status`](Self::status) for a run that may end in any of `codes` (a test then tells
    /// from `Ran::code` which way it went).
    #[track_caller]
    pub fn status_among(mut self, codes: &[i32]) -> Ran {
        let (exited, killed) = self.wait();
        let ran = Ran {
            code: exited.status.code(),
            elapsed: self.started.elapsed(),
            cpu: exited.cpu,
            stdout: self.stdout.text(),
            stderr: self.stderr.text(),
        };
        let mut wrong = Vec::new();
        match self.limit {
            Some(Limit { limit, .. }) if killed => {
                wrong.push(format!("still running after {limit:?}; killed"))
            }
            // Output held open past the limit by something the run left behind counts too.
            Some(Limit { limit, ends }) if Instant::now() > ends => wrong.push(format!(
                "took longer than its limit of {limit:?} ({:?} in all)",
                ran.elapsed
            )),
            _ => {}
        }
        if !killed && !ran.code.is_some_and(|c| codes.contains(&c)) {
            let codes: Vec<String> = codes.iter().map(i32::to_string).collect();
            wrong.push(format!(
                "exit status {} expected, got {}",
                codes.join(" or "),
                exited.status
            ));
        }
        for (stream, expect) in &self.expects {
            let actual = match stream {
                Stream::Stdout => ran.stdout.clone(),
                Stream::Stderr => ran.stderr.clone(),
                Stream::Either => ran.text(),
            };
            if let Some(why) = mismatch(stream.name(), &actual, expect) {
                wrong.push(why);
            }
        }
        assert!(
            wrong.is_empty(),
            "{}:\n  {}\n--- stdout\n{}\n--- stderr\n{}",
            self.shown,
            wrong.join("\n  "),
            ran.stdout,
            ran.stderr
        );
        ran
    }

    /// How it ended, and whether it was killed at its limit.
    fn wait(&mut self) -> (Exited, bool) {
        let Some(Limit { ends, .. }) = self.limit else {
            return (self.reap(true).expect("a blocking wait reaps"), false);
        };
        loop {
            if let Some(exited) = self.reap(false) {
                return (exited, false);
            }
            if Instant::now() > ends {
                // SAFETY: kill only sends a signal, to the group the child leads.
                unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
                return (self.reap(true).expect("a blocking wait reaps"), true);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reaps the child if it has ended (waiting for that when `block`), with `wait4` so that
    /// its processor time is known; the child is reaped once and the result kept.
    fn reap(&mut self, block: bool) -> Option<Exited> {
        if self.exited.is_none() {
            let mut status = 0;
            // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            let flags = if block { 0 } else { libc::WNOHANG };
            let pid = self.child.id() as i32;
            let got = loop {
                // SAFETY: waits for our own child, writing into the two locals above.
                let got = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
                if got >= 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    break got;
                }
            };
            assert!(
                got >= 0,
                "wait for {}: {}",
                self.shown,
                std::io::Error::last_os_error()
            );
            if got == pid {
                let time = |t: libc::timeval| {
                    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
                };
                self.exited = Some(Exited {
                    status: ExitStatus::from_raw(status),
                    cpu: time(usage.ru_utime) + time(usage.ru_stime),
                });
            }
        }
        self.exited
    }
}

/// A run the test left before it ended (an assertion failed midway, or the test forgot it) is
/// stopped as an operator would: SIGTERM to its group, which lets lessonprobe stop its own
/// probes and kernels, then SIGKILL after 10 s; no process of it outlives the test.
impl Drop for Running {
    fn drop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        // No assertion here: a panic while the test unwinds would abort the whole binary.
        let running = |child: &mut Child| matches!(child.try_wait(), Ok(None));
        if !running(&mut self.child) {
            return;
        }
        let group = -(self.child.id() as i32);
        // SAFETY: kill only sends a signal, to the group the child leads.
        unsafe { libc::kill(group, libc::SIGTERM) };
        let ends = Instant::now() + Duration::from_secs(10);
        while running(&mut self.child) && Instant::now() < ends {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever of the group is left, also once the child ended: a member may miss SIGTERM
        // (a shell's `cmd &` forked but not yet exec'd runs the shell's handler, and its exec
        // forgets the signal), and the group outlives its leader while a member lives.
        // SAFETY: as above; a group with no member left yields ESRCH.
        unsafe { libc::kill(group, libc::SIGKILL) };
        if running(&mut self.child) {
            let _ = self.child.wait();
        }
    }
}

fn mismatch(stream: &str, actual: &str, expect: &Expect) -> Option<String> {
    // snapbox renders a mismatch as a diff; `raw` turns its elisions off for an exact match.
    let differs = |expected: snapbox::Data| {
        snapbox::Assert::new()
            .normalize_paths(false)
            .try_eq(Some(&stream), snapbox::Data::text(actual), expected)
            .err()
    };
    match expect {
        Expect::Is(text) => differs(snapbox::Data::text(text.as_str()).raw())
            .map(|e| format!("{stream} differs from what was expected:\n{e}")),
        Expect::Matches(pattern) => differs(snapbox::Data::text(pattern.as_str()))
            .map(|e| format!("{stream} does not match the pattern:\n{e}")),
        Expect::Has(text) => {
            (!actual.contains(text.as_str())).then(|| format!("{stream} lacks {text:?}"))
        }
        Expect::Lacks(text) => actual
            .contains(text.as_str())
            .then(|| format!("{stream} must not contain {text:?}")),
    }
}

/// What a finished run printed, for checks beyond those the [`Test`] stated.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// From start until it ended, for bounds on hangs (never a benchmark).
    pub elapsed: Duration,
    /// The processor time it used itself (user and system), which other work on a shared
    /// machine does not stretch as it does wall time.
    pub cpu: Duration,
}

impl Ran {
    /// stdout followed by stderr.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// stdout as the one JSON document it must be.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", self.stdout))
    }

    /// How many lines of stdout start with `prefix`.
    pub fn stdout_lines_starting(&self, prefix: &str) -> usize {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

/// The checkpoint ids of a JSON report's `outcomes`, in its order.
#[track_caller]
pub fn outcome_ids(doc: &serde_json::Value) -> Vec<&str> {
    doc["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect()
}

/// Runs `git ARGS` in `dir` as a committer of its own (no user configuration needed), and
/// checks that it succeeds.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> Ran {
    Test::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .success()
}

/// Makes `dir` a git repository whose first commit holds `path` (a file or folder in it).
#[track_caller]
pub fn git_first_commit(dir: &Path, path: &str) {
    git(dir, &["init", "-q"]);
    git(dir, &["add", path]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run the test leaves before it ends is stopped with its whole group: SIGTERM first
    /// (a shell that traps it writes a file and exits), SIGKILL for one that ignores it.
    #[test]
    fn a_run_left_running_is_stopped_with_its_group_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // Gone, or a zombie: a signalled grandchild dies when it is next scheduled and is
        // reaped by init after that, both after the drop returns; 5 s is far past either, and
        // a grandchild the drop did not signal sleeps on for 300.
        let ends_within_5s = |pid: i32| {
            let ends = Instant::now() + Duration::from_secs(5);
            loop {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let state = stat
                    .rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next());
                if matches!(state, None | Some('Z') | Some('X')) {
                    return true;
                }
                if Instant::now() >= ends {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let pid_of = |file: &str| -> i32 {
            let path = dir.path().join(file);
            let ends = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(pid) = std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                {
                    return pid;
                }
                assert!(Instant::now() < ends, "{file} never written");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let polite = Test::new("sh")
            .arg("-c")
            .arg("trap 'echo term > stopped; exit 0' TERM; sleep 300 & echo $! > child; wait")
            .current_dir(dir.path())
            .spawn();
        let child = pid_of("child");
        drop(polite);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("stopped")).unwrap(),
            "term\n"
        );
        assert!(ends_within_5s(child), "the sleep it started outlived it");

        // A member that misses SIGTERM (here: ignores it) while the leader obeys it.
        let deaf = Test::new("sh")
            .arg("-c")
            .arg(
                "trap 'exit 0' TERM; sh -c 'trap \"\" TERM; echo $$ > deaf; exec sleep 300' & wait",
            )
            .current_dir(dir.path())
            .spawn();
        let member = pid_of("deaf");
        drop(deaf);
        assert!(
            ends_within_5s(member),
            "a member deaf to SIGTERM outlived it"
        );

        let stubborn = Test::new("sh")
            .arg("-c")
            .arg("trap '' TERM; echo $$ > shell; sleep 300")
            .current_dir(dir.path())
            .spawn();
        let shell = pid_of("shell");
        let started = Instant::now();
        drop(stubborn);
        assert!(started.elapsed() >= Duration::from_secs(10));
        assert!(ends_within_5s(shell));
    }

    /// A run starts with SIGINT at its default even when the suite itself ignores it.
    #[test]
    fn a_run_starts_with_sigint_at_its_default_even_under_an_ignoring_suite() {
        // SAFETY: sets this test process's disposition; no test here relies on SIGINT.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        let ran = Test::new("cat").arg("/proc/self/status").success();
        let ignored = ran
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
            .expect("a SigIgn line");
        assert_eq!(
            ignored & (1 << (libc::SIGINT - 1)),
            0,
            "SIGINT ignored: {ignored:x}"
        );
    }

    fn sh(script: &str) -> Test {
        Test::new("sh").args(["-c", script])
    }

    /// The panic message of a run that must not pass its checks.
    fn refusal(test: Test, code: i32) -> String {
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test.status(code)))
            .err()
            .expect("the checks must fail");
        panic.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn a_run_that_matches_hands_back_both_streams() {
        let ran = sh("echo one; echo two >&2; exit 3")
            .stdout("one\n")
            .stderr_has("two")
            .output_has("two")
            .stdout_lacks("two")
            .status(3);
        assert_eq!((ran.code, ran.text().as_str()), (Some(3), "one\ntwo\n"));
    }

    #[test]
    fn every_mismatch_is_reported_at_once_with_both_streams() {
        let said = refusal(
            sh("echo out; echo err >&2; exit 1")
                .stdout_has("missing")
                .stderr_lacks("err"),
            0,
        );
        for words in [
            "`sh -c \"echo out; echo err >&2; exit 1\"` in a fresh folder",
            "exit status 0 expected, got exit status: 1",
            "stdout lacks \"missing\"",
            "stderr must not contain \"err\"",
            "--- stdout\nout\n",
            "--- stderr\nerr\n",
        ] {
            assert!(said.contains(words), "{words:?} missing from {said}");
        }
    }

    #[test]
    fn elisions_stand_for_text_within_a_line_and_for_whole_lines() {
        sh("printf 'head 42 tail\\na\\nb\\nlast\\n'")
            .stdout_matches("head [..] tail\n...\nlast\n")
            .success();
        let said = refusal(
            sh("echo 'head 42 tail'").stdout_matches("head [..] end\n"),
            0,
        );
        assert!(said.contains("stdout does not match the pattern"), "{said}");
        // An exact expectation takes `[..]` literally.
        refusal(sh("echo 'a b'").stdout("a [..]\n"), 0);
    }

    #[test]
    fn a_run_past_its_limit_is_killed_and_fails() {
        let started = Instant::now();
        let said = refusal(sh("sleep 30").within(Duration::from_millis(300)), 0);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(said.contains("still running after 300ms; killed"), "{said}");
    }

    #[test]
    fn a_signal_reaches_the_program_and_a_limit_can_start_from_it() {
        let mut run = sh("trap 'kill $!; exit 7' TERM; sleep 30 & wait").spawn();
        std::thread::sleep(Duration::from_millis(300));
        run.signal(libc::SIGTERM);
        run.within(Duration::from_secs(5)).status(7);

        let mut run = sh("sleep 30").spawn();
        std::thread::sleep(Duration::from_millis(200));
        assert!(run.is_running());
        let said = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run.within(Duration::from_millis(300)).status(0)
        }))
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .expect("the checks must fail");
        assert!(said.contains("still running after 300ms; killed"), "{said}");
    }

    #[test]
    fn the_processor_time_of_the_program_is_measured_and_a_reaped_run_stays_ended() {
        let mut run = sh("i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done").spawn();
        while run.is_running() {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!run.is_running());
        let ran = run.success();
        assert!(ran.cpu > Duration::from_millis(10), "{:?}", ran.cpu);
        assert!(
            ran.cpu <= ran.elapsed + Duration::from_millis(50),
            "{:?}",
            ran.cpu
        );
    }

    #[test]
    fn our_variables_do_not_reach_the_program_unless_a_test_sets_them() {
        std::env::set_var("LESSONPROBE_DB", "postgres://leaked");
        sh("echo \"[$LESSONPROBE_DB]\"").stdout("[]\n").success();
        sh("echo \"[$LESSONPROBE_DB]\"")
            .env("LESSONPROBE_DB", "sqlite")
            .stdout("[sqlite]\n")
            .success();
    }
}
