//! Runs a code exercise or snippet in a working copy of its run-from folder (or of the folder
//! the step it continues left; the copies come from `isolation`): the saved files written
//! there, its hidden setup run, its fault steps done to the run's services, the command run by
//! the shell with the course's interpreter for a leading `python`/`python3`, in a pinned
//! environment, under a deadline, its process group killed; exit status, stdout and stderr
//! judged.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::bless::Rewrite;
use super::doc_run::{DocRun, DocVerdict};
use super::document::{Block, CodeProbe, DocProbe, FaultStep};
use super::isolation::{Checkout, Delta, Layout};
use super::labels::ServiceAction;
use lessonprobe_probes::Cancel;

use super::matcher::{self, Rules};
use crate::environment::interpreter::resolve;
use crate::process::{self, Finished, Tail};
use crate::services::Faults;

/// Lines of each stream's tail shown with a failure.
const SHOWN_LINES: usize = 20;

/// The environment every document probe's setup and command run with, on top of the
/// inherited one, so output does not vary with the machine: locale, time zone, hash order,
/// terminal width, colour.
pub const PINNED_ENV: &[(&str, &str)] = &[
    ("LANG", "C.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("TZ", "UTC"),
    ("PYTHONHASHSEED", "0"),
    ("COLUMNS", "80"),
    ("NO_COLOR", "1"),
    ("PYTHONIOENCODING", "utf-8"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
];

/// [`PINNED_ENV`] as the variables a child is given.
pub fn pinned_env() -> BTreeMap<String, String> {
    PINNED_ENV
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// What one run of a step gave while it is judged, its streams apart (the tails and the
/// comparisons read them); told as the one result, a [`DocRun`].
#[derive(Debug, Clone)]
struct StepRun {
    verdict: DocVerdict,
    /// Why it did not pass; names the lesson file and line.
    message: Option<String>,
    /// A diff of expected against actual output, or the tails of a failed command.
    details: Option<String>,
    stdout: Tail,
    stderr: Tail,
    /// What the hidden setup ran and printed, and the fault steps done, when the probe has
    /// any.
    setup: Option<String>,
    /// The rewrites of the lesson that would make it pass (expected stdout and stderr blocks,
    /// with the elisions and placeholders that held kept, and the exit code's value), when
    /// those are its only faults.
    blessable: Option<Vec<Rewrite>>,
}

/// What a step that passed left in its working copy, kept for the steps that continue it.
#[derive(Debug)]
pub struct Workspace {
    left: Delta,
}

impl StepRun {
    fn error(message: String) -> StepRun {
        StepRun {
            verdict: DocVerdict::Error,
            message: Some(message),
            details: None,
            stdout: Tail::default(),
            stderr: Tail::default(),
            setup: None,
            blessable: None,
        }
    }

    /// The hidden setup's transcript and the fault steps done, when there are any, then stdout, then stderr if it said
    /// anything: the report's captured output.
    fn output(&self) -> String {
        let command = process::transcript(&self.stdout, &self.stderr);
        match &self.setup {
            Some(setup) => format!("{setup}--- command ---\n{command}"),
            None => command,
        }
    }

    fn told(self) -> DocRun {
        let output = self.output();
        DocRun {
            verdict: self.verdict,
            message: self.message,
            details: self.details,
            output,
            duration: Duration::ZERO,
            blessable: self.blessable,
        }
    }
}

/// What a step runs under besides its own text: the variables of the declared services it
/// needs, added to its environment, its deadline, the run's cancellation, and the run's
/// services its fault steps act on (none outside a run that started them).
#[derive(Debug, Clone, Copy)]
pub struct Conditions<'a> {
    pub env: &'a BTreeMap<String, String>,
    pub deadline: Duration,
    pub cancel: &'a Cancel,
    pub services: Option<&'a dyn Faults>,
}

/// Runs `probe` (whose body is `code`) in a copy of the folder `after` left (a fresh copy of
/// its run-from folder without one) under `under`, and hands back the folder as it left it
/// when it passed.
pub fn run_step(
    probe: &DocProbe,
    code: &CodeProbe,
    after: Option<&Workspace>,
    under: Conditions<'_>,
) -> (DocRun, Option<Workspace>) {
    let (run, left) = step(probe, code, after, under);
    (run.told(), left)
}

fn step(
    probe: &DocProbe,
    code: &CodeProbe,
    after: Option<&Workspace>,
    under: Conditions<'_>,
) -> (StepRun, Option<Workspace>) {
    let Conditions {
        env: services,
        deadline,
        cancel,
        services: faults,
    } = under;
    let started = Instant::now();
    let at = format!("{}:{}", probe.file.display(), code.command.line);
    let Some(python) = resolve(&code.python) else {
        return (
            StepRun::error(format!(
                "{at}: python interpreter {:?} not found (give --python INTERP, or `python` in lessonprobe.toml)",
                code.python
            )),
            None,
        );
    };
    let copy = match checkout(probe, code, after) {
        Ok(s) => s,
        Err(message) => return (StepRun::error(message), None),
    };
    let cwd = copy.cwd().to_owned();
    // The services' variables, then the pinned ones, which win.
    let mut env = services.clone();
    env.extend(pinned_env());
    let mut setup_transcript = None;
    if let Some(setup) = &code.setup {
        let setup_at = format!("{}:{}", probe.file.display(), setup.line);
        let script = substitute_python(&setup.script, &python);
        let args = ["-e".to_owned(), "-c".to_owned(), script];
        let done = match process::run(&setup.lang, &args, &cwd, &env, deadline, cancel) {
            Ok(done) => done,
            Err(e) => {
                let message = format!(
                    "{setup_at}: cannot start the hidden setup's {}: {e}",
                    setup.lang
                );
                return (StepRun::error(message), None);
            }
        };
        let shown: String = setup.script.lines().map(|l| format!("$ {l}\n")).collect();
        let transcript = format!(
            "--- hidden setup ({setup_at}) ---\n{shown}{}",
            with_newline(process::transcript(&done.stdout, &done.stderr))
        );
        if let Some(why) = setup_failure(&done, deadline) {
            let mut result = StepRun::error(format!("{setup_at}: hidden setup {why}"));
            result.stdout = done.stdout;
            result.stderr = done.stderr;
            result.details = tails(&result);
            result.setup = Some(transcript);
            return (result, None);
        }
        setup_transcript = Some(transcript);
    }
    if !code.faults.is_empty() {
        match apply_faults(probe, &code.faults, faults) {
            Ok(done) => setup_transcript = Some(setup_transcript.unwrap_or_default() + &done),
            Err(message) => return (StepRun::error(message), None),
        }
    }
    let script = substitute_python(&code.command.content, &python);
    let shell = if code.command.lang == "bash" {
        "bash"
    } else {
        "sh"
    };
    let args = ["-e".to_owned(), "-c".to_owned(), script];
    let left = deadline.saturating_sub(started.elapsed());
    let done = match process::run(shell, &args, &cwd, &env, left, cancel) {
        Ok(done) => done,
        Err(e) => {
            return (
                StepRun::error(format!("{at}: cannot start {shell}: {e}")),
                None,
            )
        }
    };
    let mut result = judge(probe, code, done, deadline);
    result.setup = setup_transcript;
    if result.verdict != DocVerdict::Pass {
        return (result, None);
    }
    match copy.keep() {
        Ok(left) => (result, Some(Workspace { left })),
        Err(e) => {
            result.verdict = DocVerdict::Error;
            result.message = Some(format!(
                "{at}: cannot keep what it left in {} for the steps that continue it: {e}",
                cwd.display()
            ));
            (result, None)
        }
    }
}

/// Does `faults` in order to the run's `services`, each waited for; what was done, for the
/// step's output, or the first that failed (a start names its service and its log's tail).
fn apply_faults(
    probe: &DocProbe,
    faults: &[FaultStep],
    services: Option<&dyn Faults>,
) -> Result<String, String> {
    let mut done = String::new();
    for step in faults {
        let at = format!("{}:{}", probe.file.display(), step.line);
        let (verb, name) = (step.action.verb(), step.service.as_str());
        let Some(services) = services else {
            return Err(format!(
                "{at}: cannot {verb} service {name}: this run started no services"
            ));
        };
        let started = Instant::now();
        let result = match step.action {
            ServiceAction::Stop => services.stop_service(name),
            ServiceAction::Start => services.start_service(name),
            ServiceAction::Restart => services
                .stop_service(name)
                .and_then(|()| services.start_service(name)),
        };
        result.map_err(|e| format!("{at}: {verb} service {name} failed: {e}"))?;
        let took = Duration::from_millis(started.elapsed().as_millis() as u64);
        done.push_str(&format!(
            "--- {verb} service {name} ({at}): done in {} ---\n",
            humantime::format_duration(took)
        ));
    }
    Ok(done)
}

/// A working copy of the folder `code` runs from (as the step `after` left it, when it continues
/// one) with the probe's saved files written in it: the folder a document probe runs in. The
/// copy goes back to its pool, reset, when the [`Checkout`] is dropped.
pub fn checkout(
    probe: &DocProbe,
    code: &CodeProbe,
    after: Option<&Workspace>,
) -> Result<Checkout, String> {
    let layout = Layout {
        source: code.run_from.clone(),
        shared: code.shared.clone(),
    };
    let copy = Checkout::take(&layout, after.map(|w| &w.left)).map_err(|e| e.to_string())?;
    let cwd = copy.cwd();
    for file in &code.files {
        let to = cwd.join(&file.path);
        let written = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&to, &file.content));
        if let Err(e) = written {
            return Err(format!(
                "{}:{}: cannot write {}: {e}",
                probe.file.display(),
                file.line,
                file.path.display()
            ));
        }
    }
    Ok(copy)
}

/// Why a hidden setup did not succeed, if it did not.
fn setup_failure(done: &Finished, deadline: Duration) -> Option<String> {
    if done.cancelled {
        return Some("stopped: the run was interrupted; process group killed".into());
    }
    if done.timed_out {
        return Some(format!(
            "exceeded the deadline of {}; process group killed",
            humantime::format_duration(deadline)
        ));
    }
    match done.status.and_then(|s| s.code()) {
        Some(0) => None,
        Some(code) => Some(format!(
            "failed: exited with status {code}{}",
            last_line(&done.stderr)
        )),
        None => Some("was killed by a signal".into()),
    }
}

/// One way an expected form did not hold.
struct Fault {
    message: String,
    details: String,
    rewrite: Option<Rewrite>,
}

/// The verdict of a finished command: its exit status, then stdout and stderr against the
/// lesson's expected blocks.
fn judge(probe: &DocProbe, code: &CodeProbe, done: Finished, deadline: Duration) -> StepRun {
    let at = format!("{}:{}", probe.file.display(), code.command.line);
    let mut result = StepRun {
        verdict: DocVerdict::Pass,
        message: None,
        details: None,
        stdout: done.stdout,
        stderr: done.stderr,
        setup: None,
        blessable: None,
    };
    let command = code.command.content.trim();
    if done.cancelled {
        result.verdict = DocVerdict::Error;
        result.message = Some(format!(
            "{at}: stopped: the run was interrupted; process group killed"
        ));
        return result;
    }
    if done.timed_out {
        result.verdict = DocVerdict::Error;
        result.message = Some(format!(
            "{at}: deadline of {} exceeded; process group killed",
            humantime::format_duration(deadline)
        ));
        result.details = tails(&result);
        return result;
    }
    let Some(status) = done.status.and_then(|s| s.code()) else {
        result.verdict = DocVerdict::Error;
        result.message = Some(format!("{at}: `{command}` was killed by a signal"));
        result.details = tails(&result);
        return result;
    };
    let mut faults = Vec::new();
    match &code.exit_code {
        None if status != 0 => {
            result.verdict = DocVerdict::Fail;
            result.message = Some(format!(
                "{at}: `{command}` exited with status {status}{}",
                last_line(&result.stderr)
            ));
            result.details = tails(&result);
            return result;
        }
        Some(expected) if i32::from(expected.code) != status => {
            let exit_at = format!("{}:{}", probe.file.display(), expected.line);
            let diff = similar::TextDiff::from_lines(
                &format!("exit code {}\n", expected.code),
                &format!("exit code {status}\n"),
            )
            .unified_diff()
            .header(&format!("expected {exit_at}"), "actual")
            .to_string();
            faults.push(Fault {
                message: format!(
                    "{exit_at}: `{command}` exited with status {status}, not the expected exit code {}{}",
                    expected.code,
                    last_line(&result.stderr)
                ),
                details: format!("{diff}{}", tails(&result).unwrap_or_default()),
                rewrite: Some(Rewrite::Value {
                    line: expected.line,
                    range: expected.value.clone(),
                    text: status.to_string(),
                }),
            });
        }
        _ => {}
    }
    let rules = |block: &Block| Rules {
        redactions: &code.redactions,
        unordered: block.unordered,
    };
    if let Some(expected) = &code.expected {
        faults.extend(compare(
            probe,
            "stdout",
            "output",
            expected,
            &result.stdout,
            rules(expected),
        ));
    }
    if let Some(expected) = &code.stderr {
        faults.extend(compare(
            probe,
            "stderr",
            "stderr",
            expected,
            &result.stderr,
            rules(expected),
        ));
    }
    if faults.is_empty() {
        return result;
    }
    result.verdict = DocVerdict::Fail;
    result.message = faults.first().map(|f| f.message.clone());
    result.details = Some(faults.iter().map(|f| f.details.as_str()).collect());
    result.blessable = faults.into_iter().map(|f| f.rewrite).collect();
    result
}

/// `stream` (`stdout` or `stderr`) against its expected block; the fault when it differs.
fn compare(
    probe: &DocProbe,
    stream: &str,
    what: &str,
    expected: &Block,
    tail: &Tail,
    rules: Rules<'_>,
) -> Option<Fault> {
    let expected_at = format!("{}:{}", probe.file.display(), expected.line);
    if tail.truncated() {
        return Some(Fault {
            message: format!(
                "{expected_at}: {stream} was {} bytes; only its last {} were kept, so it cannot match the expected {what}",
                tail.total_bytes,
                process::TAIL_BYTES
            ),
            details: String::new(),
            rewrite: None,
        });
    }
    let mismatch = matcher::check_with(&expected.content, &tail.text, rules).err()?;
    let details = mismatch.diff(&expected.content, &format!("expected {expected_at}"));
    // Write back what still matches with its elisions and placeholders, and the run's other
    // lines with the course's placeholders in place of their values; else the whole output so.
    let content = if matcher::check_with(&mismatch.blessed, &tail.text, rules).is_ok() {
        mismatch.blessed
    } else {
        tail.text
            .lines()
            .map(|l| format!("{}\n", rules.redactions.redact(l.trim_end())))
            .collect()
    };
    Some(Fault {
        // stdout keeps the words lessons have always been reported with.
        message: match stream {
            "stdout" => format!("{expected_at}: output differs from the expected output"),
            _ => format!("{expected_at}: {stream} differs from the expected {what}"),
        },
        details,
        rewrite: Some(Rewrite::Block {
            block: expected.clone(),
            content,
        }),
    })
}

fn with_newline(mut text: String) -> String {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Each line whose first word is `python` or `python3` runs `interpreter` instead.
fn substitute_python(script: &str, interpreter: &Path) -> String {
    let quoted = shell_quote(&interpreter.display().to_string());
    script
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            for word in ["python3", "python"] {
                if let Some(rest) = trimmed.strip_prefix(word) {
                    if rest.is_empty() || rest.starts_with([' ', '\t']) {
                        return format!("{indent}{quoted}{rest}\n");
                    }
                }
            }
            format!("{line}\n")
        })
        .collect()
}

fn shell_quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn last_line(tail: &Tail) -> String {
    tail.text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(String::new, |l| format!(": {}", l.trim()))
}

/// The last lines of stderr and stdout, for a command that failed.
fn tails(run: &StepRun) -> Option<String> {
    let mut out = String::new();
    for (name, tail) in [("stderr", &run.stderr), ("stdout", &run.stdout)] {
        let lines: Vec<&str> = tail.text.lines().collect();
        if lines.is_empty() {
            continue;
        }
        let from = lines.len().saturating_sub(SHOWN_LINES);
        let cut = if from > 0 || tail.truncated() {
            ", last lines"
        } else {
            ""
        };
        out.push_str(&format!("{name}{cut}:\n"));
        for line in &lines[from..] {
            out.push_str(&format!("  {line}\n"));
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first probe of a one-exercise lesson 31 `body`, run in a course with an empty
    /// project.
    fn run_exercise(body: &str) -> DocRun {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        let text = format!("### Answer EX-31-01 [code]\n\n{body}");
        let doc =
            super::super::document::parse(&course.settings, 31, Path::new("l.md"), text.as_bytes())
                .unwrap();
        let probe = &doc.probes[0];
        let super::super::DocBody::Code(code) = &probe.body else {
            panic!()
        };
        let under = Conditions {
            env: &BTreeMap::new(),
            deadline: Duration::from_secs(10),
            cancel: &Cancel::new(),
            services: None,
        };
        let done = run_step(probe, code, None, under).0;
        // The pooled copies are temp folders; the binary releases them as it ends.
        crate::lesson::isolation::release_all();
        done
    }

    #[test]
    fn an_expected_exit_code_and_stderr_are_judged_and_blessable() {
        let body = "Run:\n\n```sh\necho out; echo err >&2; exit 3\n```\n\nExpected exit code: 3\n\nExpected stderr:\n\n```text\nerr\n```\n";
        let ok = run_exercise(body);
        assert_eq!(ok.verdict, DocVerdict::Pass, "{:?}", ok.message);
        let wrong = run_exercise(
            &body
                .replace("exit 3", "exit 2")
                .replace("echo err", "echo other"),
        );
        assert_eq!(wrong.verdict, DocVerdict::Fail);
        assert_eq!(
            wrong.message.as_deref(),
            Some("l.md:9: `echo out; echo other >&2; exit 2` exited with status 2, not the expected exit code 3: other")
        );
        let rewrites = wrong.blessable.unwrap();
        assert_eq!(rewrites.len(), 2);
        assert!(matches!(&rewrites[0], Rewrite::Value { text, line: 9, .. } if text == "2"));
        assert!(matches!(&rewrites[1], Rewrite::Block { content, .. } if content == "other\n"));
        // Without the exit-code paragraph, a non-zero exit is a plain FAIL that bless leaves.
        let plain = run_exercise("Run:\n\n```sh\nexit 3\n```\n");
        assert_eq!(
            (plain.verdict, plain.blessable.is_none()),
            (DocVerdict::Fail, true)
        );
    }

    #[test]
    fn a_hidden_setup_runs_first_in_the_pinned_environment_and_its_failure_is_an_error() {
        let body = "<!-- lessonprobe: setup\n```sh\necho \"$TZ $LC_ALL $PYTHONHASHSEED $COLUMNS $NO_COLOR\" > env.txt\n```\n-->\n\nRun:\n\n```sh\ncat env.txt\n```\n\nExpected output:\n\n```text\nUTC C.UTF-8 0 80 1\n```\n";
        let ok = run_exercise(body);
        assert_eq!(ok.verdict, DocVerdict::Pass, "{:?}", ok.message);
        assert!(
            ok.output
                .starts_with("--- hidden setup (l.md:3) ---\n$ echo"),
            "{}",
            ok.output
        );
        let broken = run_exercise(&body.replace("> env.txt", "; exit 4"));
        assert_eq!(broken.verdict, DocVerdict::Error);
        assert_eq!(
            broken.message.as_deref(),
            Some("l.md:3: hidden setup failed: exited with status 4")
        );
    }

    #[test]
    fn a_leading_python_becomes_the_interpreter_and_nothing_else_does() {
        let script = "python a.py\n  python3 -c 'print(1)'\necho python\npythonic x\npython\n";
        assert_eq!(
            substitute_python(script, Path::new("/venv/bin/python")),
            "/venv/bin/python a.py\n  /venv/bin/python -c 'print(1)'\necho python\npythonic x\n/venv/bin/python\n"
        );
        assert_eq!(
            substitute_python("python x\n", Path::new("/my venv/py")),
            "'/my venv/py' x\n"
        );
    }
}
