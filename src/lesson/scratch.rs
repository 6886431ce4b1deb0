//! Runs a document probe in a scratch copy of its run-from folder: the saved files written
//! there, the command run by the shell with the course's interpreter for a leading
//! `python`/`python3`, under a deadline, its process group killed; stdout judged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::document::{CodeProbe, DocProbe};
use lessonprobe_probes::Cancel;

use super::matcher;
use crate::process::{self, Tail};

/// Folders never copied into a scratch run: version control, caches, virtual environments.
const NOT_COPIED: &[&str] = &[
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    "node_modules",
];

/// Lines of each stream's tail shown with a failure.
const SHOWN_LINES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocVerdict {
    Pass,
    Fail,
    Error,
}

/// What one run of a document probe gave.
#[derive(Debug, Clone)]
pub struct DocRun {
    pub verdict: DocVerdict,
    /// Why it did not pass; names the lesson file and line.
    pub message: Option<String>,
    /// A diff of expected against actual output, or the tails of a failed command.
    pub details: Option<String>,
    pub stdout: Tail,
    pub stderr: Tail,
    /// The actual output as it would replace the expected block (elisions that held kept),
    /// when the only fault is an output mismatch.
    pub blessable: Option<String>,
}

impl DocRun {
    /// An ERROR for a probe that could not be run at all.
    pub fn not_run(why: &str) -> DocRun {
        DocRun::error(why.to_owned())
    }

    fn error(message: String) -> DocRun {
        DocRun {
            verdict: DocVerdict::Error,
            message: Some(message),
            details: None,
            stdout: Tail::default(),
            stderr: Tail::default(),
            blessable: None,
        }
    }

    /// stdout, then stderr if it said anything: the report's captured output.
    pub fn output(&self) -> String {
        process::transcript(&self.stdout, &self.stderr)
    }
}

/// Runs `probe` (whose body is `code`) with `deadline`, stopping when `cancel` is set.
pub fn run(probe: &DocProbe, code: &CodeProbe, deadline: Duration, cancel: &Cancel) -> DocRun {
    let at = format!("{}:{}", probe.file.display(), code.command.line);
    let python = match resolve(&code.python) {
        Some(p) => p,
        None => {
            return DocRun::error(format!(
                "{at}: python interpreter {:?} not found (give --python INTERP, or `python` in lessonprobe.toml)",
                code.python
            ))
        }
    };
    let scratch = match tempfile::Builder::new()
        .prefix("lessonprobe-doc-")
        .tempdir()
    {
        Ok(dir) => dir,
        Err(e) => return DocRun::error(format!("cannot create a scratch folder: {e}")),
    };
    let folder_name = code
        .run_from
        .file_name()
        .map_or_else(|| PathBuf::from("project"), PathBuf::from);
    let cwd = scratch.path().join(folder_name);
    if let Err(e) = copy_tree(&code.run_from, &cwd) {
        return DocRun::error(format!(
            "cannot copy {} into a scratch folder: {e}",
            code.run_from.display()
        ));
    }
    for file in &code.files {
        let to = cwd.join(&file.path);
        let written = to
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::write(&to, &file.content));
        if let Err(e) = written {
            return DocRun::error(format!(
                "{}:{}: cannot write {}: {e}",
                probe.file.display(),
                file.line,
                file.path.display()
            ));
        }
    }
    let script = substitute_python(&code.command.content, &python);
    let shell = if code.command.lang == "bash" {
        "bash"
    } else {
        "sh"
    };
    let env = BTreeMap::from([
        ("PYTHONIOENCODING".to_owned(), "utf-8".to_owned()),
        ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
    ]);
    let args = ["-e".to_owned(), "-c".to_owned(), script];
    let done = match process::run(shell, &args, &cwd, &env, deadline, cancel) {
        Ok(done) => done,
        Err(e) => return DocRun::error(format!("{at}: cannot start {shell}: {e}")),
    };
    drop(scratch);
    let mut result = DocRun {
        verdict: DocVerdict::Pass,
        message: None,
        details: None,
        stdout: done.stdout,
        stderr: done.stderr,
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
    match done.status.and_then(|s| s.code()) {
        Some(0) => {}
        Some(code) => {
            result.verdict = DocVerdict::Fail;
            result.message = Some(format!(
                "{at}: `{command}` exited with status {code}{}",
                last_line(&result.stderr)
            ));
            result.details = tails(&result);
            return result;
        }
        None => {
            result.verdict = DocVerdict::Error;
            result.message = Some(format!("{at}: `{command}` was killed by a signal"));
            result.details = tails(&result);
            return result;
        }
    }
    let Some(expected) = &code.expected else {
        return result;
    };
    let expected_at = format!("{}:{}", probe.file.display(), expected.line);
    if result.stdout.truncated() {
        result.verdict = DocVerdict::Fail;
        result.message = Some(format!(
            "{expected_at}: stdout was {} bytes; only its last {} were kept, so it cannot match the expected output",
            result.stdout.total_bytes,
            process::TAIL_BYTES
        ));
        return result;
    }
    if let Err(mismatch) = matcher::check(&expected.content, &result.stdout.text) {
        result.verdict = DocVerdict::Fail;
        result.message = Some(format!(
            "{expected_at}: output differs from the expected output"
        ));
        result.details = Some(mismatch.diff(&expected.content, &format!("expected {expected_at}")));
        // Write back what still matches with its elisions, else the plain output.
        result.blessable = Some(
            if matcher::check(&mismatch.normalized, &result.stdout.text).is_ok() {
                mismatch.normalized
            } else {
                result
                    .stdout
                    .text
                    .lines()
                    .map(|l| format!("{}\n", l.trim_end()))
                    .collect()
            },
        );
    }
    result
}

/// The interpreter as a path the shell can run from any folder, if it exists.
fn resolve(python: &str) -> Option<PathBuf> {
    let path = Path::new(python);
    if python.contains('/') {
        let abs = std::path::absolute(path).ok()?;
        return is_executable(&abs).then_some(abs);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(python))
            .find(|candidate| is_executable(candidate))
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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

/// Copies a folder tree; symbolic links stay links.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        let target = to.join(&name);
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_dir() {
            if !NOT_COPIED.contains(&name.to_string_lossy().as_ref()) {
                copy_tree(&entry.path(), &target)?;
            }
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

fn last_line(tail: &Tail) -> String {
    tail.text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(String::new, |l| format!(": {}", l.trim()))
}

/// The last lines of stderr and stdout, for a command that failed.
fn tails(run: &DocRun) -> Option<String> {
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

    #[test]
    fn interpreters_resolve_on_path_or_by_path() {
        assert!(resolve("sh").is_some());
        assert!(resolve("/bin/sh").is_some());
        assert!(resolve("no-such-python-3.99").is_none());
        assert!(resolve("./no/such/python").is_none());
    }

    #[test]
    fn copies_keep_links_and_skip_caches() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(from.path().join("pkg/__pycache__")).unwrap();
        std::fs::write(from.path().join("pkg/a.py"), "x").unwrap();
        std::fs::write(from.path().join("pkg/__pycache__/a.pyc"), "x").unwrap();
        std::os::unix::fs::symlink("pkg/a.py", from.path().join("link.py")).unwrap();
        let to = tempfile::tempdir().unwrap();
        copy_tree(from.path(), &to.path().join("p")).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.path().join("p/pkg/a.py")).unwrap(),
            "x"
        );
        assert!(!to.path().join("p/pkg/__pycache__").exists());
        assert_eq!(
            std::fs::read_link(to.path().join("p/link.py")).unwrap(),
            PathBuf::from("pkg/a.py")
        );
    }
}
