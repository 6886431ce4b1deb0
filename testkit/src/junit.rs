//! JUnit reports read back: parsed with quick-junit, validated against the schemas in
//! `tests/schemas/` with xmllint, and each case's verdict, message and details.

use std::path::Path;
use std::process::Command;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus};

use crate::files::repo;
use crate::services::tool;

/// Validates a JUnit file against the strict schema (`junit-10.xsd`).
#[track_caller]
pub fn validate_junit(path: &Path) {
    validate_against(path, "junit-10.xsd");
}

/// Validates a JUnit file against `tests/schemas/SCHEMA` with xmllint; panics with xmllint's
/// words if it is invalid.
#[track_caller]
pub fn validate_against(path: &Path, schema: &str) {
    if !tool("xmllint") {
        return;
    }
    let out = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(repo().join("tests/schemas").join(schema))
        .arg(path)
        .output()
        .expect("run xmllint");
    assert!(
        out.status.success(),
        "{} is not valid JUnit: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[track_caller]
pub fn parse_junit(path: &Path) -> Report {
    let xml =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// The verdict of a case as its XML element says it: PASS, FAIL, ERROR, or the word before
/// the colon of a skip message (SKIP or PENDING).
pub fn verdict(case: &TestCase) -> String {
    match &case.status {
        TestCaseStatus::Success { .. } => "PASS".to_owned(),
        TestCaseStatus::NonSuccess {
            kind: NonSuccessKind::Failure,
            ..
        } => "FAIL".to_owned(),
        TestCaseStatus::NonSuccess {
            kind: NonSuccessKind::Error,
            ..
        } => "ERROR".to_owned(),
        TestCaseStatus::Skipped { message, .. } => message
            .as_deref()
            .unwrap_or("")
            .split(':')
            .next()
            .unwrap_or("")
            .to_owned(),
    }
}

/// `(name, verdict)` of every test case, in report order.
pub fn verdicts(report: &Report) -> Vec<(String, String)> {
    report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .map(|c| (c.name.to_string(), verdict(c)))
        .collect()
}

/// The case named `name`, in any suite.
#[track_caller]
pub fn case<'a>(report: &'a Report, name: &str) -> &'a TestCase {
    report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no test case {name:?} in {:?}", verdicts(report)))
}

/// The `message` of a failure, error or skip ("" for a pass).
pub fn message(case: &TestCase) -> String {
    match &case.status {
        TestCaseStatus::NonSuccess { message, .. } | TestCaseStatus::Skipped { message, .. } => {
            message.as_deref().unwrap_or("").to_owned()
        }
        TestCaseStatus::Success { .. } => String::new(),
    }
}

/// The text of a failure or error element (its diff or traceback; "" otherwise).
pub fn description(case: &TestCase) -> String {
    match &case.status {
        TestCaseStatus::NonSuccess { description, .. } => {
            description.as_deref().unwrap_or("").to_owned()
        }
        _ => String::new(),
    }
}

/// An extra attribute of a case's element (`file`, `line`), as written.
pub fn attribute<'a>(case: &'a TestCase, name: &str) -> Option<&'a str> {
    case.extra.get(name).map(|value| value.as_str())
}
