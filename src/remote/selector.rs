//! Quoting selectors and paths into command templates.

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

/// The commands one remote run executes, rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSet {
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
}
