//! Session blocks read from a document: which fenced or indented blocks are terminal or Python
//! sessions, and a terminal session's text split into commands (`$ ` with `> ` or `\`
//! continuation lines), their expected output and exit status (`? N` or `[N]`).

/// The fence languages of a terminal session.
const TERMINAL: &[&str] = &["console", "shell-session", "sh-session", "bash-session"];
/// The fence languages of a Python session, whatever their first line.
const PYTHON: &[&str] = &["pycon", "python-repl", "doctest", "{doctest}"];
/// The fence languages of Python code, a session when their first line is a `>>>` prompt.
pub(crate) const PYTHON_CODE: &[&str] = &["python", "py", "python3"];

/// What runs a session block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Terminal,
    Python,
}

/// The session kind of a block with info string `info` holding `content`, if it is one.
/// `fenced` is false for an indented code block, a session only when it starts with `>>>`.
pub fn kind_of(info: &str, content: &str, fenced: bool) -> Option<Kind> {
    let lang = info
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let prompt = content
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with(">>>"));
    if !fenced {
        return prompt.then_some(Kind::Python);
    }
    if TERMINAL.contains(&lang.as_str()) {
        return Some(Kind::Terminal);
    }
    if PYTHON.contains(&lang.as_str()) || (PYTHON_CODE.contains(&lang.as_str()) && prompt) {
        return Some(Kind::Python);
    }
    None
}

/// One `$ ` command of a terminal session and what the session shows under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The document line of its `$ ` line.
    pub line: usize,
    /// The command, continuation lines included, without prompts.
    pub script: String,
    /// The output shown under it, a newline after each line; empty when it shows none.
    pub expected: String,
    /// The document line of its first output line (its own line when it shows none).
    pub output_line: usize,
    /// The exit status it must end with (`? N` or `[N]`; 0 when absent).
    pub status: u8,
    /// The document line of its `? N` or `[N]` line, if it has one (for bless).
    pub status_line: Option<usize>,
}

/// A terminal session's text, whose first line is document line `first_line`, as its commands;
/// a malformed session as (line, message).
pub fn terminal(content: &str, first_line: usize) -> Result<Vec<Command>, (usize, String)> {
    // A block with no command at all shows output only: nothing to check (the lint says so).
    if !content
        .lines()
        .any(|l| l.starts_with("$ ") || l.trim_end() == "$")
    {
        return Ok(Vec::new());
    }
    struct Open<'a> {
        line: usize,
        script: String,
        continues: bool,
        output: Vec<(usize, &'a str)>,
        status: Option<(usize, u8)>,
    }
    let finish = |open: Open<'_>| -> Result<Command, (usize, String)> {
        let mut output = open.output;
        while output.last().is_some_and(|(_, l)| l.trim().is_empty()) {
            output.pop();
        }
        let mut status = open.status.map(|(_, s)| s);
        let mut status_at = open.status.map(|(l, _)| l);
        if let Some(&(line, last)) = output.last() {
            if let Some(code) = status_line(last, line)? {
                if let Some((first, _)) = open.status {
                    return Err((
                        line,
                        format!("a second exit status for one command (the first on line {first})"),
                    ));
                }
                status = Some(code);
                status_at = Some(line);
                output.pop();
                while output.last().is_some_and(|(_, l)| l.trim().is_empty()) {
                    output.pop();
                }
            }
        }
        Ok(Command {
            line: open.line,
            script: open.script,
            output_line: output.first().map_or(open.line, |(l, _)| *l),
            expected: output.iter().map(|(_, l)| format!("{l}\n")).collect(),
            status: status.unwrap_or(0),
            status_line: status_at,
        })
    };
    let mut commands = Vec::new();
    let mut open: Option<Open> = None;
    for (i, raw) in content.lines().enumerate() {
        let line = first_line + i;
        let text = raw.trim_end_matches('\r');
        let command = text
            .strip_prefix("$ ")
            .or((text.trim_end() == "$").then_some(""));
        if let Some(command) = command {
            if let Some(done) = open.take() {
                commands.push(finish(done)?);
            }
            open = Some(Open {
                line,
                script: format!("{command}\n"),
                continues: command.trim_end().ends_with('\\'),
                output: Vec::new(),
                status: None,
            });
            continue;
        }
        let Some(cmd) = open.as_mut() else {
            if text.trim().is_empty() {
                continue;
            }
            return Err((
                line,
                "output before the first `$ ` command: a terminal session starts with a command line (`$ ls`)".into(),
            ));
        };
        if cmd.output.is_empty() && cmd.status.is_none() {
            let continued = text.strip_prefix("> ").or((text == ">").then_some(""));
            if cmd.continues || continued.is_some() {
                // A terminal shows `> ` (PS2) after a `\` line too; a document may leave it out.
                let part = continued.unwrap_or(text);
                cmd.script.push_str(part);
                cmd.script.push('\n');
                cmd.continues = part.trim_end().ends_with('\\');
                continue;
            }
            // trycmd's form: the status right under the command, before its output.
            if let Some(rest) = text.strip_prefix("? ") {
                let code = status_value(rest, line)?;
                cmd.status = Some((line, code));
                continue;
            }
        }
        cmd.output.push((line, text));
    }
    if let Some(done) = open.take() {
        commands.push(finish(done)?);
    }
    Ok(commands)
}

/// The status a last output line gives: `? N` (trycmd) or `[N]` (cram, scrut).
fn status_line(text: &str, line: usize) -> Result<Option<u8>, (usize, String)> {
    if let Some(rest) = text.strip_prefix("? ") {
        return status_value(rest, line).map(Some);
    }
    let digits = text
        .trim_end()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
    match digits {
        Some(d) => status_value(d, line).map(Some),
        None => Ok(None),
    }
}

fn status_value(text: &str, line: usize) -> Result<u8, (usize, String)> {
    text.trim().parse::<u8>().map_err(|_| {
        (
            line,
            format!(
                "exit status {:?} is not an integer in 0-255 (write `? 1` or `[1]`)",
                text.trim()
            ),
        )
    })
}

/// A MyST `{doctest}` block's text with its option lines (`:options: +ELLIPSIS`) blanked, so
/// doctest reads the examples on their own lines, and the doctest flags its `:options:` names.
pub fn without_directive_options(content: &str) -> (String, Vec<String>) {
    let mut head = true;
    let mut flags = Vec::new();
    let text = content
        .lines()
        .map(|l| {
            let option = head && l.starts_with(':') && l[1..].contains(':');
            head = option;
            if option {
                if let Some(names) = l.strip_prefix(":options:") {
                    flags.extend(
                        names
                            .split([',', ' '])
                            .filter(|w| !w.is_empty())
                            .map(str::to_owned),
                    );
                }
                "\n".to_owned()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    (text, flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_continuations_output_and_statuses() {
        let text = "$ cat <<EOF > a.txt\n> one\n> EOF\n$ cat a.txt \\\n> b.txt \\\n  c.txt\none\ncat: b.txt: No such file or directory\n[1]\n$ false\n? 1\n$ echo '? x'\n? 3\n";
        let cmds = terminal(text, 10).unwrap();
        assert_eq!(cmds.len(), 4);
        assert_eq!(cmds[0].script, "cat <<EOF > a.txt\none\nEOF\n");
        assert_eq!(
            (cmds[0].line, cmds[0].status, cmds[0].expected.as_str()),
            (10, 0, "")
        );
        assert_eq!(cmds[1].script, "cat a.txt \\\nb.txt \\\n  c.txt\n");
        assert_eq!(
            cmds[1].expected,
            "one\ncat: b.txt: No such file or directory\n"
        );
        assert_eq!(
            (cmds[1].line, cmds[1].output_line, cmds[1].status),
            (13, 16, 1)
        );
        assert_eq!((cmds[2].status, cmds[2].expected.as_str()), (1, ""));
        assert_eq!(cmds[3].status, 3);
    }

    #[test]
    fn trycmd_status_before_the_output() {
        let cmds = terminal("$ lessonprobe x\n? 2\nlessonprobe: [..]\n", 1).unwrap();
        assert_eq!(
            (cmds[0].status, cmds[0].expected.as_str()),
            (2, "lessonprobe: [..]\n")
        );
    }

    #[test]
    fn malformed_sessions_name_their_line() {
        assert!(terminal("only output\n", 5).unwrap().is_empty());
        let e = terminal("hello\n$ ls\n", 5).unwrap_err();
        assert_eq!(e.0, 5);
        assert!(
            e.1.contains("output before the first `$ ` command"),
            "{}",
            e.1
        );
        let e = terminal("$ ls\nx\n? abc\n", 5).unwrap_err();
        assert_eq!(e.0, 7);
        assert!(e.1.contains("\"abc\" is not an integer"), "{}", e.1);
        assert_eq!(terminal("$ ls\n[300]\n", 1).unwrap_err().0, 2);
    }

    #[test]
    fn kinds() {
        assert_eq!(kind_of("console", "$ ls", true), Some(Kind::Terminal));
        assert_eq!(kind_of("pycon", "x", true), Some(Kind::Python));
        assert_eq!(kind_of("{doctest}", ">>> 1", true), Some(Kind::Python));
        assert_eq!(kind_of("python", "\n>>> 1\n1\n", true), Some(Kind::Python));
        assert_eq!(kind_of("python", "x = 1", true), None);
        assert_eq!(kind_of("", ">>> 1", false), Some(Kind::Python));
        assert_eq!(kind_of("", "x", false), None);
        assert_eq!(kind_of("sh", "$ ls", true), None);
    }
}
