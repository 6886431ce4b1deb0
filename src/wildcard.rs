//! Whole-text matching where one token stands for any run of characters: `*` in `--select`
//! patterns, `[..]` in a lesson's expected output.

/// Whether `text` is `pattern` with each `token` standing for any run of characters.
pub fn matches(pattern: &str, token: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split(token).collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    // Leftmost matches are enough: any later placement leaves less room for what follows.
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn tokens_match_any_run_and_the_rest_must_be_equal() {
        assert!(matches("ex-30-*", "*", "ex-30-01"));
        assert!(matches("*dup*", "*", "sql-duplicate"));
        assert!(matches("a*b*c", "*", "aXbYc"));
        assert!(!matches("a*b*c", "*", "aXcYb"));
        assert!(!matches("ab*ba", "*", "aba"));
        assert!(matches("took [..]s", "[..]", "took 0.25s"));
        assert!(matches("plain", "[..]", "plain"));
        assert!(!matches("plain", "[..]", "plain!"));
    }
}
