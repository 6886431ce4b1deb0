//! The GitHub Actions reporter: an `::error` workflow command per case that fails the run,
//! pointing at its lesson file (or manifest) and line, a `::warning` per runnable block the
//! lint found uncollected, and a Markdown summary appended to `$GITHUB_STEP_SUMMARY`. GitHub
//! shows the commands as annotations on the pull request's diff and the summary on the run's
//! page; neither needs a token.

use std::io::Write;
use std::path::PathBuf;

use super::provenance::Provenance;
use super::{failed_itself, Gathered, ReportError, Reporter};
use crate::checkpoint::Uncollected;
use crate::run::{Counts, Outcome, RunEvent, Verdict};

/// When to write GitHub Actions workflow commands and the step summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Annotations {
    /// When `GITHUB_ACTIONS=true`, as GitHub's runners set it.
    Auto,
    /// Always.
    Github,
    /// Never.
    None,
}

impl Annotations {
    /// Whether to write them, given the value of `GITHUB_ACTIONS`.
    pub fn enabled(self, github_actions: Option<&str>) -> bool {
        match self {
            Annotations::Auto => github_actions == Some("true"),
            Annotations::Github => true,
            Annotations::None => false,
        }
    }
}

/// Lines of a failure's diff an annotation carries; the rest is in the logs and reports.
const DIFF_LINES: usize = 12;

pub struct Github {
    /// Where the workflow commands go: standard output, unless it carries JSON.
    commands: Box<dyn Write>,
    /// `$GITHUB_STEP_SUMMARY`, when set.
    summary: Option<PathBuf>,
    /// `$GITHUB_WORKSPACE`, stripped from absolute paths so annotations name repository files.
    workspace: Option<PathBuf>,
    strict: bool,
    uncollected: Vec<Uncollected>,
    provenance: Provenance,
    gathered: Gathered,
}

impl Github {
    pub fn new(commands: Box<dyn Write>, provenance: Provenance) -> Self {
        Github {
            commands,
            summary: None,
            workspace: None,
            strict: false,
            uncollected: Vec::new(),
            provenance,
            gathered: Gathered::default(),
        }
    }

    /// Appends the Markdown summary to this file.
    pub fn summary(mut self, path: Option<PathBuf>) -> Self {
        self.summary = path;
        self
    }

    /// Paths under this folder are written relative to it.
    pub fn workspace(mut self, dir: Option<PathBuf>) -> Self {
        self.workspace = dir;
        self
    }

    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// The lint's warnings, each a `::warning`.
    pub fn uncollected(mut self, warnings: Vec<Uncollected>) -> Self {
        self.uncollected = warnings;
        self
    }

    /// A path, or a message naming paths, as the repository names them: the workspace
    /// folder taken off.
    fn relative(&self, text: &str) -> String {
        match &self.workspace {
            Some(w) => text.replace(&format!("{}/", w.display()), ""),
            None => text.to_owned(),
        }
    }

    fn commands(&self, outcomes: &[Outcome]) -> Vec<String> {
        let mut lines = Vec::new();
        for o in outcomes
            .iter()
            .filter(|o| failed_itself(o.verdict, self.strict))
        {
            let mut props = Vec::new();
            if let Some(file) = &o.file {
                props.push(("file", self.relative(file)));
                if let Some(line) = o.line {
                    props.push(("line", line.to_string()));
                }
            }
            props.push((
                "title",
                format!("{} {}", o.verdict.label(), o.display_name()),
            ));
            lines.push(command(
                "error",
                &props,
                &self.relative(&annotation_message(o)),
            ));
        }
        for u in &self.uncollected {
            let props = [
                ("file", self.relative(&u.file.display().to_string())),
                ("line", u.line.to_string()),
                ("title", "not collected".to_owned()),
            ];
            lines.push(command(
                "warning",
                &props,
                "a runnable block no label binds: bind it with a label, or mark it no-run",
            ));
        }
        lines
    }
}

impl Reporter for Github {
    fn event(&mut self, event: &RunEvent<'_>) {
        self.gathered.take(event);
    }

    fn report_failed(&mut self, error: &ReportError) {
        self.gathered.report_failed(error);
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let succeeded = self.gathered.succeeded(self.strict);
        let interrupted = self
            .gathered
            .summary
            .and_then(|s| s.interrupted)
            .map(|i| i.name());
        let outcomes = self.gathered.outcomes();
        for line in self.commands(&outcomes) {
            let _ = writeln!(self.commands, "{line}");
        }
        let _ = self.commands.flush();
        let Some(path) = &self.summary else {
            return Ok(());
        };
        let text = markdown(&Summary {
            outcomes: &outcomes,
            succeeded,
            interrupted,
            strict: self.strict,
            report_error: self.gathered.report_error.as_deref(),
            uncollected: self.uncollected.len(),
            provenance: &self.provenance,
            relative: &|p| self.relative(p),
        });
        append_summary(path, &text)
    }
}

/// Appends `text` to the step summary at `path`, as each step of a job appends its own.
pub fn append_summary(path: &std::path::Path, text: &str) -> Result<(), ReportError> {
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    written.map_err(|source| ReportError::WriteOther {
        what: "the GitHub step summary",
        path: path.to_owned(),
        source,
    })
}

/// The message of a failing case's annotation: why, then the first lines of its diff.
fn annotation_message(o: &Outcome) -> String {
    let mut text = o
        .message
        .clone()
        .unwrap_or_else(|| o.verdict.label().to_owned());
    if let Some(diff) = &o.diff {
        let lines: Vec<&str> = diff.lines().collect();
        for line in lines.iter().take(DIFF_LINES) {
            text.push('\n');
            text.push_str(line);
        }
        if lines.len() > DIFF_LINES {
            text.push_str(&format!("\n… {} more lines", lines.len() - DIFF_LINES));
        }
    }
    text
}

/// `::KIND key=value,...::message`, escaped as the workflow-command syntax requires.
pub fn command(kind: &str, props: &[(&str, String)], message: &str) -> String {
    let props: Vec<String> = props
        .iter()
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    if props.is_empty() {
        format!("::{kind}::{}", escape_data(message))
    } else {
        format!("::{kind} {}::{}", props.join(","), escape_data(message))
    }
}

/// A command's message: `%`, CR and LF escaped.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property value: as a message, and `:` and `,` too.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// What the step summary shows.
struct Summary<'a> {
    outcomes: &'a [Outcome],
    succeeded: bool,
    interrupted: Option<&'static str>,
    strict: bool,
    /// A report that could not be written, which the run ends with.
    report_error: Option<&'a str>,
    uncollected: usize,
    provenance: &'a Provenance,
    relative: &'a dyn Fn(&str) -> String,
}

/// The step summary: the verdict of the run as the exit code gives it, the counts, what was
/// verified, then a table of the cases that failed and of those PENDING, with their places.
fn markdown(s: &Summary<'_>) -> String {
    let counts = Counts::of(s.outcomes);
    let mut md = format!(
        "## lessonprobe: {}\n\n",
        if s.succeeded {
            "passed ✅"
        } else {
            "failed ❌"
        }
    );
    md.push_str(&format!(
        "| passed | failed | errors | skipped | pending | flaky | not run |\n|---:|---:|---:|---:|---:|---:|---:|\n| {} | {} | {} | {} | {} | {} | {} |\n\n",
        counts.passed,
        counts.failed,
        counts.errors,
        counts.skipped,
        counts.pending,
        counts.flaky,
        counts.not_run
    ));
    if let Some(signal) = s.interrupted {
        md.push_str(&format!(
            "Interrupted ({signal}): cases that did not finish are ERROR.\n\n"
        ));
    }
    if s.strict && counts.pending + counts.flaky > 0 {
        md.push_str("Under `--strict`, PENDING and FLAKY cases fail the run.\n\n");
    }
    if let Some(error) = s.report_error {
        md.push_str(&format!("{error}.\n\n"));
    }
    if s.uncollected > 0 {
        md.push_str(&format!(
            "{} runnable block(s) no label binds (lint warnings, annotated in the files).\n\n",
            s.uncollected
        ));
    }
    md.push_str(&format!(
        "Verified: {}.\n\n",
        cell(&s.provenance.verified_text())
    ));
    // What failed first, then what is PENDING; each in plan order.
    let mut listed: Vec<&Outcome> = s
        .outcomes
        .iter()
        .filter(|o| matches!(o.verdict, Verdict::Fail | Verdict::Error | Verdict::Pending))
        .collect();
    listed.sort_by_key(|o| o.verdict == Verdict::Pending);
    if listed.is_empty() {
        return md;
    }
    md.push_str("| verdict | lesson | probe | where | why |\n|---|---:|---|---|---|\n");
    for o in listed {
        let place = o.location().map_or_else(String::new, |l| (s.relative)(&l));
        md.push_str(&format!(
            "| {} | {} | {} | `{}` | {} |\n",
            o.verdict.label(),
            o.lesson,
            cell(&o.display_name()),
            place.replace('`', "'"),
            cell(&(s.relative)(o.message.as_deref().unwrap_or(""))),
        ));
    }
    md.push('\n');
    diffs(&mut md, s);
    md
}

/// Failures shown in the summary with their diff; the others are in the logs and reports.
const SUMMARY_DIFFS: usize = 10;
/// Lines of each diff in the summary.
const SUMMARY_DIFF_LINES: usize = 40;

/// The diff of each failing case that has one, folded under its name.
fn diffs(md: &mut String, s: &Summary<'_>) {
    let with_diff: Vec<(&Outcome, &str)> = s
        .outcomes
        .iter()
        .filter(|o| failed_itself(o.verdict, s.strict))
        .filter_map(|o| o.diff.as_deref().map(|d| (o, d)))
        .collect();
    for (o, diff) in with_diff.iter().take(SUMMARY_DIFFS) {
        let place = o.location().map_or_else(String::new, |l| (s.relative)(&l));
        md.push_str(&format!(
            "<details><summary>{} {} — {}</summary>\n\n```diff\n",
            o.verdict.label(),
            html_escape::encode_text(&o.display_name()),
            html_escape::encode_text(&place)
        ));
        for line in diff.lines().take(SUMMARY_DIFF_LINES) {
            md.push_str(&(s.relative)(line).replace("```", "'''"));
            md.push('\n');
        }
        md.push_str("```\n\n</details>\n\n");
    }
    if with_diff.len() > SUMMARY_DIFFS {
        md.push_str(&format!(
            "{} more diffs are in the job's log.\n\n",
            with_diff.len() - SUMMARY_DIFFS
        ));
    }
}

/// Text for a Markdown table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace('\r', "")
        .replace('\n', "<br>")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;

    #[test]
    fn data_and_properties_are_escaped_as_workflow_commands_require() {
        assert_eq!(escape_data("100% a\r\nb: c, d"), "100%25 a%0D%0Ab: c, d");
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(
            command(
                "error",
                &[("file", "l/a,b.md".into()), ("title", "EX 1: x".into())],
                "line 1\nline 2"
            ),
            "::error file=l/a%2Cb.md,title=EX 1%3A x::line 1%0Aline 2"
        );
    }

    #[test]
    fn one_error_per_failing_case_and_a_summary_that_agrees_with_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let summary = dir.path().join("summary.md");
        std::fs::write(&summary, "earlier step\n").unwrap();
        let out = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let github = Github::new(Box::new(Shared(out.clone())), Provenance::default())
            .summary(Some(summary.clone()))
            .uncollected(vec![Uncollected {
                file: "lessons/32.md".into(),
                line: 23,
            }]);
        reported(github, None);
        let text = String::from_utf8(out.borrow().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("::error file="), "{text}");
        assert!(
            lines[0].contains(",line=29,title=FAIL third fails::"),
            "{text}"
        );
        assert_eq!(
            lines[1],
            "::warning file=lessons/32.md,line=23,title=not collected::a runnable block no label binds: bind it with a label, or mark it no-run"
        );
        let md = std::fs::read_to_string(&summary).unwrap();
        assert!(
            md.starts_with("earlier step\n## lessonprobe: failed"),
            "{md}"
        );
        assert!(md.contains("| 2 | 1 | 0 | 1 | 0 |"), "{md}");
        assert!(md.contains("| FAIL | 90 | third fails | `"), "{md}");
    }

    /// A writer the test reads back after the reporter wrote to it.
    struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
