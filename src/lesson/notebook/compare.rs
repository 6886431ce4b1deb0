//! A cell's produced outputs against its stored ones, as nbval's `compare_outputs` judges them:
//! streams of one name joined (carriage returns applied), every output key compared except
//! those nbval skips, MIME values flattened by type, strings sanitised (an nbval sanitize file's
//! patterns, then the course's redactions) on both sides; a mismatch shown as a diff of both
//! sides' text. Reads nbval's sanitize files (`--nbval-sanitize-with`).

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use serde_json::Value;
use similar::TextDiff;

use crate::lesson::matcher::Redactions;
use crate::lesson::CourseError;

/// What is applied to stored and produced strings alike before they are compared: the
/// patterns of the course's nbval sanitize file (`[notebooks] sanitize`), then the course's
/// `[redactions]` (whose placeholders bless also puts back).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutputRedactions {
    pub nbval: Patterns,
    pub course: Redactions,
}

impl Eq for OutputRedactions {}

/// An nbval sanitize file's (regex, replacement) pairs, in the file's order; the replacement in
/// the `regex` crate's syntax.
#[derive(Debug, Clone, Default)]
pub struct Patterns(Vec<(Regex, String)>);

impl PartialEq for Patterns {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a.as_str() == b.as_str() && x == y)
    }
}

impl Patterns {
    /// Reads the sanitize file `path` (shown as `shown`).
    pub fn read(path: &Path, shown: &Path) -> Result<Patterns, CourseError> {
        let text = std::fs::read_to_string(path).map_err(|e| CourseError::Io {
            path: shown.to_owned(),
            message: format!("cannot read the notebooks' sanitize file: {e}"),
        })?;
        Patterns::parse(&text).map_err(|(line, message)| CourseError::Lesson {
            path: shown.to_owned(),
            line,
            message,
        })
    }

    /// nbval's format: `[section]` headers, each followed by a `regex: EXPR` line and, on the
    /// line after it, a `replace: TEXT` line (Python's `re.sub` replacement: `\1`, `\g<name>`).
    /// nbval silently skips what does not fit; here it is an error at its line.
    fn parse(text: &str) -> Result<Patterns, (usize, String)> {
        let mut patterns: Vec<(Regex, String)> = Vec::new();
        // The open section: its header's line, its name, and whether it has a pair yet.
        let mut section: Option<(usize, String, bool)> = None;
        let mut pending: Option<(usize, Regex)> = None;
        let unfinished = |section: &Option<(usize, String, bool)>| match section {
            Some((line, name, false)) => {
                Err((*line, format!("section [{name}] has no `regex:` line")))
            }
            _ => Ok(()),
        };
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim_end_matches('\r');
            if let Some((at, _)) = &pending {
                let Some(replace) = line.strip_prefix("replace: ") else {
                    return Err((
                        *at,
                        "`regex:` line not followed by a `replace: ` line".into(),
                    ));
                };
                let replace = python_replacement(replace).map_err(|e| (n, e))?;
                if let Some((_, regex)) = pending.take() {
                    // A repeated expression keeps its place and takes the later replacement.
                    match patterns
                        .iter_mut()
                        .find(|(r, _)| r.as_str() == regex.as_str())
                    {
                        Some(known) => known.1 = replace,
                        None => patterns.push((regex, replace)),
                    }
                }
                if let Some(s) = &mut section {
                    s.2 = true;
                }
                continue;
            }
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
                continue;
            }
            if let Some(name) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                unfinished(&section)?;
                section = Some((n, name.to_owned(), false));
            } else if let Some(expr) = line.strip_prefix("regex: ") {
                let regex = Regex::new(expr).map_err(|e| {
                    (
                        n,
                        format!("{expr:?} is not a valid regular expression: {e}"),
                    )
                })?;
                pending = Some((n, regex));
            } else if line.starts_with("replace:") {
                return Err((
                    n,
                    "`replace:` line without a `regex: ` line before it".into(),
                ));
            } else {
                return Err((
                    n,
                    format!(
                        "{trimmed:?} is neither a [section], a `regex: ` nor a `replace: ` line"
                    ),
                ));
            }
        }
        if let Some((at, _)) = pending {
            return Err((
                at,
                "`regex:` line not followed by a `replace: ` line".into(),
            ));
        }
        unfinished(&section)?;
        Ok(Patterns(patterns))
    }

    /// `text` with each pattern replaced in turn, as nbval's `sanitize` does.
    fn apply(&self, text: String) -> String {
        self.0.iter().fold(text, |text, (regex, replace)| {
            regex.replace_all(&text, replace.as_str()).into_owned()
        })
    }
}

/// A Python `re.sub` replacement in the `regex` crate's syntax: group references (`\1`,
/// `\g<1>`, `\g<name>`) become `${..}`, escapes their character, a `$` is doubled.
fn python_replacement(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.next() {
                Some(d) if d.is_ascii_digit() => {
                    let mut group = d.to_string();
                    if let Some(e) = chars.next_if(char::is_ascii_digit) {
                        group.push(e);
                    }
                    out.push_str(&format!("${{{group}}}"));
                }
                Some('g') if chars.peek() == Some(&'<') => {
                    chars.next();
                    let group: String = chars.by_ref().take_while(|&c| c != '>').collect();
                    out.push_str(&format!("${{{group}}}"));
                }
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('f') => out.push('\u{c}'),
                Some('v') => out.push('\u{b}'),
                Some('a') => out.push('\u{7}'),
                Some('b') => out.push('\u{8}'),
                Some('\\') => out.push('\\'),
                Some(d) if d.is_ascii_alphabetic() => {
                    return Err(format!("bad escape \\{d} in replacement {text:?}"))
                }
                Some(d) => {
                    out.push('\\');
                    out.push(d);
                }
                None => return Err(format!("replacement {text:?} ends with a backslash")),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The keys nbval leaves out of the comparison (images too, unless asked: nbval's `--nbdime`).
const SKIPPED: &[&str] = &[
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
];

/// Whether `produced` equals `stored` as nbval compares them; when not, the diff of both
/// (`stored_label` heads the stored side).
pub fn compare(
    stored: &[Value],
    produced: &[Value],
    redactions: &OutputRedactions,
    stored_label: &str,
) -> Result<(), String> {
    let want = flattened(&coalesced(stored), redactions);
    let got = flattened(&coalesced(produced), redactions);
    if want == got {
        return Ok(());
    }
    let why = if want.keys().ne(got.keys()) {
        let missing: Vec<&str> = want
            .keys()
            .filter(|k| !got.contains_key(*k))
            .map(String::as_str)
            .collect();
        let unexpected: Vec<&str> = got
            .keys()
            .filter(|k| !want.contains_key(*k))
            .map(String::as_str)
            .collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("missing output fields: {}", missing.join(", ")));
        }
        if !unexpected.is_empty() {
            why.push(format!(
                "unexpected output fields: {}",
                unexpected.join(", ")
            ));
        }
        why.join("; ")
    } else {
        let key = want
            .iter()
            .find(|(k, v)| got.get(*k) != Some(*v))
            .map_or("", |(k, _)| k.as_str());
        format!("the {key} output differs")
    };
    let diff = TextDiff::from_lines(&shown(&want), &shown(&got))
        .unified_diff()
        .header(stored_label, "produced")
        .to_string();
    Err(format!("{why}\n{diff}"))
}

/// The text a cell printed or showed (its streams and plain-text results), for the report.
pub fn text_of(outputs: &[Value]) -> String {
    let mut text = String::new();
    for output in outputs {
        let part = match output.get("output_type").and_then(Value::as_str) {
            Some("stream") => output.get("text").and_then(Value::as_str),
            Some("execute_result" | "display_data") => output
                .get("data")
                .and_then(|d| d.get("text/plain"))
                .and_then(Value::as_str),
            Some("error") => None,
            _ => None,
        };
        if let Some(part) = part {
            text.push_str(part);
            if !part.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

/// nbval's `coalesce_streams`: the streams of one name joined where the first one stood, each
/// joined text with its overwritten line parts (a carriage return not ending a line) dropped.
fn coalesced(outputs: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut streams: BTreeMap<String, usize> = BTreeMap::new();
    for output in outputs {
        let stream = output.get("output_type").and_then(Value::as_str) == Some("stream");
        let name = output.get("name").and_then(Value::as_str).unwrap_or("");
        let text = output.get("text").and_then(Value::as_str).unwrap_or("");
        match streams.get(name) {
            Some(&at) if stream => {
                let joined = format!("{}{text}", out[at]["text"].as_str().unwrap_or(""));
                out[at]["text"] = Value::String(joined);
            }
            _ => {
                if stream {
                    streams.insert(name.to_owned(), out.len());
                }
                out.push(output.clone());
            }
        }
    }
    for &at in streams.values() {
        let text = out[at]["text"].as_str().unwrap_or("").to_owned();
        out[at]["text"] = Value::String(carriage_returns(&text));
    }
    out
}

/// nbval's `^.*\r(?=[^\n])`: in each line, everything up to its last carriage return that
/// something follows is dropped.
fn carriage_returns(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let body = line.strip_suffix('\n').unwrap_or(line);
            match body
                .char_indices()
                .rev()
                .find(|&(i, c)| c == '\r' && i + 1 < body.len())
            {
                Some((i, _)) => &line[i + 1..],
                None => line,
            }
        })
        .collect()
}

/// nbval's comparison form: per key (a stream's name, an output key, or a MIME type of its
/// `data`), the sanitised values in order.
fn flattened(outputs: &[Value], redactions: &OutputRedactions) -> BTreeMap<String, Vec<Value>> {
    let mut keys: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for output in outputs {
        let Some(fields) = output.as_object() else {
            continue;
        };
        if output.get("output_type").and_then(Value::as_str) == Some("stream") {
            let name = output.get("name").and_then(Value::as_str).unwrap_or("");
            let text = output.get("text").cloned().unwrap_or(Value::Null);
            keys.entry(name.to_owned())
                .or_default()
                .push(sanitized(text, redactions));
            continue;
        }
        for (key, value) in fields {
            if SKIPPED.contains(&key.as_str()) {
                continue;
            }
            match (key.as_str(), value) {
                ("data", Value::Object(data)) => {
                    for (mime, value) in data {
                        if !SKIPPED.contains(&mime.as_str()) {
                            keys.entry(mime.clone())
                                .or_default()
                                .push(sanitized(value.clone(), redactions));
                        }
                    }
                }
                _ => keys
                    .entry(key.clone())
                    .or_default()
                    .push(sanitized(value.clone(), redactions)),
            }
        }
    }
    keys
}

/// A string value with the sanitize file's patterns applied to the whole of it (as nbval
/// does), then the course's redactions to each line.
fn sanitized(value: Value, redactions: &OutputRedactions) -> Value {
    let Value::String(s) = value else {
        return value;
    };
    let s = redactions.nbval.apply(s);
    let course = &redactions.course;
    if course.is_empty() {
        return Value::String(s);
    }
    Value::String(
        s.split_inclusive('\n')
            .map(|line| match line.strip_suffix('\n') {
                Some(body) => format!("{}\n", course.redact(body)),
                None => course.redact(line),
            })
            .collect(),
    )
}

/// The comparison form as text: each key, then its values.
fn shown(keys: &BTreeMap<String, Vec<Value>>) -> String {
    let mut text = String::new();
    for (key, values) in keys {
        for value in values {
            text.push_str(&format!("[{key}]\n"));
            let body = match value {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            text.push_str(&body);
            if !body.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same(stored: Value, produced: Value) -> Result<(), String> {
        let (Value::Array(s), Value::Array(p)) = (stored, produced) else {
            panic!()
        };
        compare(&s, &p, &OutputRedactions::default(), "stored")
    }

    #[test]
    fn streams_are_joined_and_metadata_names_and_counts_are_not_compared() {
        let stored = json!([
            {"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
            {"output_type": "execute_result", "execution_count": 3, "metadata": {"x": 1},
             "data": {"text/plain": "2", "image/png": "AAAA"}}
        ]);
        let produced = json!([
            {"output_type": "stream", "name": "stdout", "text": "a\n"},
            {"output_type": "execute_result", "execution_count": 9, "metadata": {},
             "data": {"text/plain": "2", "image/png": "BBBB"}},
            {"output_type": "stream", "name": "stdout", "text": "b\n"}
        ]);
        assert_eq!(same(stored, produced), Ok(()));
        assert_eq!(
            carriage_returns("10%\r50%\r100%\ndone\r\n"),
            "100%\ndone\r\n"
        );
    }

    #[test]
    fn a_changed_value_or_a_missing_field_is_a_mismatch_with_a_diff() {
        let e = same(
            json!([{"output_type": "stream", "name": "stdout", "text": "3 rows\n"}]),
            json!([{"output_type": "stream", "name": "stdout", "text": "4 rows\n"}]),
        )
        .unwrap_err();
        assert!(e.starts_with("the stdout output differs\n"), "{e}");
        assert!(e.contains("-3 rows\n+4 rows\n"), "{e}");
        let e = same(
            json!([{"output_type": "stream", "name": "stdout", "text": "x\n"}]),
            json!([{"output_type": "error", "ename": "E", "evalue": "v", "traceback": []}]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("missing output fields: stdout; unexpected output fields: ename, evalue"),
            "{e}"
        );
    }

    #[test]
    fn redactions_apply_to_both_sides() {
        let redactions = OutputRedactions {
            course: Redactions::new([("[ID]", "evt-[0-9]+")]).unwrap(),
            ..OutputRedactions::default()
        };
        let stored = [json!({"output_type": "stream", "name": "stdout", "text": "id [ID]\n"})];
        let produced = [json!({"output_type": "stream", "name": "stdout", "text": "id evt-42\n"})];
        assert_eq!(compare(&stored, &produced, &redactions, "s"), Ok(()));
    }

    /// nbval's own sanitize file (tests/fixtures/nbval/ORIGIN.md).
    const NBVAL_DEFAULTS: &str =
        include_str!("../../../tests/fixtures/nbval/sanitize_defaults.cfg");

    #[test]
    fn nbvals_sanitize_file_applies_to_both_sides_with_its_group_references() {
        let patterns = Patterns::parse(NBVAL_DEFAULTS).unwrap();
        assert_eq!(patterns.0.len(), 6);
        assert_eq!(
            patterns.apply("<Foo at 0x7f3a2b> on 2024-05-06 at 12:34:56\nFigure size 640x480 with 1 Axes".into()),
            "<Foo at MEMORY_ADDRESS> on DATESTAMP at TIMESTAMP\nFigure size WIDTHxHEIGHT with 1 Axes"
        );
        let redactions = OutputRedactions {
            nbval: patterns,
            ..OutputRedactions::default()
        };
        let stored = [
            json!({"output_type": "execute_result", "execution_count": 1, "metadata": {},
            "data": {"text/plain": "<Foo at 0x1111> made 2020-01-01 10:00:00"}}),
        ];
        let produced = [
            json!({"output_type": "execute_result", "execution_count": 1, "metadata": {},
            "data": {"text/plain": "<Foo at 0x2222> made 2026-12-06 23:01:02"}}),
        ];
        assert_eq!(compare(&stored, &produced, &redactions, "s"), Ok(()));
        let other = [
            json!({"output_type": "execute_result", "execution_count": 1, "metadata": {},
            "data": {"text/plain": "<Bar at 0x2222> made 2026-12-06 23:01:02"}}),
        ];
        let e = compare(&stored, &other, &redactions, "s").unwrap_err();
        assert!(
            e.contains("-<Foo at MEMORY_ADDRESS> made DATESTAMP TIMESTAMP"),
            "{e}"
        );
        // Without the file the same outputs differ.
        assert!(compare(&stored, &produced, &OutputRedactions::default(), "s").is_err());
    }

    #[test]
    fn python_replacements_and_repeated_expressions_read_as_nbval_reads_them() {
        assert_eq!(
            python_replacement(r"\g<1>-\2$\n\\").unwrap(),
            "${1}-${2}$$\n\\"
        );
        assert!(python_replacement(r"\q").is_err());
        let patterns =
            Patterns::parse("[a]\nregex: x\nreplace: 1\n\n[b]\nregex: x\nreplace: 2\n").unwrap();
        assert_eq!(patterns.apply("x".into()), "2");
    }

    #[test]
    fn a_malformed_sanitize_file_is_an_error_at_its_line() {
        let bad = |text: &str| Patterns::parse(text).unwrap_err();
        let (line, why) = bad("[dates]\nregex: (\\d+\nreplace: N\n");
        assert_eq!(line, 2);
        assert!(why.contains("is not a valid regular expression"), "{why}");
        assert_eq!(bad("[a]\nregex: x\nreplace: y\n[b]\nreplace: y\n").0, 5);
        assert_eq!(
            bad("[a]\nregex: x\nreplace: y\n\n[b]\n\n[c]\nregex: z\nreplace: w\n"),
            (5, "section [b] has no `regex:` line".to_owned())
        );
        assert_eq!(bad("[a]\nregex: x\n\nreplace: y\n").0, 2);
        assert_eq!(bad("[a]\nregex: x\n").0, 2);
        assert_eq!(bad("[a]\nwhat\n").0, 2);
    }

    #[test]
    fn a_missing_sanitize_file_is_named() {
        let e =
            Patterns::read(Path::new("/nonexistent/s.cfg"), Path::new("course/s.cfg")).unwrap_err();
        assert!(
            e.to_string().starts_with("course/s.cfg: cannot read"),
            "{e}"
        );
    }
}
