//! The JUnit XML reporter: one `<testsuites>`, one `<testsuite>` per checkpoint, one
//! `<testcase>` per case, SKIP, PENDING and NOT RUN included (as skipped; PENDING and FLAKY
//! as failures under `--strict`, so the report agrees with the exit code). A FLAKY case is a
//! passed test case with its failed attempts as `<flakyFailure>`, in `<system-err>` and as
//! suite properties. Valid against the Jenkins xunit JUnit schema,
//! which has no `skipped` on `<testsuites>` and no properties on test cases: case properties
//! go on the suite, prefixed with the case name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{
    FlakyOrRerun, NonSuccessKind, Property, Report, SerializeError, TestCase, TestCaseStatus,
    TestRerun, TestSuite,
};

use super::output::{Delivered, Destination, OutputError};
use super::{Gathered, ReportError, Reporter};
use crate::run::{Attempt, Outcome, RunEvent, Verdict};

/// Gathers the run's outcomes and writes them to `path` when the run is over.
pub struct Junit {
    path: PathBuf,
    family: Family,
    strict: bool,
    gathered: Gathered,
    delivered: Delivered,
}

impl Junit {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Junit {
            path: path.into(),
            family: Family::default(),
            strict: false,
            gathered: Gathered::default(),
            delivered: Delivered::default(),
        }
    }

    /// Marks `delivered` once the report is written.
    pub fn delivered(mut self, delivered: Delivered) -> Self {
        self.delivered = delivered;
        self
    }

    /// Writes this dialect instead of the default xunit2.
    pub fn with_family(mut self, family: Family) -> Self {
        self.family = family;
        self
    }

    /// Under `--strict`, PENDING cases fail the run and are written as failures.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

impl Reporter for Junit {
    fn event(&mut self, event: &RunEvent<'_>) {
        self.gathered.take(event);
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let wall = self.gathered.wall();
        let xml = render(&self.gathered.outcomes(), wall, self.family, self.strict).map_err(
            |source| ReportError::Render {
                path: self.path.clone(),
                source,
            },
        )?;
        write(&self.path, &xml)?;
        self.delivered.mark();
        Ok(())
    }
}

/// Which JUnit dialect to write, as pytest's `junit_family` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Family {
    /// `file` and `line` on every test case that has them (GitHub and GitLab annotations).
    Xunit1,
    /// The strict Jenkins schema: no `file` or `line` on test cases.
    #[default]
    Xunit2,
}

/// Renders the outcomes, grouped by lesson in the order they come; `strict` writes PENDING
/// cases as failures.
pub fn render(
    outcomes: &[Outcome],
    wall: Duration,
    family: Family,
    strict: bool,
) -> Result<String, SerializeError> {
    let now = chrono::Local::now().fixed_offset();
    let hostname = hostname();
    let mut report = Report::new("lessonprobe");
    report.set_time(wall);
    let mut lessons: Vec<u32> = outcomes.iter().map(|o| o.lesson).collect();
    lessons.dedup();
    for lesson in lessons {
        let cases: Vec<&Outcome> = outcomes.iter().filter(|o| o.lesson == lesson).collect();
        let title = cases.first().map_or("", |o| o.checkpoint.as_str());
        let mut suite = TestSuite::new(match cases.first() {
            Some(o) if o.kind == crate::run::PREFLIGHT => title.to_owned(),
            _ => format!("lesson {lesson}: {title}"),
        });
        suite.set_timestamp(now);
        suite.set_time(cases.iter().map(|o| o.duration).sum());
        suite
            .extra
            .insert("hostname".into(), hostname.as_str().into());
        // Both schemas allow `file` on a suite; publishers that read no testcase `file` use it.
        if let Some(first) = cases.first() {
            suite
                .extra
                .insert("file".into(), first.checkpoint_file.as_str().into());
        }
        for o in &cases {
            for (key, value) in o.properties.iter().chain(&attempt_properties(o)) {
                suite.add_property(Property::new(
                    format!("{}.{key}", o.display_name()),
                    value.as_str(),
                ));
            }
            let mut case = test_case(lesson, o, strict);
            if family == Family::Xunit1 {
                if let Some(file) = &o.file {
                    case.extra.insert("file".into(), file.as_str().into());
                }
                if let Some(line) = o.line {
                    case.extra.insert("line".into(), line.to_string().into());
                }
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    Ok(drop_root_skipped(report.to_string()?))
}

/// `verdict` (FLAKY, which a passed test case does not say) and `attempts` of a retried case.
fn attempt_properties(o: &Outcome) -> Vec<(String, String)> {
    if o.attempts <= 1 {
        return Vec::new();
    }
    vec![
        ("verdict".into(), o.verdict.label().into()),
        ("attempts".into(), o.attempts.to_string()),
    ]
}

/// Makes sure a report can be written at `path` before anything runs: not a folder, its
/// folder created and writable. A report left there by an earlier run is removed, so that a
/// run that cannot finish leaves no stale report behind.
pub fn prepare(path: &Path) -> Result<(), ReportError> {
    Destination::of(path)
        .and_then(|to| to.prepare())
        .map_err(|e| junit_error(path, e))
}

/// Writes the report whole or not at all where `path` leads ([`Destination`]): a consumer
/// never reads half a report, and a failed write leaves no file at `path`.
pub fn write(path: &Path, xml: &str) -> Result<(), ReportError> {
    let to = Destination::of(path).map_err(|e| match e {
        // It became a folder while the run went on: a failed write, not a usage error.
        OutputError::IsFolder { path } => OutputError::Io {
            path,
            source: std::io::Error::other("is a folder"),
        },
        e => e,
    });
    to.and_then(|to| to.write(xml.as_bytes()))
        .map_err(|e| junit_error(path, e))
}

fn junit_error(given: &Path, e: OutputError) -> ReportError {
    match e {
        OutputError::IsFolder { .. } => ReportError::IsFolder {
            path: given.to_owned(),
        },
        OutputError::Folder { dir, source } => ReportError::Folder { dir, source },
        OutputError::Io { path, source } => ReportError::Write { path, source },
    }
}

fn test_case(lesson: u32, o: &Outcome, strict: bool) -> TestCase {
    let mut status = match o.verdict {
        Verdict::Pending | Verdict::Flaky if strict => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status.set_message(format!(
                "{} under --strict: {}",
                o.verdict.label(),
                o.message.as_deref().unwrap_or("not run")
            ));
            status.set_rerun_kind(FlakyOrRerun::Flaky);
            status
        }
        Verdict::Pass | Verdict::Flaky => TestCaseStatus::success(),
        Verdict::Fail | Verdict::Error => {
            let kind = if o.verdict == Verdict::Fail {
                NonSuccessKind::Failure
            } else {
                NonSuccessKind::Error
            };
            let mut status = TestCaseStatus::non_success(kind);
            status.set_message(
                o.message
                    .clone()
                    .unwrap_or_else(|| o.verdict.label().to_owned()),
            );
            if let Some(diff) = &o.diff {
                status.set_description(diff.as_str());
            }
            status
        }
        Verdict::Skip | Verdict::Pending | Verdict::NotRun => {
            let mut status = TestCaseStatus::skipped();
            status.set_message(format!(
                "{}: {}",
                o.verdict.label(),
                o.message.as_deref().unwrap_or("not run")
            ));
            status
        }
    };
    // Earlier failed attempts: <flakyFailure>/<flakyError> on a FLAKY case (a passed one, or
    // a failure under --strict), <rerunFailure>/<rerunError> on one that kept failing. Both
    // schemas take them with `type` set and no `time`.
    status.add_reruns(o.failed_attempts.iter().map(|a| rerun(a, o.attempts)));
    let mut case = TestCase::new(o.display_name(), status);
    let classname = match &o.host {
        Some(host) => format!("lessonprobe.lesson{lesson}.remote.{host}"),
        None => format!("lessonprobe.lesson{lesson}"),
    };
    case.set_classname(classname);
    case.set_time(o.duration);
    if !o.output.is_empty() {
        case.set_system_out(o.output.as_str());
    }
    // Readers that show no reruns (GitLab) still show system-err: the attempts are named there.
    if !o.failed_attempts.is_empty() {
        case.set_system_err(attempts_text(o));
    }
    case
}

fn rerun(attempt: &Attempt, attempts: u32) -> TestRerun {
    let kind = if attempt.verdict == Verdict::Error {
        NonSuccessKind::Error
    } else {
        NonSuccessKind::Failure
    };
    let mut rerun = TestRerun::new(kind);
    rerun.set_type(attempt.verdict.label());
    rerun.set_message(format!(
        "attempt {} of {attempts}: {}",
        attempt.number,
        attempt
            .message
            .as_deref()
            .unwrap_or(attempt.verdict.label())
    ));
    if let Some(diff) = &attempt.diff {
        rerun.set_stack_trace(diff.as_str());
    }
    if !attempt.output.is_empty() {
        rerun.set_system_out(attempt.output.as_str());
    }
    rerun
}

/// The case's verdict over its attempts, then each failed attempt's message and output.
fn attempts_text(o: &Outcome) -> String {
    let mut text = format!(
        "{}: {}\n",
        o.verdict.label(),
        o.message.as_deref().unwrap_or("")
    );
    for a in &o.failed_attempts {
        text.push_str(&format!(
            "--- attempt {} of {}: {}: {}\n",
            a.number,
            o.attempts,
            a.verdict.label(),
            a.message.as_deref().unwrap_or("")
        ));
        text.push_str(&a.output);
        if !a.output.is_empty() && !a.output.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// quick-junit writes `skipped` on the root element, which the schema does not allow there;
/// the per-suite counts carry it.
fn drop_root_skipped(xml: String) -> String {
    let Some(start) = xml.find("<testsuites") else {
        return xml;
    };
    let end = xml[start..].find('>').map_or(xml.len(), |i| start + i);
    let tag = &xml[start..end];
    match tag.find(" skipped=\"") {
        Some(i) => {
            let value_end = tag[i + 10..]
                .find('"')
                .map_or(tag.len(), |j| i + 10 + j + 1);
            format!("{}{}{}", &xml[..start + i], &tag[value_end..], &xml[end..])
        }
        None => xml,
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it or fails.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;
    use crate::run::test_support;

    #[test]
    fn an_interrupted_run_is_written_whole_with_unfinished_cases_as_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reports/i.xml");
        reported(Junit::new(&path), Some(1));
        let xml = std::fs::read_to_string(&path).unwrap();
        let report = Report::deserialize_from_str(&xml).unwrap();
        let suite = &report.test_suites[0];
        assert_eq!((suite.tests, suite.errors, suite.skipped), (4, 2, 1));
        let cases: Vec<(String, String)> = suite
            .test_cases
            .iter()
            .map(|c| {
                let status = match &c.status {
                    TestCaseStatus::Success { .. } => "PASS".to_owned(),
                    TestCaseStatus::NonSuccess { kind, message, .. } => {
                        format!("{kind:?}: {}", message.as_deref().unwrap_or(""))
                    }
                    TestCaseStatus::Skipped { message, .. } => {
                        message.as_deref().unwrap_or("").to_owned()
                    }
                };
                (c.name.to_string(), status)
            })
            .collect();
        let expected = [
            ("first prints", "PASS"),
            (
                "second prints-too",
                "Error: interrupted (SIGINT) while it ran",
            ),
            (
                "prose answered-in-writing",
                "SKIP: prose exercise: answered in writing, no executable form",
            ),
            (
                "third fails",
                "Error: interrupted (SIGINT) before it started",
            ),
        ];
        assert_eq!(cases, expected.map(|(n, s)| (n.to_owned(), s.to_owned())),);
    }

    #[test]
    fn an_unwritable_path_is_a_write_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let mut junit = Junit::new(blocker.join("r.xml"));
        test_support::run(None, |e| junit.event(e));
        let e = junit.finish().unwrap_err();
        assert!(
            matches!(e, ReportError::Folder { ref dir, .. } if *dir == blocker),
            "{e}"
        );
    }

    #[test]
    fn a_folder_or_an_unwritable_place_is_refused_before_the_run_and_a_stale_report_removed() {
        let dir = tempfile::tempdir().unwrap();
        let e = prepare(dir.path()).unwrap_err();
        assert!(matches!(e, ReportError::IsFolder { .. }), "{e}");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let e = prepare(&blocker.join("r.xml")).unwrap_err();
        assert!(matches!(e, ReportError::Folder { .. }), "{e}");
        let stale = dir.path().join("reports/r.xml");
        std::fs::create_dir_all(stale.parent().unwrap()).unwrap();
        std::fs::write(&stale, "<stale/>").unwrap();
        prepare(&stale).unwrap();
        assert!(
            !stale.exists(),
            "a report of an earlier run is not left to look current"
        );
        assert_eq!(
            std::fs::read_dir(dir.path().join("reports"))
                .unwrap()
                .count(),
            0
        );
    }

    #[test]
    fn under_strict_a_pending_case_is_a_failure_saying_so() {
        let mut outcome = test_support::outcome(30, "L30-10", Verdict::Pending);
        outcome.message = Some("TICKETFLOW_REMOTE_TESTS is not set".into());
        let status = |o: &Outcome, strict| test_case(30, o, strict).status;
        assert!(matches!(
            status(&outcome, false),
            TestCaseStatus::Skipped { message: Some(m), .. } if m.as_str() == "PENDING: TICKETFLOW_REMOTE_TESTS is not set"
        ));
        assert!(matches!(
            status(&outcome, true),
            TestCaseStatus::NonSuccess { kind: NonSuccessKind::Failure, message: Some(m), .. }
                if m.as_str() == "PENDING under --strict: TICKETFLOW_REMOTE_TESTS is not set"
        ));
        outcome.verdict = Verdict::Skip;
        assert!(
            matches!(status(&outcome, true), TestCaseStatus::Skipped { .. }),
            "SKIP stays SKIP"
        );
    }

    #[test]
    fn root_skipped_attribute_is_removed_and_nothing_else() {
        let xml = "<?xml?>\n<testsuites name=\"x\" tests=\"3\" skipped=\"1\" failures=\"0\">\n<testsuite skipped=\"1\">".to_string();
        assert_eq!(
            drop_root_skipped(xml),
            "<?xml?>\n<testsuites name=\"x\" tests=\"3\" failures=\"0\">\n<testsuite skipped=\"1\">"
        );
    }
}
