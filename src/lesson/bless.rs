//! Bless: rewrites the expected-output blocks of a lesson with the actual output, touching no
//! byte of the file outside those blocks' content, and shows the change as a diff.

use std::path::Path;

use similar::TextDiff;

use super::document::Block;
use super::CourseError;

/// A lesson file after blessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blessed {
    pub text: String,
    /// A unified diff of the file, empty when nothing changed.
    pub diff: String,
}

/// Replaces each block's content with its new output (lines, each ending in a newline) in
/// `text`, the lesson file shown as `shown`. A block whose lines carry a quote marker cannot be
/// rewritten safely and is refused.
pub fn bless(shown: &Path, text: &str, blocks: &[(&Block, &str)]) -> Result<Blessed, CourseError> {
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::with_capacity(blocks.len());
    for (block, output) in blocks {
        let indent = continuation(&block.prefix).ok_or_else(|| CourseError::Lesson {
            path: shown.to_owned(),
            line: block.line,
            message: "cannot bless a block inside a quote; update it by hand".into(),
        })?;
        let content: String = output
            .lines()
            .map(|l| match l.is_empty() {
                true => "\n".to_owned(),
                false => format!("{indent}{l}\n"),
            })
            .collect();
        edits.push((block.content_range.clone(), content));
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
        }
    }

    #[test]
    fn only_the_block_content_changes() {
        let text = "# L\n\nExpected output:\n\n```text\nTrue True 1\n```\n\nMore text   \r\n";
        let b = block(text, "True True 1\n", "");
        let blessed = bless(Path::new("lessons/30.md"), text, &[(&b, "True False 1\n")]).unwrap();
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
        let same = bless(Path::new("l.md"), text, &[(&b, "True True 1\n")]).unwrap();
        assert_eq!((same.text.as_str(), same.diff.as_str()), (text, ""));
    }

    #[test]
    fn several_blocks_indented_blocks_and_quotes() {
        let text = "1. x\n\n   ```text\n   a\n   ```\n\n```text\nb\n```\n";
        let first = block(text, "   a\n", "   ");
        let second = block(text, "b\n", "");
        let blessed = bless(
            Path::new("l.md"),
            text,
            &[(&second, "B\n\nB2\n"), (&first, "A\n")],
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
            &[(&quoted, "b\n")],
        )
        .unwrap_err();
        assert!(e.to_string().contains("inside a quote"));
    }
}
