//! Quoting selectors, paths and a host's variables into command templates.

/// Single-quotes `s` for a POSIX shell.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The placeholders a command template may use.
pub const PLACEHOLDERS: &[&str] = &["checkpoint", "selector", "report"];

/// Checks that a template uses only known `{placeholders}`; returns the unknown one.
pub fn unknown_placeholder(template: &str) -> Option<String> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after.find('}')?;
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Some(name.to_owned());
        }
        rest = &after[close + 1..];
    }
    None
}

/// Renders a template: `{checkpoint}` as a number, `{selector}` and `{report}` shell-quoted.
pub fn render(template: &str, checkpoint: u32, selector: &str, report: &str) -> String {
    template
        .replace("{checkpoint}", &checkpoint.to_string())
        .replace("{selector}", &quote(selector))
        .replace("{report}", &quote(report))
}

/// Why a host's environment variable is refused.
pub fn invalid_env(name: &str, value: &str) -> Option<String> {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some(format!(
            "environment variable name {name:?} must be letters, digits and '_', not starting with a digit"
        ));
    }
    value
        .contains('\0')
        .then(|| format!("environment variable {name}: its value must not contain NUL"))
}

/// `NAME='value' …` for `env`, each value shell-quoted; empty without variables.
pub fn render_env<'a>(vars: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    vars.into_iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The commands one remote run executes, rendered, and the variables they get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSet {
    /// `NAME='value' …`, empty when the host sets none.
    pub env: String,
    pub prepare: Option<String>,
    pub run: String,
    pub teardown: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_quotes_values_and_unknown_placeholders_are_found() {
        let cmd = render(
            "python -m pytest {selector} --junitxml={report} # {checkpoint}",
            30,
            "t.py::x",
            "/tmp/r r.xml",
        );
        assert_eq!(
            cmd,
            "python -m pytest 't.py::x' --junitxml='/tmp/r r.xml' # 30"
        );
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(
            unknown_placeholder("run {selector} {oops}"),
            Some("oops".into())
        );
        assert_eq!(unknown_placeholder("run {selector} {report}"), None);
    }

    #[test]
    fn environment_names_are_checked_and_values_quoted() {
        for bad in ["", "1X", "A-B", "A B", "A=B", "$(id)"] {
            assert!(invalid_env(bad, "v").is_some(), "{bad:?} passed");
        }
        assert!(invalid_env("KAFKA_PROFILE", "a\0b").is_some());
        assert_eq!(invalid_env("_KAFKA_PROFILE2", "it's $HOME; `id`"), None);
        let vars = [
            ("A".to_owned(), "replay".to_owned()),
            ("B".to_owned(), "it's $HOME".to_owned()),
        ];
        assert_eq!(
            render_env(vars.iter().map(|(k, v)| (k, v))),
            "A='replay' B='it'\\''s $HOME'"
        );
    }
}
