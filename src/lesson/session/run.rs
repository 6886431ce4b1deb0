//! Runs a document's session blocks in order, up to the last one a run needs: one folder (a
//! working copy of the lesson's run-from folder, or an empty one), one shell, one interpreter;
//! each block judged on its own, the state carried to the next.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;

use super::python::{self, Interpreter, Request};
use super::terminal::{self, Shell};
use super::{Command, SessionBlock, SessionBody, Transcript};
use crate::environment::interpreter::resolve;
use crate::lesson::bless::Rewrite;
use crate::lesson::doc_run::{DocRun, DocVerdict};
use crate::lesson::exercise::pinned_env;
use crate::lesson::isolation::Checkout;
use crate::lesson::matcher::{self, Rules};

/// The folder the blocks run in, kept until they are done.
enum Folder {
    Copy(Checkout),
    Empty(tempfile::TempDir),
}

impl Folder {
    fn path(&self) -> &Path {
        match self {
            Folder::Copy(w) => w.cwd(),
            Folder::Empty(d) => d.path(),
        }
    }
}

/// Runs blocks `0..=upto` of `transcript`, each under `deadline`, stopping when `cancel` is set.
pub fn run(
    transcript: &Transcript,
    upto: usize,
    deadline: Duration,
    cancel: &Cancel,
) -> Vec<DocRun> {
    let blocks = &transcript.blocks[..(upto + 1).min(transcript.blocks.len())];
    let folder = match &transcript.run_from {
        Some(layout) => Checkout::take(layout, None)
            .map(Folder::Copy)
            .map_err(|e| e.to_string()),
        None => tempfile::Builder::new()
            .prefix("lessonprobe-doc-")
            .tempdir()
            .map(Folder::Empty)
            .map_err(|e| format!("cannot create a temporary folder: {e}")),
    };
    let folder = match folder {
        Ok(f) => f,
        Err(why) => {
            return blocks
                .iter()
                .map(|b| DocRun::error(format!("{}: {why}", at(transcript, b.line))))
                .collect()
        }
    };
    let mut state = State::new(transcript, folder);
    blocks
        .iter()
        .map(|block| {
            let started = Instant::now();
            let mut done = if cancel.is_cancelled() {
                DocRun::error("stopped: the run was interrupted before this block ran".into())
            } else {
                state.block(block, started + deadline, deadline, cancel)
            };
            done.duration = started.elapsed();
            done
        })
        .collect()
}

fn at(transcript: &Transcript, line: usize) -> String {
    format!("{}:{line}", transcript.file.display())
}

/// The document's shell and interpreter, started when a block first needs them.
struct State<'a> {
    transcript: &'a Transcript,
    folder: Folder,
    /// Holds `python`/`python3` for the shell: the course's interpreter.
    _tools: Option<tempfile::TempDir>,
    env: BTreeMap<String, String>,
    python: Option<PathBuf>,
    shell: Option<Shell>,
    /// Why the shell is gone, for the blocks after it.
    shell_gone: Option<String>,
    interpreter: Option<Interpreter>,
    interpreter_gone: Option<String>,
}

impl<'a> State<'a> {
    fn new(transcript: &'a Transcript, folder: Folder) -> State<'a> {
        let mut env = pinned_env();
        let testdir =
            std::path::absolute(&transcript.testdir).unwrap_or_else(|_| transcript.testdir.clone());
        env.insert("TESTDIR".into(), testdir.display().to_string());
        let python = resolve(&transcript.python);
        let tools = python.as_deref().and_then(|p| tools(p).ok());
        if let Some(tools) = &tools {
            let path = std::env::var("PATH").unwrap_or_default();
            env.insert("PATH".into(), format!("{}:{path}", tools.path().display()));
        }
        State {
            transcript,
            folder,
            _tools: tools,
            env,
            python,
            shell: None,
            shell_gone: None,
            interpreter: None,
            interpreter_gone: None,
        }
    }

    fn block(
        &mut self,
        block: &SessionBlock,
        deadline: Instant,
        limit: Duration,
        cancel: &Cancel,
    ) -> DocRun {
        match &block.body {
            SessionBody::Terminal(commands) => {
                self.terminal(block, commands, deadline, limit, cancel)
            }
            SessionBody::Python {
                text,
                offset,
                flags,
            } => self.python(
                block,
                ("session", flags),
                text,
                *offset,
                deadline,
                limit,
                cancel,
            ),
            SessionBody::PythonCode { text, offset } => {
                self.python(block, ("code", &[]), text, *offset, deadline, limit, cancel)
            }
        }
    }

    fn terminal(
        &mut self,
        block: &SessionBlock,
        commands: &[Command],
        deadline: Instant,
        limit: Duration,
        cancel: &Cancel,
    ) -> DocRun {
        let t = self.transcript;
        if let Some(why) = &self.shell_gone {
            return DocRun::error(format!("{}: not run: {why}", at(t, block.line)));
        }
        if self.shell.is_none() {
            match Shell::start(self.folder.path(), &self.env) {
                Ok(shell) => self.shell = Some(shell),
                Err(e) => {
                    let why = format!("cannot start bash for the terminal sessions: {e}");
                    self.shell_gone = Some(why.clone());
                    return DocRun::error(format!("{}: {why}", at(t, block.line)));
                }
            }
        }
        let Some(shell) = self.shell.as_mut() else {
            return DocRun::error(format!("{}: no shell", at(t, block.line)));
        };
        let rules = Rules {
            redactions: &t.redactions,
            unordered: false,
        };
        let mut output = String::new();
        let mut faults: Vec<(String, String)> = Vec::new();
        let mut rewrites: Vec<Rewrite> = Vec::new();
        let mut stopped: Option<String> = None;
        for cmd in commands {
            let ran = shell.run(&cmd.script, deadline, cancel);
            output.push_str(&shown_command(&cmd.script));
            output.push_str(&ran.output);
            if !ran.output.is_empty() && !ran.output.ends_with('\n') {
                output.push('\n');
            }
            let first = cmd.script.lines().next().unwrap_or("").trim();
            let status = match ran.end {
                Ok(status) => status,
                Err(stop) => {
                    let why = match stop {
                        terminal::Stop::TimedOut => format!(
                            "`{first}` exceeded the deadline of {}; the shell's process group was killed",
                            humantime::format_duration(limit)
                        ),
                        terminal::Stop::Cancelled => {
                            "stopped: the run was interrupted; the shell's process group was killed".into()
                        }
                        terminal::Stop::ShellEnded(code) => format!(
                            "the shell ended during `{first}` ({})",
                            code.map_or_else(|| "killed".to_owned(), |c| format!("exit status {c}"))
                        ),
                    };
                    self.shell_gone = Some(format!("{}: {why}", at(t, cmd.line)));
                    stopped = Some(format!("{}: {why}", at(t, cmd.line)));
                    break;
                }
            };
            rewrites.extend(blessed(cmd, &ran.output, status, rules));
            if let Err(mismatch) = matcher::check_with(&cmd.expected, &ran.output, rules) {
                faults.push((
                    format!(
                        "{}: `{first}` printed other output than the session shows",
                        at(t, cmd.line)
                    ),
                    mismatch.diff(
                        &cmd.expected,
                        &format!("expected {}", at(t, cmd.output_line)),
                    ),
                ));
            }
            if status != i32::from(cmd.status) {
                faults.push((
                    format!(
                        "{}: `{first}` exited with status {status}, not {}",
                        at(t, cmd.line),
                        cmd.status
                    ),
                    format!(
                        "--- expected {}\n+++ actual\n-exit status {}\n+exit status {status}\n",
                        at(t, cmd.line),
                        cmd.status
                    ),
                ));
            }
        }
        if stopped.is_some() {
            self.shell = None;
        }
        let mut run = judged(stopped, faults, output);
        if run.verdict == DocVerdict::Fail {
            run.blessable = Some(rewrites);
        }
        run
    }

    /// The document's interpreter, started at its first Python block: one namespace for all.
    fn interpreter(&mut self) -> Result<&mut Interpreter, Unstarted> {
        if let Some(why) = &self.interpreter_gone {
            return Err(Unstarted::Gone(why.clone()));
        }
        if self.interpreter.is_none() {
            let Some(python) = &self.python else {
                let why = format!(
                    "python interpreter {:?} not found (give --python INTERP, or `python` in lessonprobe.toml)",
                    self.transcript.python
                );
                self.interpreter_gone = Some(why.clone());
                return Err(Unstarted::Failed(why));
            };
            match Interpreter::start(python, self.folder.path(), &self.env) {
                Ok(i) => self.interpreter = Some(i),
                Err(e) => {
                    let why = format!("cannot start {}: {e}", python.display());
                    self.interpreter_gone = Some(why.clone());
                    return Err(Unstarted::Failed(why));
                }
            }
        }
        self.interpreter
            .as_mut()
            .ok_or_else(|| Unstarted::Failed("no interpreter".to_owned()))
    }

    #[allow(clippy::too_many_arguments)]
    fn python(
        &mut self,
        block: &SessionBlock,
        (kind, flags): (&'static str, &[String]),
        text: &str,
        offset: usize,
        deadline: Instant,
        limit: Duration,
        cancel: &Cancel,
    ) -> DocRun {
        let t = self.transcript;
        let here = at(t, block.line);
        let interpreter = match self.interpreter() {
            Ok(interpreter) => interpreter,
            Err(Unstarted::Gone(why)) => return DocRun::error(format!("{here}: not run: {why}")),
            Err(Unstarted::Failed(why)) => return DocRun::error(format!("{here}: {why}")),
        };
        let file = t.file.display().to_string();
        let request = Request {
            kind,
            text,
            name: &block.id,
            filename: &file,
            offset,
            flags,
        };
        let reply = interpreter.ask(&request, deadline, cancel);
        let output = interpreter.take_stderr();
        let reply = match reply {
            Ok(reply) => reply,
            Err(stop) => {
                let (why, details) = stopped(stop, limit);
                self.interpreter = None;
                self.interpreter_gone = Some(format!("{here}: {why}"));
                let mut run = DocRun::error(format!("{here}: {why}"));
                run.details = details.filter(|d| !d.trim().is_empty());
                run.output = output;
                return run;
            }
        };
        if let Some(error) = reply.error {
            let mut run = DocRun::error(format!("{here}: {error}"));
            run.output = output;
            return run;
        }
        let faults = reply
            .failures
            .iter()
            .map(|f| {
                let what = if kind == "code" {
                    let last = f
                        .report
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("");
                    format!("the python block raised {}", last.trim())
                } else if f.report.contains("\nException raised:\n") {
                    "the example raised an exception the session does not show".to_owned()
                } else {
                    "the example printed other output than the session shows".to_owned()
                };
                (format!("{}: {what}", at(t, f.line)), f.report.clone())
            })
            .collect();
        let mut run = judged(None, faults, output);
        if run.verdict == DocVerdict::Fail && kind == "session" {
            // doctest's own "Got" for each failing example, in place of what it expected.
            run.blessable = reply
                .failures
                .iter()
                .map(|f| {
                    Some(Rewrite::Lines {
                        line: f.want_line?,
                        count: f.want_lines?,
                        content: f.got.clone()?,
                        like: f.line,
                    })
                })
                .collect();
        }
        run
    }
}

/// Why the interpreter stopped before it answered, and what it printed on its way out.
fn stopped(stop: python::Stop, limit: Duration) -> (String, Option<String>) {
    match stop {
        python::Stop::TimedOut => (
            format!(
                "the block exceeded the deadline of {}; the interpreter's process group was killed",
                humantime::format_duration(limit)
            ),
            None,
        ),
        python::Stop::Cancelled => (
            "stopped: the run was interrupted; the interpreter was killed".to_owned(),
            None,
        ),
        python::Stop::Ended(stderr) => (
            format!(
                "the interpreter ended before it answered{}",
                stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map_or_else(String::new, |l| format!(": {}", l.trim()))
            ),
            Some(stderr),
        ),
    }
}

/// Why a Python block finds no interpreter.
enum Unstarted {
    /// An earlier block found it missing, or it died: this block is not run.
    Gone(String),
    /// It could not be found or started now.
    Failed(String),
}

/// How bless rewrites one command of a terminal session that printed `actual` and ended with
/// `status`: its output lines, with the course's redactions passed back and what still matches
/// kept, and its exit status (`[N]` added after the output when the session shows none).
fn blessed(cmd: &Command, actual: &str, status: i32, rules: Rules<'_>) -> Vec<Rewrite> {
    let shown = cmd.expected.lines().count();
    // Where its output lines are, or go when it shows none: under the command's last line.
    let (line, count) = match shown {
        0 => (cmd.line + cmd.script.lines().count(), 0),
        n => (cmd.output_line, n),
    };
    let mut content = match matcher::check_with(&cmd.expected, actual, rules) {
        Ok(()) => None,
        Err(mismatch) if matcher::check_with(&mismatch.blessed, actual, rules).is_ok() => {
            Some(mismatch.blessed)
        }
        Err(_) => Some(
            actual
                .lines()
                .map(|l| format!("{}\n", rules.redactions.redact(l.trim_end())))
                .collect(),
        ),
    };
    let mut out = Vec::new();
    if status != i32::from(cmd.status) {
        match cmd.status_line {
            Some(line) => out.push(Rewrite::Status { line, status }),
            None => {
                let mut lines = content.take().unwrap_or_else(|| cmd.expected.clone());
                lines.push_str(&format!("[{status}]\n"));
                content = Some(lines);
            }
        }
    }
    if let Some(content) = content {
        out.push(Rewrite::Lines {
            line,
            count,
            content,
            like: cmd.line,
        });
    }
    out
}

/// A block's verdict from what stopped it and the faults found.
fn judged(stopped: Option<String>, faults: Vec<(String, String)>, output: String) -> DocRun {
    let details = (!faults.is_empty()).then(|| {
        faults
            .iter()
            .map(|(_, d)| d.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    });
    if let Some(why) = stopped {
        return DocRun {
            verdict: DocVerdict::Error,
            message: Some(why),
            details,
            output,
            duration: Duration::ZERO,
            blessable: None,
        };
    }
    let message = faults.first().map(|(m, _)| match faults.len() {
        1 => m.clone(),
        n => format!("{m} (and {} more)", n - 1),
    });
    DocRun {
        verdict: if faults.is_empty() {
            DocVerdict::Pass
        } else {
            DocVerdict::Fail
        },
        message,
        details,
        output,
        duration: Duration::ZERO,
        blessable: None,
    }
}

/// A command as the session shows it: `$ ` before its first line, `> ` before the others.
fn shown_command(script: &str) -> String {
    script
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{}{l}\n", if i == 0 { "$ " } else { "> " }))
        .collect()
}

/// A folder with `python` and `python3` running `interpreter`: scripts, not links, so a virtual
/// environment's interpreter still finds its environment.
fn tools(interpreter: &Path) -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("lessonprobe-bin-")
        .tempdir()?;
    let quoted = format!(
        "'{}'",
        interpreter.display().to_string().replace('\'', r"'\''")
    );
    for name in ["python", "python3"] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\nexec {quoted} \"$@\"\n"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(dir)
}
