//! The Markdown form of a notebook (MyST-NB, Jupytext's `myst` format): a `.md` file whose front
//! matter names `jupytext` or a `kernelspec`, its ```` ```{code-cell} ```` blocks the code cells
//! (their `:tags:` option or YAML options block giving nbval's tags). It stores no outputs, so
//! each cell only has to run.

use std::path::Path;

use serde_json::{json, Map};

use super::parse::{heading, markers, Read};
use super::Cell;
use crate::lesson::CourseError;

/// Whether Markdown `text` is a notebook: front matter with a top-level `jupytext` or
/// `kernelspec` key.
pub fn is_myst(text: &str) -> bool {
    front_matter(text).is_some_and(|lines| {
        lines
            .iter()
            .any(|l| l.starts_with("jupytext:") || l.starts_with("kernelspec:"))
    })
}

/// The lines of the front matter (between a first line `---` and the next `---`).
fn front_matter(text: &str) -> Option<Vec<&str>> {
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut found = Vec::new();
    for line in lines {
        if line.trim_end() == "---" {
            return Some(found);
        }
        found.push(line);
    }
    None
}

/// The cells and kernel of the MyST notebook `text` (the file `file`).
pub fn read(file: &Path, text: &str) -> Result<Read, CourseError> {
    let front = front_matter(text).unwrap_or_default();
    let kernel = front
        .iter()
        .skip_while(|l| !l.starts_with("kernelspec:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .find_map(|l| l.trim().strip_prefix("name:"))
        .map(|n| n.trim().trim_matches(['"', '\'']).to_owned());
    let lines: Vec<&str> = text.lines().collect();
    // Past the front matter.
    let mut at = if front.is_empty() && !text.starts_with("---") {
        0
    } else {
        front.len() + 2
    };
    let mut cells = Vec::new();
    // Jupytext makes a Markdown cell of the text between code cells.
    let mut index = 0;
    let mut prose = false;
    while at < lines.len() {
        let line = lines[at];
        let Some(fence) = code_cell_fence(line) else {
            prose |= !line.trim().is_empty();
            at += 1;
            continue;
        };
        if prose {
            index += 1;
            prose = false;
        }
        let opened = at + 1;
        let Some(close) = (at + 1..lines.len()).find(|&i| closes(lines[i], fence)) else {
            return Err(CourseError::Lesson {
                path: file.to_owned(),
                line: opened,
                message: "this {code-cell} block is never closed".to_owned(),
            });
        };
        let (tags, first) = options(&lines[at + 1..close]);
        let body = &lines[at + 1 + first..close];
        let source = body.join("\n");
        let mut metadata = Map::new();
        metadata.insert("tags".into(), json!(tags));
        cells.push(Cell {
            index,
            line: opened + first + 1,
            id: None,
            markers: markers(&metadata, &source),
            outputs: Vec::new(),
            source,
            executed: false,
            timeout: None,
            stored_at: None,
        });
        index += 1;
        at = close + 1;
    }
    Ok(Read {
        title: heading(text),
        kernel,
        own: None,
        cells,
    })
}

/// The backticks opening a ```` ```{code-cell} ```` block, if `line` opens one.
fn code_cell_fence(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
    (ticks >= 3 && trimmed[ticks..].trim_start().starts_with("{code-cell}"))
        .then(|| &trimmed[..ticks])
}

fn closes(line: &str, fence: &str) -> bool {
    let trimmed = line.trim();
    trimmed.starts_with(fence) && trimmed.chars().all(|c| c == '`')
}

/// A code cell's options (`:tags: [a, b]` lines, or a `---` YAML block) and where its source
/// starts among `body`'s lines (past them and one blank line).
fn options(body: &[&str]) -> (Vec<String>, usize) {
    let mut tags = Vec::new();
    let mut first = 0;
    if body.first().is_some_and(|l| l.trim_end() == "---") {
        if let Some(end) = body.iter().skip(1).position(|l| l.trim_end() == "---") {
            for line in &body[1..=end] {
                if let Some(list) = line.trim().strip_prefix("tags:") {
                    tags.extend(list_of(list));
                }
            }
            first = end + 2;
        }
    } else {
        while let Some(line) = body.get(first).filter(|l| l.starts_with(':')) {
            if let Some(list) = line.strip_prefix(":tags:") {
                tags.extend(list_of(list));
            }
            first += 1;
        }
    }
    if first > 0 && body.get(first).is_some_and(|l| l.trim().is_empty()) {
        first += 1;
    }
    (tags, first)
}

/// The items of a YAML flow list, `[a, "b"]`.
fn list_of(text: &str) -> Vec<String> {
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|t| t.trim().trim_matches(['"', '\'']).to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MYST: &str = "---\njupytext:\n  text_representation:\n    format_name: myst\nkernelspec:\n  display_name: Python 3\n  name: python3\n---\n\n# Explore\n\nText.\n\n```{code-cell} ipython3\nx = 1\nprint(x)\n```\n\n```{code-cell} ipython3\n:tags: [raises-exception]\n\n1 / 0\n```\n\n````{code-cell}\n---\ntags: [nbval-skip]\n---\nimport time\n````\n";

    #[test]
    fn code_cells_with_their_lines_tags_and_indexes_as_jupytext_makes_them() {
        assert!(is_myst(MYST));
        assert!(!is_myst("# Plain\n\n```python\nx\n```\n"));
        let read = read(Path::new("m.md"), MYST).unwrap();
        assert_eq!(read.kernel.as_deref(), Some("python3"));
        assert_eq!(read.title.as_deref(), Some("Explore"));
        let cells: Vec<(usize, usize, &str, bool, bool)> = read
            .cells
            .iter()
            .map(|c| {
                (
                    c.index,
                    c.line,
                    c.source.as_str(),
                    c.markers.raises,
                    c.markers.skip,
                )
            })
            .collect();
        assert_eq!(
            cells,
            [
                (1, 15, "x = 1\nprint(x)", false, false),
                (2, 22, "1 / 0", true, false),
                (3, 29, "import time", false, true),
            ]
        );
    }
}
