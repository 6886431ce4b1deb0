//! What the lessons of the sample course (`examples/ticketflow-course`) report, and how a
//! course whose lesson cannot be read is refused: shared by the tests of lesson documents.

use std::path::Path;

use lessonprobe_testkit::*;

/// Lesson 29's cases in the sample course and their verdicts.
pub const LESSON_29: [(&str, &str); 4] = [
    ("sample_event.py snippet", "PASS"),
    ("commit_order_probe.py snippet", "PASS"),
    ("EX-29-01 audit_fail_probe.py", "PASS"),
    ("EX-29-02 exercise", "SKIP"),
];

/// Lesson 30's cases in the sample course and their verdicts.
pub const LESSON_30: [(&str, &str); 6] = [
    ("sql_audit_probe.py snippet", "PASS"),
    ("integrity_error_probe.py snippet", "PASS"),
    ("replay_plan_probe.py snippet", "PASS"),
    ("EX-30-01 audit_sql_duplicate_probe.py", "PASS"),
    ("EX-30-02 exercise", "SKIP"),
    ("L30-11 verify-executable-revisions", "PASS"),
];

/// A run in `dir` of the `course`, which must exit 2 with `error` on stderr, print nothing on
/// stdout, not panic, and write no JUnit report.
#[track_caller]
pub fn refused_without_a_report(dir: &Path, course: &Path, error: String) {
    let xml = dir.join("never.xml");
    lessonprobe()
        .current_dir(dir)
        .arg("--course")
        .arg(course)
        .arg("--junit")
        .arg(&xml)
        .stderr_has(error)
        .stderr_lacks("panicked")
        .stdout("")
        .status(2);
    assert!(!xml.exists(), "{}", dir.display());
}
