//! What a remote test selector may contain: the characters of pytest node ids and probe names,
//! nothing a shell would interpret.

use crate::exit::Error;

/// Longest selector accepted.
const MAX_LEN: usize = 512;

/// A selector made only of characters that pytest node ids and probe names use. Shell
/// metacharacters, spaces, quotes and a leading '-' are refused.
pub fn validate_selector(selector: &str) -> Result<(), Error> {
    let bad = selector
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_./:-[],=+@*".contains(*c)));
    if selector.is_empty() || selector.len() > MAX_LEN {
        return Err(Error::Usage(format!(
            "selector must be 1 to {MAX_LEN} characters"
        )));
    }
    if let Some(c) = bad {
        return Err(Error::Usage(format!("selector {selector:?}: character {c:?} is not allowed (letters, digits and _./:-[],=+@* only)")));
    }
    if selector.starts_with('-') {
        return Err(Error::Usage(format!(
            "selector {selector:?} must not start with '-'"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_node_ids_and_probe_names_pass() {
        for ok in [
            "tests/integration/test_kafka_remote.py::test_bounded_replay_preserves_live_offsets_and_business_effect_counts",
            "tests/a.py::test_x[param-1,2]",
            "EX-30-01",
            "L30-*",
        ] {
            validate_selector(ok).unwrap();
        }
    }

    #[test]
    fn shell_metacharacters_are_refused() {
        for bad in [
            "x; rm -rf /",
            "a b",
            "$(id)",
            "`id`",
            "a|b",
            "a&b",
            "a>b",
            "'a'",
            "\"a\"",
            "-k",
            "a\nb",
            "",
        ] {
            assert!(validate_selector(bad).is_err(), "{bad:?} passed");
        }
    }
}
