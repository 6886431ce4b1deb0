//! Where a line stands in a text a test wrote or read back (a lesson, a manifest, a report), so
//! that a check naming FILE:LINE follows the text rather than a number written into the test.

/// 1-based number of the first line of `text` equal to `line`.
#[track_caller]
pub fn line_of(text: &str, line: &str) -> usize {
    line_of_from(text, line, 1)
}

/// 1-based number of the first line of `text` equal to `line` at or after line `from`
/// (1-based).
#[track_caller]
pub fn line_of_from(text: &str, line: &str, from: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| *l == line)
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("{line:?} not in the text at or after line {from}:\n{text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_from_one_and_from_is_inclusive() {
        let text = "a\nb\na\n";
        assert_eq!(line_of(text, "a"), 1);
        assert_eq!(line_of(text, "b"), 2);
        assert_eq!(line_of_from(text, "a", 1), 1);
        assert_eq!(line_of_from(text, "a", 2), 3);
        assert_eq!(line_of_from(text, "a", 3), 3);
    }

    #[test]
    #[should_panic(expected = "\"a\" not in the text at or after line 4")]
    fn a_line_that_is_not_there_panics() {
        line_of_from("a\nb\na\n", "a", 4);
    }
}
