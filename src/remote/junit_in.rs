//! Reading the remote JUnit report back into cases: passed, failure, error, skipped.

use quick_junit::{NonSuccessKind, Report, TestCaseStatus};

use super::{RemoteCase, RemoteVerdict};

/// Every test case of the report, in order. A report that does not parse is an error.
pub fn cases(xml: &[u8]) -> Result<Vec<RemoteCase>, String> {
    let text = String::from_utf8_lossy(xml);
    let report = Report::deserialize_from_str(&text)
        .map_err(|e| format!("the remote JUnit report does not parse: {e}"))?;
    let mut out = Vec::new();
    for suite in report.test_suites {
        for case in suite.test_cases {
            let (verdict, message) = match &case.status {
                TestCaseStatus::Success { .. } => (RemoteVerdict::Pass, None),
                TestCaseStatus::NonSuccess {
                    kind,
                    message,
                    description,
                    ..
                } => {
                    let verdict = if *kind == NonSuccessKind::Failure {
                        RemoteVerdict::Fail
                    } else {
                        RemoteVerdict::Error
                    };
                    let text = [message.as_deref(), description.as_deref()]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join("\n");
                    (verdict, Some(text))
                }
                TestCaseStatus::Skipped { message, .. } => {
                    (RemoteVerdict::Skip, message.as_deref().map(str::to_owned))
                }
            };
            let name = match case.classname.as_deref() {
                Some(class) if !class.is_empty() => format!("{class}::{}", case.name.as_str()),
                _ => case.name.to_string(),
            };
            let output = [case.system_out.as_deref(), case.system_err.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join("\n");
            out.push(RemoteCase {
                name,
                verdict,
                message,
                output,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_style_reports_map_to_verdicts() {
        let xml = br#"<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="4" errors="1" failures="1" skipped="1">
<testcase classname="tests.integration.test_kafka_remote" name="test_ok" time="0.1"/>
<testcase classname="t" name="test_fail" time="0.1"><failure message="assert 1 == 2">diff</failure></testcase>
<testcase classname="t" name="test_err" time="0.1"><error message="boom"/></testcase>
<testcase classname="t" name="test_skip" time="0"><skipped message="no broker"/></testcase>
</testsuite></testsuites>"#;
        let cases = cases(xml).unwrap();
        let verdicts: Vec<RemoteVerdict> = cases.iter().map(|c| c.verdict).collect();
        assert_eq!(
            verdicts,
            [
                RemoteVerdict::Pass,
                RemoteVerdict::Fail,
                RemoteVerdict::Error,
                RemoteVerdict::Skip
            ]
        );
        assert_eq!(
            cases[0].name,
            "tests.integration.test_kafka_remote::test_ok"
        );
        assert_eq!(cases[1].message.as_deref(), Some("assert 1 == 2\ndiff"));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(cases(b"not xml at all").is_err());
    }
}
