//! Bless: rewrites the expected stdout and stderr blocks of a lesson with the actual output, an
//! expected exit code with the actual status, and a session's expected lines (a command's
//! output and status, a Python example's output), touching no other byte of the file, and
//! shows the change as a diff.

use std::path::Path;

use similar::TextDiff;

use super::document::Block;
use super::CourseError;

/// One change bless makes to a lesson file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// An expected block's content becomes `content` (lines, each ending in a newline).
    Block { block: Block, content: String },
    /// The bytes at `range` (an exit code's value, at `line`) become `text`.
    Value {
        line: usize,
        range: std::ops::Range<usize>,
        text: String,
    },
    /// Inside a session: the `count` document lines from `line` (1-based; `count` 0 inserts
    /// before it) become `content`'s lines, each indented as document line `like` is up to its
    /// prompt (`$ ` or `>>>`).
    Lines {
        line: usize,
        count: usize,
        content: String,
        like: usize,
    },
    /// Inside a terminal session: the number of the `? N` or `[N]` line at `line` becomes
    /// `status`.
    Status { line: usize, status: i32 },
}

/// A lesson file after blessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blessed {
    pub text: String,
    /// A unified diff of the file, empty when nothing changed.
    pub diff: String,
}

/// Makes each rewrite in `text`, the lesson file shown as `shown`. A block whose lines carry a
/// quote marker cannot be rewritten safely and is refused.
pub fn bless(shown: &Path, text: &str, rewrites: &[Rewrite]) -> Result<Blessed, CourseError> {
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::with_capacity(rewrites.len());
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    // The bytes of document line `n` (1-based), its newline included.
    let line_range = |n: usize| -> Option<std::ops::Range<usize>> {
        let start = *starts.get(n.checked_sub(1)?)?;
        let end = starts.get(n).copied().unwrap_or(text.len());
        (start < text.len() || n == 1).then_some(start..end)
    };
    let refused = |line: usize, why: &str| CourseError::Lesson {
        path: shown.to_owned(),
        line,
        message: format!("cannot bless this session: {why}; update it by hand"),
    };
    for rewrite in rewrites {
        let (block, output) = match rewrite {
            Rewrite::Block { block, content } => (block, content),
            Rewrite::Value {
                range, text: value, ..
            } => {
                edits.push((range.clone(), value.clone()));
                continue;
            }
            Rewrite::Lines {
                line,
                count,
                content,
                like,
            } => {
                let prompt = line_range(*like)
                    .map(|r| &text[r])
                    .ok_or_else(|| refused(*like, "the document changed while it ran"))?;
                let indent: String = prompt.chars().take_while(|c| *c == ' ').collect();
                if !prompt[indent.len()..].starts_with('$')
                    && !prompt[indent.len()..].starts_with(">>>")
                {
                    return Err(refused(
                        *like,
                        "its prompt is inside a quote or the document changed",
                    ));
                }
                let start = line_range(*line)
                    .ok_or_else(|| refused(*line, "the document changed while it ran"))?
                    .start;
                let end = match count {
                    0 => start,
                    n => {
                        line_range(line + n - 1)
                            .ok_or_else(|| refused(*line, "the document changed while it ran"))?
                            .end
                    }
                };
                edits.push((start..end, indented(content, &indent)));
                continue;
            }
            Rewrite::Status { line, status } => {
                let range = line_range(*line)
                    .ok_or_else(|| refused(*line, "the document changed while it ran"))?;
                let old = &text[range.clone()];
                let digits = old
                    .char_indices()
                    .find(|(_, c)| c.is_ascii_digit())
                    .map(|(i, _)| i)
                    .ok_or_else(|| refused(*line, "its exit status line changed while it ran"))?;
                let len = old[digits..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .count();
                let at = range.start + digits;
                edits.push((at..at + len, status.to_string()));
                continue;
            }
        };
        let indent = continuation(&block.prefix).ok_or_else(|| CourseError::Lesson {
            path: shown.to_owned(),
            line: block.line,
            message: "cannot bless a block inside a quote; update it by hand".into(),
        })?;
        edits.push((block.content_range.clone(), indented(output, &indent)));
    }
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut new = text.to_owned();
    for (range, content) in edits {
        new.replace_range(range, &content);
    }
    let name = shown.display().to_string();
    let diff = if new == text {
        String::new()
    } else {
        TextDiff::from_lines(text, &new)
            .unified_diff()
            .context_radius(2)
            .header(&name, &name)
            .to_string()
    };
    Ok(Blessed { text: new, diff })
}

/// The indentation of a block's content lines, from what precedes its opening fence: spaces,
/// or a list marker's width. `None` inside a quote.
fn continuation(prefix: &str) -> Option<String> {
    if prefix.contains('>') {
        return None;
    }
    Some(" ".repeat(prefix.chars().count()))
}

/// `text`'s lines, each after `indent` but the empty ones, each ending in a newline.
fn indented(text: &str, indent: &str) -> String {
    text.lines()
        .map(|l| match l.is_empty() {
            true => "\n".to_owned(),
            false => format!("{indent}{l}\n"),
        })
        .collect()
}

/// Writes `text` to `path` through a temporary file beside it, so a crash leaves either the
/// old file or the new one.
pub fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(text: &str, content: &str, prefix: &str) -> Block {
        let start = text.find(content).unwrap();
        Block {
            line: 1,
            lang: "text".into(),
            content: content.into(),
            content_range: start..start + content.len(),
            prefix: prefix.into(),
            unordered: false,
        }
    }

    fn rw(block: &Block, content: &str) -> Rewrite {
        Rewrite::Block {
            block: block.clone(),
            content: content.into(),
        }
    }

    #[test]
    fn an_exit_code_value_changes_alone_beside_a_block() {
        let text = "Run:\n\n```sh\nx\n```\n\nExpected exit code: 3\n\nExpected stderr:\n\n```text\nno\n```\n";
        let at = text.find("3\n").unwrap();
        let b = block(text, "no\n", "");
        let rewrites = [
            rw(&b, "store unavailable\n"),
            Rewrite::Value {
                line: 7,
                range: at..at + 1,
                text: "1".into(),
            },
        ];
        let blessed = bless(Path::new("l.md"), text, &rewrites).unwrap();
        assert_eq!(
            blessed.text,
            "Run:\n\n```sh\nx\n```\n\nExpected exit code: 1\n\nExpected stderr:\n\n```text\nstore unavailable\n```\n"
        );
    }

    #[test]
    fn only_the_block_content_changes() {
        let text = "# L\n\nExpected output:\n\n```text\nTrue True 1\n```\n\nMore text   \r\n";
        let b = block(text, "True True 1\n", "");
        let blessed = bless(
            Path::new("lessons/30.md"),
            text,
            &[rw(&b, "True False 1\n")],
        )
        .unwrap();
        assert_eq!(
            blessed.text,
            "# L\n\nExpected output:\n\n```text\nTrue False 1\n```\n\nMore text   \r\n"
        );
        assert!(
            blessed.diff.contains("-True True 1\n+True False 1\n"),
            "{}",
            blessed.diff
        );
        assert!(blessed
            .diff
            .starts_with("--- lessons/30.md\n+++ lessons/30.md\n"));
        let same = bless(Path::new("l.md"), text, &[rw(&b, "True True 1\n")]).unwrap();
        assert_eq!((same.text.as_str(), same.diff.as_str()), (text, ""));
    }

    #[test]
    fn session_lines_are_replaced_inserted_and_indented_as_their_prompt() {
        let text = "- x\n\n  ```console\n  $ a\n  old\n  ? 2\n  $ b\n  ```\n\n    >>> 1\n    3\n";
        let rewrites = [
            Rewrite::Lines {
                line: 5,
                count: 1,
                content: "new\n\nnewer\n".into(),
                like: 4,
            },
            Rewrite::Status {
                line: 6,
                status: 13,
            },
            Rewrite::Lines {
                line: 8,
                count: 0,
                content: "b\n[1]\n".into(),
                like: 7,
            },
            Rewrite::Lines {
                line: 11,
                count: 1,
                content: "1\n".into(),
                like: 10,
            },
        ];
        let blessed = bless(Path::new("l.md"), text, &rewrites).unwrap();
        assert_eq!(
            blessed.text,
            "- x\n\n  ```console\n  $ a\n  new\n\n  newer\n  ? 13\n  $ b\n  b\n  [1]\n  ```\n\n    >>> 1\n    1\n"
        );
        // A prompt inside a quote, or a document that changed under the run, is refused.
        let quoted = "> ```console\n> $ a\n> x\n> ```\n";
        let e = bless(
            Path::new("l.md"),
            quoted,
            &[Rewrite::Lines {
                line: 3,
                count: 1,
                content: "y\n".into(),
                like: 2,
            }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("l.md:2"), "{e}");
        let e = bless(
            Path::new("l.md"),
            "x\n",
            &[Rewrite::Status { line: 9, status: 1 }],
        )
        .unwrap_err();
        assert!(e.to_string().contains("changed while it ran"), "{e}");
    }

    #[test]
    fn several_blocks_indented_blocks_and_quotes() {
        let text = "1. x\n\n   ```text\n   a\n   ```\n\n```text\nb\n```\n";
        let first = block(text, "   a\n", "   ");
        let second = block(text, "b\n", "");
        let blessed = bless(
            Path::new("l.md"),
            text,
            &[rw(&second, "B\n\nB2\n"), rw(&first, "A\n")],
        )
        .unwrap();
        assert_eq!(
            blessed.text,
            "1. x\n\n   ```text\n   A\n   ```\n\n```text\nB\n\nB2\n```\n"
        );
        let quoted = block("> ```\n> a\n> ```\n", "> a\n", "> ");
        let e = bless(
            Path::new("l.md"),
            "> ```\n> a\n> ```\n",
            &[rw(&quoted, "b\n")],
        )
        .unwrap_err();
        assert!(e.to_string().contains("inside a quote"));
    }
}
