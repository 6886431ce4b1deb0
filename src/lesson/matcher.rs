//! The expected-output matcher: exact after trimming trailing whitespace, with two elisions as
//! trycmd and snapbox write them — a line `...` matches any number of lines, and `[..]` matches
//! any text within one line — and, as snapbox's redactions, the course's named placeholders
//! (`[EVENT_ID]`): each matches, within one line, the text its regular expression matches. A
//! placeholder the course does not name (`[EXE]`, `[ROOT]`) is plain text. An `unordered`
//! block matches output with the same lines in any order. Unlike snapbox it backtracks and
//! normalises no paths or newlines.

use regex::Regex;
use similar::TextDiff;

const LINES: &str = "...";
const INLINE: &str = "[..]";

/// A course's named redactions (`[redactions]` of `lessonprobe.toml`): placeholder and the
/// expression it stands for, longest placeholder first so none hides a longer one.
#[derive(Debug, Clone, Default)]
pub struct Redactions {
    entries: Vec<(String, Regex)>,
}

/// A redaction the course cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRedaction {
    #[error("redaction placeholder {0:?} must be a name in square brackets, as \"[EVENT_ID]\" (not \"[..]\", which is the inline elision)")]
    Placeholder(String),
    #[error("redaction {placeholder}: {expression:?} is not a valid regular expression: {why}")]
    Expression {
        placeholder: String,
        expression: String,
        why: String,
    },
}

impl Redactions {
    /// The redactions of `entries` (placeholder, regular expression).
    pub fn new<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Redactions, BadRedaction> {
        let mut out = Vec::new();
        for (placeholder, expression) in entries {
            let name = placeholder
                .strip_prefix('[')
                .and_then(|p| p.strip_suffix(']'))
                .filter(|n| {
                    !n.is_empty() && *n != ".." && !n.contains(['[', ']']) && n.trim() == *n
                });
            if name.is_none() {
                return Err(BadRedaction::Placeholder(placeholder.to_owned()));
            }
            let inner = Regex::new(expression).map_err(|e| BadRedaction::Expression {
                placeholder: placeholder.to_owned(),
                expression: expression.to_owned(),
                why: e.to_string().lines().last().unwrap_or("").trim().to_owned(),
            })?;
            out.push((placeholder.to_owned(), inner));
        }
        out.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Ok(Redactions { entries: out })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `line` of actual output with what each expression matches replaced by its placeholder,
    /// as snapbox's `Redactions::redact` does, so blessed output stays true on the next run:
    /// leftmost match first, the longest of those, never inside a placeholder already put back.
    /// A line whose redacted form would not match it again (it holds `[..]` or a placeholder of
    /// its own) stays as it is.
    pub fn redact(&self, line: &str) -> String {
        let mut out = String::new();
        let mut at = 0;
        while at < line.len() {
            let found = self
                .entries
                .iter()
                .filter_map(|(p, re)| {
                    let m = re.find_iter(&line[at..]).find(|m| !m.is_empty())?;
                    Some((at + m.start(), at + m.end(), p))
                })
                .min_by_key(|(start, end, _)| (*start, std::cmp::Reverse(*end)));
            let Some((start, end, placeholder)) = found else {
                break;
            };
            out.push_str(&line[at..start]);
            out.push_str(placeholder);
            at = end;
        }
        if at == 0 {
            return line.to_owned();
        }
        out.push_str(&line[at..]);
        let holds = Line::new(&out, self).matches(line);
        match holds {
            true => out,
            false => line.to_owned(),
        }
    }

    /// A pattern line with a placeholder as an anchored expression; `None` when it has none
    /// (or, should the expressions not combine, so the line stays plain text).
    fn line_regex(&self, line: &str) -> Option<Regex> {
        if !self.entries.iter().any(|(p, _)| line.contains(p.as_str())) {
            return None;
        }
        let mut pattern = String::from("^");
        let mut rest = line;
        while let Some(c) = rest.chars().next() {
            if let Some(after) = rest.strip_prefix(INLINE) {
                pattern.push_str(".*");
                rest = after;
            } else if let Some((p, re)) = self
                .entries
                .iter()
                .find(|(p, _)| rest.starts_with(p.as_str()))
            {
                pattern.push_str(&format!("(?:{})", re.as_str()));
                rest = &rest[p.len()..];
            } else {
                pattern.push_str(&regex::escape(&c.to_string()));
                rest = &rest[c.len_utf8()..];
            }
        }
        pattern.push('$');
        Regex::new(&pattern).ok()
    }
}

impl PartialEq for Redactions {
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(&other.entries)
                .all(|((a, x), (b, y))| a == b && x.as_str() == y.as_str())
    }
}

impl Eq for Redactions {}

/// How an expected block is compared: the course's redactions, and whether order counts.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub redactions: &'a Redactions,
    pub unordered: bool,
}

/// Actual output that does not match, made comparable: the lines that matched the expected
/// text are shown as the expected text has them (elisions and placeholders included), so a
/// diff shows only what really differs, and blessing keeps what still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The other lines as the run printed them: what a diff shows.
    pub normalized: String,
    /// The other lines with the course's redactions passed back: what bless writes.
    pub blessed: String,
}

impl Mismatch {
    /// A unified diff of `expected` against the normalised actual output.
    pub fn diff(&self, expected: &str, expected_label: &str) -> String {
        TextDiff::from_lines(&joined(&lines(expected)), &self.normalized)
            .unified_diff()
            .header(expected_label, "actual")
            .to_string()
    }
}

/// Whether `actual` matches the `expected` text with its elisions.
pub fn check(expected: &str, actual: &str) -> Result<(), Mismatch> {
    check_with(
        expected,
        actual,
        Rules {
            redactions: &Redactions::default(),
            unordered: false,
        },
    )
}

/// Whether `actual` matches the `expected` text with its elisions, under `rules`.
pub fn check_with(expected: &str, actual: &str, rules: Rules<'_>) -> Result<(), Mismatch> {
    let pattern: Vec<Line> = lines(expected)
        .into_iter()
        .map(|l| Line::new(l, rules.redactions))
        .collect();
    let actual_lines = lines(actual);
    let pieces = if rules.unordered {
        match unordered(&pattern, &actual_lines) {
            Ok(()) => return Ok(()),
            Err(pieces) => pieces,
        }
    } else {
        if matches_all(&pattern, &actual_lines) {
            return Ok(());
        }
        normalize(&pattern, &actual_lines)
    };
    let normalized: Vec<&str> = pieces.iter().map(|p| p.text()).collect();
    let blessed: Vec<String> = pieces
        .iter()
        .map(|p| match p {
            Piece::Expected(t) => (*t).to_owned(),
            Piece::Actual(t) => rules.redactions.redact(t),
        })
        .collect();
    Err(Mismatch {
        normalized: joined(&normalized),
        blessed: blessed.iter().map(|l| format!("{l}\n")).collect(),
    })
}

/// A line of a normalised mismatch: the expected line that held, or the run's line.
#[derive(Debug, Clone, Copy)]
enum Piece<'a> {
    Expected(&'a str),
    Actual(&'a str),
}

impl<'a> Piece<'a> {
    fn text(&self) -> &'a str {
        match self {
            Piece::Expected(t) | Piece::Actual(t) => t,
        }
    }
}

/// One line of an expected block, ready to match.
enum Line<'a> {
    /// `...`: any number of lines.
    Elided(&'a str),
    /// Text, where `[..]` is any run of characters.
    Plain(&'a str),
    /// Text with a course placeholder, as an anchored expression.
    Redacted(&'a str, Regex),
}

impl<'a> Line<'a> {
    fn new(text: &'a str, redactions: &Redactions) -> Line<'a> {
        if text.trim() == LINES {
            return Line::Elided(text);
        }
        match redactions.line_regex(text) {
            Some(re) => Line::Redacted(text, re),
            None => Line::Plain(text),
        }
    }

    fn text(&self) -> &'a str {
        match self {
            Line::Elided(t) | Line::Plain(t) | Line::Redacted(t, _) => t,
        }
    }

    fn is_elided(&self) -> bool {
        matches!(self, Line::Elided(_))
    }

    /// One pattern line against one actual line.
    fn matches(&self, line: &str) -> bool {
        match self {
            Line::Elided(_) => false,
            Line::Plain(p) => crate::wildcard::matches(p, INLINE, line),
            Line::Redacted(_, re) => re.is_match(line),
        }
    }
}

/// Lines without trailing whitespace, trailing blank lines dropped.
fn lines(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = text.lines().map(str::trim_end).collect();
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out
}

fn joined(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Whole-text match with backtracking over `...`, one row of the table at a time.
fn matches_all(pattern: &[Line], actual: &[&str]) -> bool {
    // next[j]: pattern[i+1..] matches actual[j..]
    let n = actual.len();
    let mut next: Vec<bool> = (0..=n).map(|j| j == n).collect();
    for p in pattern.iter().rev() {
        let mut row = vec![false; n + 1];
        for j in (0..=n).rev() {
            row[j] = if p.is_elided() {
                next[j] || (j < n && row[j + 1])
            } else {
                j < n && p.matches(actual[j]) && next[j + 1]
            };
        }
        next = row;
    }
    next[0]
}

/// The actual lines, with those that match their expected line replaced by the expected line
/// and the runs an `...` absorbed replaced by `...`.
fn normalize<'a>(pattern: &[Line<'a>], actual: &[&'a str]) -> Vec<Piece<'a>> {
    let mut out: Vec<Piece<'a>> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < pattern.len() {
        let p = &pattern[i];
        if p.is_elided() {
            out.push(Piece::Expected(p.text()));
            i += 1;
            match pattern.get(i) {
                // A trailing `...` takes the rest.
                None => j = actual.len(),
                Some(anchor) => match actual[j..].iter().position(|a| anchor.matches(a)) {
                    Some(k) => j += k,
                    // The anchor is gone: the elision takes what the lines after it do not.
                    None => {
                        let needed = pattern[i..].iter().filter(|p| !p.is_elided()).count();
                        j = j.max(actual.len().saturating_sub(needed));
                    }
                },
            }
            continue;
        }
        if j < actual.len() && p.matches(actual[j]) {
            out.push(Piece::Expected(p.text()));
            i += 1;
            j += 1;
        } else if let Some(k) = actual[j..].iter().position(|a| p.matches(a)) {
            // Lines were added before this one.
            out.extend(actual[j..j + k].iter().map(|a| Piece::Actual(a)));
            j += k;
        } else if j < actual.len() {
            // This line changed.
            out.push(Piece::Actual(actual[j]));
            i += 1;
            j += 1;
        } else {
            // This line is missing.
            i += 1;
        }
    }
    out.extend(actual[j..].iter().map(|a| Piece::Actual(a)));
    out
}

/// The same lines in any order: each expected line takes its own actual line (a maximum
/// matching, so a `[..]` line never steals the line an exact one needs), and every actual line
/// is taken unless the block has a `...`. On a mismatch, the expected lines that found a line
/// in the expected order, then the actual lines nothing took.
fn unordered<'a>(pattern: &[Line<'a>], actual: &[&'a str]) -> Result<(), Vec<Piece<'a>>> {
    let wanted: Vec<&Line> = pattern.iter().filter(|p| !p.is_elided()).collect();
    let elastic = wanted.len() < pattern.len();
    let candidates: Vec<Vec<usize>> = wanted
        .iter()
        .map(|p| {
            (0..actual.len())
                .filter(|&j| p.matches(actual[j]))
                .collect()
        })
        .collect();
    let mut taken_by: Vec<Option<usize>> = vec![None; actual.len()];
    for i in 0..wanted.len() {
        let mut seen = vec![false; actual.len()];
        augment(i, &candidates, &mut taken_by, &mut seen);
    }
    let mut took: Vec<Option<usize>> = vec![None; wanted.len()];
    for (j, by) in taken_by.iter().enumerate() {
        if let Some(i) = by {
            took[*i] = Some(j);
        }
    }
    let all_found = took.iter().all(Option::is_some);
    let spare: Vec<Piece<'a>> = (0..actual.len())
        .filter(|&j| taken_by[j].is_none())
        .map(|j| Piece::Actual(actual[j]))
        .collect();
    if all_found && (elastic || spare.is_empty()) {
        return Ok(());
    }
    let mut out: Vec<Piece<'a>> = Vec::new();
    let mut next = wanted.iter().zip(&took);
    for p in pattern {
        if p.is_elided() {
            out.push(Piece::Expected(p.text()));
        } else if let Some((w, Some(_))) = next.next() {
            out.push(Piece::Expected(w.text()));
        }
    }
    out.extend(spare);
    Err(out)
}

/// Kuhn's augmenting path from expected line `i`.
fn augment(
    i: usize,
    candidates: &[Vec<usize>],
    taken_by: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for &j in &candidates[i] {
        if seen[j] {
            continue;
        }
        seen[j] = true;
        let free = match taken_by[j] {
            None => true,
            Some(k) => augment(k, candidates, taken_by, seen),
        };
        if free {
            taken_by[j] = Some(i);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(expected: &str, actual: &str) -> bool {
        check(expected, actual).is_ok()
    }

    #[test]
    fn exact_after_trimming_trailing_whitespace() {
        assert!(ok("True False 1\n", "True False 1"));
        assert!(ok("a  \nb\n\n\n", "a\nb   \n"));
        assert!(!ok("a\nb", "a\n b"));
        assert!(!ok("True False 1", "True True 1"));
        assert!(!ok("a", ""));
        assert!(ok("", "\n\n"));
    }

    #[test]
    fn an_elided_line_matches_any_number_of_lines_with_backtracking() {
        assert!(ok("start\n...\nend", "start\nend"));
        assert!(ok("start\n...\nend", "start\n1\n2\n3\nend"));
        assert!(
            ok("...\nend", "end\nx\nend"),
            "needs backtracking past the first `end`"
        );
        assert!(ok("a\n...", "a\nb\nc"));
        assert!(ok("...", ""));
        assert!(!ok("start\n...\nend", "start\n1\n2"));
        assert!(!ok("a\n...\nb\n...\nc", "a\nc\nb"));
    }

    #[test]
    fn inline_elision_matches_any_text_within_one_line() {
        assert!(ok(
            "audit rows=[..]; offsets=42,43",
            "audit rows=1; offsets=42,43"
        ));
        assert!(ok("[..]", "anything at all"));
        assert!(ok("took [..]s ([..] rows)", "took 0.25s (40 rows)"));
        assert!(!ok("took [..]s", "took 0.25s!"));
        assert!(!ok("a[..]", "a\nb"), "never spans lines");
        assert!(ok("[EXE] [ROOT]", "[EXE] [ROOT]"), "no other placeholders");
        assert!(!ok("[EXE]", "lessonprobe"));
    }

    fn redactions() -> Redactions {
        Redactions::new([
            ("[EVENT_ID]", "evt-[0-9a-f]{8}"),
            ("[EVENT]", "never-used-shorter"),
            ("[N]", "[0-9]+"),
        ])
        .unwrap()
    }

    fn ok_with(expected: &str, actual: &str, unordered: bool) -> Result<(), Mismatch> {
        let r = redactions();
        check_with(
            expected,
            actual,
            Rules {
                redactions: &r,
                unordered,
            },
        )
    }

    #[test]
    fn named_placeholders_match_their_expression_within_one_line() {
        assert!(ok_with(
            "stored [EVENT_ID] in [N] ms",
            "stored evt-0a1b2c3d in 12 ms",
            false
        )
        .is_ok());
        assert!(ok_with(
            "stored [EVENT_ID] in [..]",
            "stored evt-0a1b2c3d in 12 ms",
            false
        )
        .is_ok());
        assert!(ok_with("stored [EVENT_ID]", "stored evt-XYZ", false).is_err());
        assert!(
            ok_with("[N]", "12\n13", false).is_err(),
            "never spans lines"
        );
        assert!(
            ok_with("a.b [N]", "axb 1", false).is_err(),
            "the rest is literal"
        );
        assert!(
            ok_with("[OTHER] [N]", "[OTHER] 7", false).is_ok(),
            "unnamed stays text"
        );
        // A placeholder that still matches is kept; a changed line shows the run's value.
        let e = ok_with(
            "id=[EVENT_ID]\ncount=[N]\nok",
            "id=evt-00000000\ncount=3\nnot ok",
            false,
        )
        .unwrap_err();
        assert_eq!(e.normalized, "id=[EVENT_ID]\ncount=[N]\nnot ok\n");
    }

    #[test]
    fn a_changed_line_is_blessed_with_the_placeholders_of_its_values() {
        let r = Redactions::new([
            ("[EVENT_ID]", "evt-[0-9a-f]{8}"),
            ("[TS]", "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z"),
            ("[N]", "[0-9]+"),
        ])
        .unwrap();
        let rules = Rules {
            redactions: &r,
            unordered: false,
        };
        // The defect as found: the run's values were written into the lesson.
        let actual = "event evt-68bbe719 at 2026-12-03T23:45:25.304345Z\n";
        let e = check_with("event [EVENT_ID] at [TS] (old)\n", actual, rules).unwrap_err();
        assert_eq!(e.normalized, actual, "a diff shows what the run printed");
        assert_eq!(e.blessed, "event [EVENT_ID] at [TS]\n");
        assert!(check_with(&e.blessed, actual, rules).is_ok());
        // Added lines are redacted too; lines that held keep `[..]`, `...` and placeholders.
        let e = check_with(
            "id [..]\n...\nend [N]\n",
            "id x\nnoise\nend 3\nnew evt-0000000a 12\n",
            rules,
        )
        .unwrap_err();
        assert_eq!(e.blessed, "id [..]\n...\nend [N]\nnew [EVENT_ID] [N]\n");
        // The leftmost, longest match wins; a placeholder put back is not searched again.
        assert_eq!(r.redact("evt-12345678/42"), "[EVENT_ID]/[N]");
        assert_eq!(r.redact("no values"), "no values");
        // A line whose redacted form would not match itself stays as printed.
        assert_eq!(r.redact("[N] is 7"), "[N] is 7");
        let empty = Redactions::new([("[E]", "x*")]).unwrap();
        assert_eq!(empty.redact("ab"), "ab", "empty matches are no values");
        assert_eq!(empty.redact("axxb"), "a[E]b");
        // Unordered blocks pass the spare lines back too.
        let rules = Rules {
            redactions: &r,
            unordered: true,
        };
        let e = check_with("a\nb\n", "b\nevt-0000000b\n", rules).unwrap_err();
        assert_eq!(e.blessed, "b\n[EVENT_ID]\n");
    }

    #[test]
    fn bad_redactions_are_refused() {
        for bad in ["EVENT", "[..]", "[]", "[a]b]", "[ x]"] {
            assert!(
                matches!(
                    Redactions::new([(bad, "x")]),
                    Err(BadRedaction::Placeholder(_))
                ),
                "{bad}"
            );
        }
        let e = Redactions::new([("[X]", "evt-(")]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("redaction [X]: \"evt-(\" is not a valid regular expression"),
            "{e}"
        );
    }

    #[test]
    fn unordered_blocks_match_the_same_lines_in_any_order() {
        assert!(ok_with("a\nb\nc", "c\na\nb", true).is_ok());
        assert!(ok_with("a\nb\nc", "c\na\nb", false).is_err());
        assert!(
            ok_with("a\na\nb", "a\nb\nb", true).is_err(),
            "counts matter"
        );
        assert!(ok_with("a\nb", "a\nb\nc", true).is_err(), "no extra lines");
        assert!(ok_with("a\n...", "x\na\ny", true).is_ok(), "unless elided");
        assert!(
            ok_with("[..]\nx1", "x1\nq", true).is_ok(),
            "a maximum matching"
        );
        assert!(ok_with("worker [N] done\nstart", "start\nworker 2 done", true).is_ok());
        let e = ok_with("a\nb\nc", "c\nz\na", true).unwrap_err();
        assert_eq!(e.normalized, "a\nc\nz\n");
    }

    #[test]
    fn a_mismatch_diffs_only_what_differs() {
        let e = check("id=[..]\n...\nTrue True 1\n", "id=7\nnoise\nTrue False 1\n").unwrap_err();
        assert_eq!(e.normalized, "id=[..]\n...\nTrue False 1\n");
        let diff = e.diff("id=[..]\n...\nTrue True 1\n", "expected");
        assert!(diff.contains("-True True 1\n+True False 1\n"), "{diff}");
        assert!(!diff.contains("+id=7"), "{diff}");
        let e = check("a\nb\nc", "a\nnew\nb\nc").unwrap_err();
        assert_eq!(e.normalized, "a\nnew\nb\nc\n");
        let e = check("a\nb\nc", "a\nc").unwrap_err();
        assert_eq!(e.normalized, "a\nc\n");
        // What normalisation keeps still matches the actual output where it held.
        assert!(ok(&e.normalized, "a\nc"));
    }
}
