//! What a remote test selector may contain: the characters of pytest node ids and probe names,
//! nothing a shell would interpret.

/// Longest selector accepted.
const MAX_LEN: usize = 512;

/// Why a selector is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("selector must be 1 to {MAX_LEN} characters")]
    Length,
    #[error("selector {selector:?}: character {bad:?} is not allowed (letters, digits and _./:-[],=+@* only)")]
    Character { selector: String, bad: char },
    #[error("selector {0:?} must not start with '-'")]
    LeadingDash(String),
}

/// A selector made only of characters that pytest node ids and probe names use. Shell
/// metacharacters, spaces, quotes and a leading '-' are refused. The command line and the
/// manifests both hold their selectors to this rule before anything connects.
pub fn validate_selector(selector: &str) -> Result<(), SelectorError> {
    if selector.is_empty() || selector.len() > MAX_LEN {
        return Err(SelectorError::Length);
    }
    if let Some(bad) = selector
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_./:-[],=+@*".contains(*c)))
    {
        return Err(SelectorError::Character {
            selector: selector.to_owned(),
            bad,
        });
    }
    if selector.starts_with('-') {
        return Err(SelectorError::LeadingDash(selector.to_owned()));
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
