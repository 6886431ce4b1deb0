//! Executes one planned case: a builtin probe, a command or a remote selector under its
//! deadline and the run's cancellation, judged against the expected output; a case decided
//! SKIP or PENDING only reports its reason.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use lessonprobe_probes::{registry, Cancel, DbTarget, ProbeContext, ProbeError};
use similar::TextDiff;

use super::plan::{Decision, PlannedCase};
use super::{document, remote, Outcome, RemoteHost, RunConfig, Verdict};
use crate::checkpoint::ProbeKind;
use crate::lesson::Runs;
use crate::process::{self, Finished};

/// How often a waiting builtin probe's case looks at the run's cancellation.
const POLL: Duration = Duration::from_millis(50);

/// How long a cancelled builtin probe gets to reach its next step and release what it holds
/// (schemas, topics) before the run leaves it behind.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why a case that ran has no output to judge. Its verdict is FAIL when the claim did not
/// hold and ERROR when the case could not run or finish.
#[derive(Debug, thiserror::Error)]
enum CaseError {
    /// The probe ran and its claim did not hold.
    #[error("{0}")]
    ClaimFailed(String),
    /// The probe could not run or finish, in its own words.
    #[error("{0}")]
    ProbeBroken(String),
    #[error("no builtin probe named {name}")]
    UnknownBuiltin { name: String },
    #[error("cannot start probe thread: {source}")]
    Thread { source: std::io::Error },
    #[error("probe panicked: {what}")]
    Panicked { what: String },
    #[error("deadline of {} exceeded", humantime::format_duration(*.limit))]
    Deadline { limit: Duration },
    #[error("cannot start {program:?} in {}: {source}", dir.display())]
    Spawn {
        program: String,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("deadline of {} exceeded; process group killed{}", humantime::format_duration(*.limit), tail("stderr", &done.stderr.text))]
    CommandDeadline { limit: Duration, done: Finished },
    /// The command ran and exited unsuccessfully: its claim did not hold.
    #[error("exited with status {code}{}", tail("stderr", &done.stderr.text))]
    Exited { code: i32, done: Finished },
    #[error("killed by a signal{}", tail("stderr", &done.stderr.text))]
    Killed { done: Finished },
    /// The run was cancelled while the case ran.
    #[error("stopped: the run was interrupted")]
    Cancelled,
    #[error("{}: cannot remove the database file an earlier run left: {source}", path.display())]
    StaleDatabase {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A remote probe with no host to run on.
    #[error("{0}")]
    NoRemoteHost(String),
    #[error("this kind has no local execution")]
    NotLocal,
}

impl CaseError {
    fn verdict(&self) -> Verdict {
        match self {
            CaseError::ClaimFailed(_) | CaseError::Exited { .. } => Verdict::Fail,
            _ => Verdict::Error,
        }
    }

    /// What a command printed before it failed: the tails of stdout and stderr.
    fn transcript(&self) -> Option<String> {
        match self {
            CaseError::CommandDeadline { done, .. }
            | CaseError::Exited { done, .. }
            | CaseError::Killed { done } => Some(process::transcript(&done.stdout, &done.stderr)),
            _ => None,
        }
    }
}

impl From<ProbeError> for CaseError {
    fn from(e: ProbeError) -> Self {
        if e.is_failure() {
            CaseError::ClaimFailed(e.to_string())
        } else {
            CaseError::ProbeBroken(e.to_string())
        }
    }
}

/// The kind of the outcome of a failed preflight check, which reports show as `environment`.
pub const PREFLIGHT: &str = "environment";

/// The outcome of a case decided SKIP, PENDING, NOT RUN (a check it needs failed) or ERROR
/// (a failed preflight check); `None` for a case to run.
pub(super) fn decided(case: &PlannedCase<'_>) -> Option<Outcome> {
    let (verdict, reason) = match &case.decision {
        Decision::Skip(reason) => (Verdict::Skip, reason),
        Decision::Pending(reason) => (Verdict::Pending, reason),
        Decision::NotRun(reason) => (Verdict::NotRun, reason),
        Decision::Broken(reason) => (Verdict::Error, reason),
        Decision::Run | Decision::FromDocument => return None,
    };
    let mut outcome = Outcome::of(case);
    if matches!(case.decision, Decision::Broken(_)) {
        // Its message says what and where; no manifest line is its place.
        outcome.kind = PREFLIGHT;
        outcome.file = None;
    }
    outcome.verdict = verdict;
    outcome.message = Some(reason.clone());
    Some(outcome)
}

/// What every case of a run is run with: the run's configuration, its cancellation, and the
/// lesson's `Runs` of the plan's document probes.
#[derive(Clone, Copy)]
pub(super) struct Shared<'a> {
    pub config: &'a RunConfig,
    pub cancel: &'a Cancel,
    pub runs: &'a Runs,
}

/// One planned case's outcomes: exactly one, except a remote selector whose report holds
/// several test cases. `key` names what the case creates on shared services; `shared.cancel`
/// stops it; a document probe runs through the plan's `shared.runs`.
pub(super) fn run_case(case: &PlannedCase<'_>, key: &str, shared: Shared<'_>) -> Vec<Outcome> {
    let Shared {
        config,
        cancel,
        runs,
    } = shared;
    if let Some(outcome) = decided(case) {
        return vec![outcome];
    }
    let probe = case.probe;
    let mut outcome = Outcome::of(case);
    if let Some(dead) = config.services.dead(&probe.services) {
        outcome.verdict = Verdict::Error;
        outcome.message = Some(dead);
        return vec![outcome];
    }
    let deadline = probe.timeout.unwrap_or(config.default_timeout);
    if let (ProbeKind::Remote { selector, .. }, RemoteHost::Host(host)) =
        (&probe.kind, &config.remote)
    {
        return remote::run(
            outcome,
            host,
            case.checkpoint.lesson,
            selector,
            deadline,
            cancel,
        );
    }
    if let ProbeKind::Document(doc) = &probe.kind {
        let env = config.services.env(&probe.services);
        return vec![document::run(outcome, doc, &env, deadline, cancel, runs)];
    }
    let started = Instant::now();
    let result = match &probe.kind {
        ProbeKind::Builtin { name, .. } => probe_context(case, config, key, deadline, cancel)
            .and_then(|ctx| run_builtin(name, ctx, deadline)),
        ProbeKind::Command { argv, cwd, env, .. } => {
            let dir = cwd.as_ref().map_or_else(
                || config.course_root.clone(),
                |c| config.course_root.join(c),
            );
            // The services' variables, then the probe's own, which win.
            let mut env_with = config.services.env(&probe.services);
            env_with.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
            run_command(argv, &dir, &env_with, deadline, cancel)
        }
        ProbeKind::Remote { .. } => Err(CaseError::NoRemoteHost(
            config.remote.unavailable_reason().unwrap_or_default(),
        )),
        ProbeKind::Prose { .. } | ProbeKind::Document(_) => Err(CaseError::NotLocal),
    };
    outcome.duration = started.elapsed();
    match result {
        Ok(output) => {
            outcome.output = output;
            judge(&mut outcome);
            if let Some(drift) = &probe.drift {
                outcome.verdict = Verdict::Fail;
                outcome.message = Some(match outcome.message.take() {
                    Some(m) => format!("{drift}; {m}"),
                    None => drift.clone(),
                });
            }
        }
        Err(e) => {
            outcome.verdict = e.verdict();
            outcome.message = Some(e.to_string());
            outcome.output = e.transcript().unwrap_or_default();
        }
    }
    vec![outcome]
}

/// What a builtin probe of `case` is handed. With `sqlite:DIR` each case has a database file
/// of its own, kept for inspection; one left by an earlier run with the same id is removed
/// first, so every run starts from a fresh file.
fn probe_context(
    case: &PlannedCase<'_>,
    config: &RunConfig,
    key: &str,
    deadline: Duration,
    cancel: &Cancel,
) -> Result<ProbeContext, CaseError> {
    let db = match case.sql.as_ref().map(|s| &s.target) {
        None => DbTarget::SqliteMemory,
        Some(DbTarget::SqliteFile(dir)) => {
            let path = dir.join(format!("{key}.db"));
            remove_database_file(&path)?;
            DbTarget::SqliteFile(path)
        }
        Some(other) => other.clone(),
    };
    Ok(ProbeContext {
        db,
        kafka: config.kafka.clone(),
        deadline,
        run_id: key.to_owned(),
        cancel: cancel.clone(),
    })
}

/// Removes an SQLite database file and its journal, WAL and shared-memory companions.
fn remove_database_file(path: &Path) -> Result<(), CaseError> {
    for suffix in ["", "-journal", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(CaseError::StaleDatabase {
                    path: PathBuf::from(file),
                    source: e,
                })
            }
            _ => {}
        }
    }
    Ok(())
}

/// PASS when the output equals the expected text (trailing line ends aside), else FAIL with a diff.
fn judge(outcome: &mut Outcome) {
    let Some(expected) = outcome.expected.as_deref() else {
        outcome.verdict = Verdict::Pass;
        return;
    };
    let actual = outcome.output.trim_end_matches(['\n', '\r']);
    let expected = expected.trim_end_matches(['\n', '\r']);
    if actual == expected {
        outcome.verdict = Verdict::Pass;
    } else {
        outcome.verdict = Verdict::Fail;
        outcome.message = Some("output differs from the expected output".into());
        let diff = TextDiff::from_lines(&format!("{expected}\n"), &format!("{actual}\n"))
            .unified_diff()
            .header("expected", "actual")
            .to_string();
        outcome.diff = Some(diff);
    }
}

fn run_builtin(name: &str, ctx: ProbeContext, deadline: Duration) -> Result<String, CaseError> {
    let probe = registry::builtin(name).ok_or_else(|| CaseError::UnknownBuiltin {
        name: name.to_owned(),
    })?;
    let (tx, rx) = mpsc::channel();
    let run = probe.run;
    let cancel = ctx.cancel.clone();
    // A probe bounds its own waits by the deadline; should one not, the run still moves on and
    // the thread is left to finish on its own.
    std::thread::Builder::new()
        .name(format!("probe-{name}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (run)(&ctx)));
            let _ = tx.send(result);
        })
        .map_err(|source| CaseError::Thread { source })?;
    let started = Instant::now();
    let answer = loop {
        let left = deadline.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(CaseError::Deadline { limit: deadline });
        }
        if cancel.is_cancelled() {
            // Told to stop: the probe returns at its next step, dropping what it holds.
            let _ = rx.recv_timeout(STOP_GRACE.min(left));
            return Err(CaseError::Cancelled);
        }
        match rx.recv_timeout(POLL.min(left)) {
            Ok(answer) => break answer,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(CaseError::Panicked {
                    what: "its thread ended without an answer".into(),
                })
            }
        }
    };
    match answer {
        Ok(result) => result.map_err(CaseError::from),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(CaseError::Panicked { what })
        }
    }
}

fn run_command(
    argv: &[String],
    dir: &Path,
    env: &std::collections::BTreeMap<String, String>,
    deadline: Duration,
    cancel: &Cancel,
) -> Result<String, CaseError> {
    let spawn = |source| CaseError::Spawn {
        program: argv.first().cloned().unwrap_or_default(),
        dir: dir.to_owned(),
        source,
    };
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| spawn(std::io::Error::other("empty argv")))?;
    let done = process::run(program, args, dir, env, deadline, cancel).map_err(spawn)?;
    if done.cancelled {
        return Err(CaseError::Cancelled);
    }
    if done.timed_out {
        return Err(CaseError::CommandDeadline {
            limit: deadline,
            done,
        });
    }
    match done.status.and_then(|s| s.code()) {
        Some(0) => Ok(done.stdout.text),
        Some(code) => Err(CaseError::Exited { code, done }),
        None => Err(CaseError::Killed { done }),
    }
}

fn tail(what: &str, text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    let last: Vec<&str> = text.lines().rev().take(5).collect();
    format!(
        "; {what}: {}",
        last.into_iter().rev().collect::<Vec<_>>().join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_argv_or_a_missing_program_cannot_start() {
        let env = std::collections::BTreeMap::new();
        let t = Duration::from_secs(1);
        let cancel = Cancel::new();
        let start = |argv: &[String]| run_command(argv, Path::new("."), &env, t, &cancel);
        assert!(matches!(start(&[]), Err(CaseError::Spawn { .. })));
        let argv = ["/nonexistent/program".to_string()];
        assert!(matches!(start(&argv), Err(CaseError::Spawn { .. })));
    }
}
