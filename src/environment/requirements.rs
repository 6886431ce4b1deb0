//! The named requirements of a pip requirements file, each with its line: what the preflight
//! asks the interpreter for. pip's options (`--find-links`, `--no-index`, `-r`, hashes) and
//! requirements by URL or path are pip's business and skipped here.

use std::path::Path;
use std::str::FromStr;

use crate::diagnostics::{Diagnostic, Source};

/// One PEP 508 requirement and the line it starts on.
#[derive(Debug, Clone)]
pub struct Requirement {
    pub line: usize,
    pub spec: pep508_rs::Requirement,
}

/// The named requirements of `text` (the file `shown`); a line that starts like a name but is
/// no PEP 508 requirement is an error naming its line.
pub fn parse(shown: &Path, text: &str) -> Result<Vec<Requirement>, Diagnostic> {
    let source = Source::new(shown, text);
    let mut found = Vec::new();
    let mut offset = 0;
    let mut logical = String::new();
    let mut start = None;
    for raw in text.split_inclusive('\n') {
        let here = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        start.get_or_insert(here);
        // A trailing backslash continues the line.
        if let Some(head) = line.strip_suffix('\\') {
            logical.push_str(head);
            continue;
        }
        logical.push_str(line);
        let began = start.take().unwrap_or(here);
        let entry = std::mem::take(&mut logical);
        if let Some(req) = requirement(&entry, began, &source)? {
            found.push(req);
        }
    }
    if let Some(began) = start {
        if let Some(req) = requirement(&logical, began, &source)? {
            found.push(req);
        }
    }
    Ok(found)
}

fn requirement(
    entry: &str,
    at: usize,
    source: &Source<'_>,
) -> Result<Option<Requirement>, Diagnostic> {
    // A comment starts at a `#` that begins the line or follows whitespace.
    let mut text = entry;
    if let Some(i) = entry
        .char_indices()
        .find(|&(i, c)| c == '#' && (i == 0 || entry[..i].ends_with(char::is_whitespace)))
        .map(|(i, _)| i)
    {
        text = &entry[..i];
    }
    // Per-requirement options (`--hash=…`) follow the requirement.
    if let Some(i) = text.find(" --").or_else(|| text.find("\t--")) {
        text = &text[..i];
    }
    let text = text.trim();
    let named = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    // Options, and requirements by URL or path, name nothing to look up.
    if !named || text.contains("://") || text.contains(" @ ") && !text.contains(';') {
        return Ok(None);
    }
    match pep508_rs::Requirement::from_str(text) {
        Ok(spec) => Ok(Some(Requirement {
            line: source.line(at),
            spec,
        })),
        Err(e) => Err(source.error(
            at..at + entry.len(),
            format!(
                "not a requirement pip understands: {}",
                first_line(&e.to_string())
            ),
        )),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_requirements_keep_their_lines_and_options_are_skipped() {
        let text = "# the course's needs\n--find-links wheels\n--no-index\n\nSQLAlchemy>=2,<3  # the ORM\npytest \\\n  >=7\n./local-pkg\nrich ; python_version >= '3.8' --hash=sha256:abc\n";
        let reqs = parse(Path::new("requirements.txt"), text).unwrap();
        let got: Vec<(usize, String)> = reqs
            .iter()
            .map(|r| (r.line, r.spec.name.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                (5, "sqlalchemy".to_owned()),
                (6, "pytest".to_owned()),
                (9, "rich".to_owned())
            ]
        );
    }

    #[test]
    fn a_malformed_requirement_names_its_line() {
        let e = parse(Path::new("r.txt"), "ok\nbad>>=1\n").unwrap_err();
        assert!(e.to_string().starts_with("r.txt:2:"), "{e}");
    }
}
