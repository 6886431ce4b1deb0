//! The expected-output matcher: exact after trimming trailing whitespace, with two elisions as
//! trycmd and snapbox write them — a line `...` matches any number of lines, and `[..]` matches
//! any text within one line. Unlike snapbox it backtracks, normalises no paths or newlines, and
//! knows no other placeholders, so `[EXE]` or `[ROOT]` in a lesson are plain text.

use similar::TextDiff;

const LINES: &str = "...";
const INLINE: &str = "[..]";

/// Actual output that does not match, made comparable: the lines that matched the expected
/// text are shown as the expected text has them (elisions included), so a diff shows only
/// what really differs, and blessing keeps the elisions that still hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub normalized: String,
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
    let pattern = lines(expected);
    let actual_lines = lines(actual);
    if matches_all(&pattern, &actual_lines) {
        return Ok(());
    }
    Err(Mismatch {
        normalized: normalize(&pattern, &actual_lines),
    })
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

fn is_elided(line: &str) -> bool {
    line.trim() == LINES
}

/// One pattern line against one actual line: `[..]` matches any run of characters.
fn line_matches(pattern: &str, line: &str) -> bool {
    crate::wildcard::matches(pattern, INLINE, line)
}

/// Whole-text match with backtracking over `...`, one row of the table at a time.
fn matches_all(pattern: &[&str], actual: &[&str]) -> bool {
    // next[j]: pattern[i+1..] matches actual[j..]
    let n = actual.len();
    let mut next: Vec<bool> = (0..=n).map(|j| j == n).collect();
    for p in pattern.iter().rev() {
        let mut row = vec![false; n + 1];
        for j in (0..=n).rev() {
            row[j] = if is_elided(p) {
                next[j] || (j < n && row[j + 1])
            } else {
                j < n && line_matches(p, actual[j]) && next[j + 1]
            };
        }
        next = row;
    }
    next[0]
}

/// The actual lines, with those that match their expected line replaced by the expected line
/// and the runs an `...` absorbed replaced by `...`.
fn normalize(pattern: &[&str], actual: &[&str]) -> String {
    let mut out: Vec<&str> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < pattern.len() {
        let p = pattern[i];
        if is_elided(p) {
            out.push(p);
            i += 1;
            match pattern.get(i) {
                // A trailing `...` takes the rest.
                None => j = actual.len(),
                Some(anchor) => match actual[j..].iter().position(|a| line_matches(anchor, a)) {
                    Some(k) => j += k,
                    // The anchor is gone: the elision takes what the lines after it do not.
                    None => {
                        let needed = pattern[i..].iter().filter(|p| !is_elided(p)).count();
                        j = j.max(actual.len().saturating_sub(needed));
                    }
                },
            }
            continue;
        }
        if j < actual.len() && line_matches(p, actual[j]) {
            out.push(p);
            i += 1;
            j += 1;
        } else if let Some(k) = actual[j..].iter().position(|a| line_matches(p, a)) {
            // Lines were added before this one.
            out.extend(&actual[j..j + k]);
            j += k;
        } else if j < actual.len() {
            // This line changed.
            out.push(actual[j]);
            i += 1;
            j += 1;
        } else {
            // This line is missing.
            i += 1;
        }
    }
    out.extend(&actual[j..]);
    joined(&out)
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
