//! A notebook's kernel: the course's Python running the embedded driver (`driver.py`), which
//! starts the Jupyter kernel through nbclient and runs the cells it is given, answering one
//! JSON line per cell. Dropped, it kills the driver and the kernel's process group.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::lesson::session::{Interpreter, Stop};

const DRIVER: &str = concat!(
    include_str!("../session/channels.py"),
    include_str!("driver.py")
);

/// How long the kernel may take to start and answer (nbclient's `startup_timeout`).
pub const STARTUP: Duration = Duration::from_secs(60);

/// What the driver may take beyond a cell's limit to interrupt the kernel and say so.
pub const GRACE: Duration = Duration::from_secs(15);

/// How long an interrupted kernel has to end its cell before it is killed (nbval waits 5 s for
/// the kernel's next message); the driver is told it in its request.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// A cell as the driver runs it.
#[derive(Serialize)]
pub struct Asked<'a> {
    pub source: &'a str,
    /// Its limit, in seconds (nbclient's timeout).
    pub timeout: f64,
    /// Not run (`nbval-skip`).
    pub skip: bool,
}

#[derive(Serialize)]
struct Request<'a> {
    kernel: &'a str,
    cwd: String,
    /// The kernel's `PYTHONPATH`: in the request, not the driver's environment, so a driver
    /// started ahead serves a notebook of any copy.
    path: Option<&'a str>,
    startup_timeout: u64,
    interrupt_grace: u64,
    cells: &'a [Asked<'a>],
}

/// Where a notebook's kernel runs: its working folder and `PYTHONPATH`.
pub struct Place<'a> {
    pub cwd: &'a Path,
    pub path: Option<&'a str>,
}

/// The driver's answer for one cell.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Reply {
    /// What the cell produced, as nbformat stores outputs.
    pub outputs: Vec<Value>,
    pub skipped: bool,
    /// It exceeded its limit (seconds): the kernel was interrupted.
    pub timeout: Option<f64>,
    /// After a timeout: the kernel answered the interrupt (the cell's execution ended) and
    /// runs the later cells; else it was killed and the driver runs nothing more.
    pub interrupted: bool,
    /// The kernel died while it ran.
    pub dead: Option<String>,
}

#[derive(Deserialize)]
struct Start {
    #[serde(default)]
    started: Option<i32>,
    #[serde(default)]
    failed: Option<String>,
}

/// Why the kernel did not start, or stopped before it answered.
#[derive(Debug)]
pub enum Unanswered {
    /// The driver said why (no nbclient, no such kernel, the kernel did not answer).
    Failed(String),
    Stopped(Stop),
}

/// A driver started ahead of its notebook: its interpreter, environment and process, waiting
/// for its request with nbclient imported.
struct Spare {
    python: PathBuf,
    env: BTreeMap<String, String>,
    driver: Interpreter,
}

/// The drivers started ahead. Each kernel's start takes one and starts one for the next
/// notebook, so a notebook's kernel starts without waiting for the driver's interpreter and its
/// imports (a few tenths of a second each). One left over ends when lessonprobe does (its
/// input closes).
static SPARES: Mutex<Vec<Spare>> = Mutex::new(Vec::new());

/// A driver for `python` with `env`: a spare one when there is one, else one started now; and
/// a spare started for the next notebook, after this one (which starts first, its imports
/// ahead of the spare's).
fn driver(python: &Path, env: &BTreeMap<String, String>) -> std::io::Result<Interpreter> {
    let mut spares = SPARES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let taken = spares
        .iter()
        .position(|s| s.python == python && s.env == *env)
        .map(|at| spares.swap_remove(at).driver);
    let driver = match taken {
        Some(driver) => driver,
        None => started(python, env)?,
    };
    if let Ok(spare) = started(python, env) {
        spares.push(Spare {
            python: python.to_owned(),
            env: env.clone(),
            driver: spare,
        });
    }
    Ok(driver)
}

/// The driver started in the temporary folder (each request names the kernel's working folder).
fn started(python: &Path, env: &BTreeMap<String, String>) -> std::io::Result<Interpreter> {
    Interpreter::running(python, DRIVER, &std::env::temp_dir(), env)
}

pub struct Kernel {
    driver: Interpreter,
    /// The kernel's process group (the kernel starts a session of its own).
    group: Option<i32>,
}

impl Kernel {
    /// Starts the kernel `name` at `place` through a driver of `python` with `env` added,
    /// running `cells`; waits for the kernel until `deadline`.
    pub fn start(
        python: &Path,
        place: &Place<'_>,
        env: &BTreeMap<String, String>,
        (name, cells): (&str, &[Asked<'_>]),
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Kernel, Unanswered> {
        let driver = driver(python, env)
            .map_err(|e| Unanswered::Failed(format!("cannot start {}: {e}", python.display())))?;
        let mut kernel = Kernel {
            driver,
            group: None,
        };
        let request = Request {
            kernel: name,
            cwd: place.cwd.display().to_string(),
            path: place.path,
            startup_timeout: STARTUP.as_secs(),
            interrupt_grace: INTERRUPT_GRACE.as_secs(),
            cells,
        };
        let line = serde_json::to_string(&request).unwrap_or_default();
        if kernel.driver.send(&line).is_err() {
            // A spare that ended while it waited: a driver of its own.
            kernel.driver = started(python, env).map_err(|e| {
                Unanswered::Failed(format!("cannot start {}: {e}", python.display()))
            })?;
            kernel.driver.send(&line).map_err(Unanswered::Stopped)?;
        }
        let answer = kernel
            .driver
            .receive(deadline, cancel)
            .map_err(Unanswered::Stopped)?;
        let start: Start = serde_json::from_str(&answer).map_err(|e| {
            Unanswered::Failed(format!("the notebook driver answered {answer:?}: {e}"))
        })?;
        if let Some(why) = start.failed {
            return Err(Unanswered::Failed(why));
        }
        kernel.group = start.started;
        Ok(kernel)
    }

    /// The next cell's reply, waited for until `deadline`.
    pub fn next(&mut self, deadline: Instant, cancel: &Cancel) -> Result<Reply, Unanswered> {
        let line = self
            .driver
            .receive(deadline, cancel)
            .map_err(Unanswered::Stopped)?;
        serde_json::from_str(&line)
            .map_err(|e| Unanswered::Failed(format!("the notebook driver answered {line:?}: {e}")))
    }

    /// Lets the driver shut the kernel down and end (it removes the kernel's connection
    /// file), waiting a few seconds at most.
    pub fn finish(mut self) {
        let until = Instant::now() + Duration::from_secs(5);
        while self.driver.receive(until, &Cancel::new()).is_ok() {}
    }

    /// What the driver and the kernel wrote on stderr so far.
    pub fn take_stderr(&self) -> String {
        self.driver.take_stderr()
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        self.driver.kill();
        if let Some(group) = self.group.filter(|g| *g > 1) {
            // SAFETY: killpg only sends a signal; a group that is gone yields ESRCH.
            unsafe { libc::killpg(group, libc::SIGKILL) };
        }
    }
}
