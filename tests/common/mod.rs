//! Helpers shared by the integration tests: the built binary, the repository's manifests, and
//! services that must exist in CI.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `lessonprobe`, run in `cwd`, with the environment cleared of our own variables.
pub fn lessonprobe(cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lessonprobe"));
    cmd.current_dir(cwd);
    for var in [
        "LESSONPROBE_CHECKPOINTS",
        "LESSONPROBE_DB",
        "LESSONPROBE_KAFKA",
        "LESSONPROBE_HOSTS",
        "TICKETFLOW_REMOTE_TESTS",
        "LESSONPROBE_RUN_ID",
        "NO_COLOR",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `Some(value)` of a variable naming a service; in CI a missing one fails the test loudly,
/// elsewhere the test is skipped with the reason on stderr.
pub fn service(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if in_ci() => panic!("{var} is not set: CI must provide {what} (see .ci/run)"),
        _ => {
            eprintln!("skipped: {var} is not set, so {what} is not available (run the tests through .ci/run)");
            None
        }
    }
}

/// Whether a program is on PATH; in CI a missing one fails loudly.
pub fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(!in_ci(), "{name} is not installed: .ci/run must install it");
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// Validates a JUnit file against the schema with xmllint; panics with xmllint's words if invalid.
pub fn validate_junit(path: &Path) {
    if !tool("xmllint") {
        return;
    }
    let out = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(repo().join("tests/schemas/junit-10.xsd"))
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

pub fn parse_junit(path: &Path) -> quick_junit::Report {
    let xml =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    quick_junit::Report::deserialize_from_str(&xml)
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// `(name, verdict)` of every test case, the verdict read from the XML element.
pub fn verdicts(report: &quick_junit::Report) -> Vec<(String, String)> {
    use quick_junit::{NonSuccessKind, TestCaseStatus};
    let mut out = Vec::new();
    for suite in &report.test_suites {
        for case in &suite.test_cases {
            let verdict = match &case.status {
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
            };
            out.push((case.name.to_string(), verdict));
        }
    }
    out
}

/// Copies the repository's manifests into `dir/checkpoints` for a test to alter.
pub fn copy_manifests(dir: &Path) -> PathBuf {
    let to = dir.join("checkpoints");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(repo().join("checkpoints")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    to
}
