//! Reading the remote JUnit report back into cases: passed, failure, error, skipped, with each
//! case's own time. Producers differ (root `<testsuites>` or a lone `<testsuite>`, suites with
//! or without a name, nested suites, timestamps with or without a zone), so only the test cases
//! are read and nothing else is required.

use std::time::Duration;

use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::{RemoteCase, RemoteVerdict};

/// Every test case of the report, in order. A report that is not well-formed XML or whose
/// root is not `<testsuites>` or `<testsuite>` is an error.
pub fn cases(xml: &[u8]) -> Result<Vec<RemoteCase>, String> {
    let text = String::from_utf8_lossy(xml);
    let mut reader = Reader::from_str(&text);
    reader.config_mut().expand_empty_elements = true;
    let broken = |reader: &Reader<&[u8]>, e: &dyn std::fmt::Display| {
        format!(
            "the remote JUnit report does not parse (byte {}): {e}",
            reader.error_position()
        )
    };
    let mut out = Vec::new();
    let mut root = false;
    let mut case: Option<Case> = None;
    let mut into: Option<Part> = None;
    loop {
        let event = reader.read_event().map_err(|e| broken(&reader, &e))?;
        match event {
            Event::Start(e) => {
                let name = e.local_name();
                let name = name.as_ref();
                if !root {
                    root = true;
                    if name != b"testsuites" && name != b"testsuite" {
                        return Err(format!(
                            "the remote report is not JUnit: its root element is <{}>, not <testsuites> or <testsuite>",
                            String::from_utf8_lossy(name)
                        ));
                    }
                }
                match (name, case.as_mut()) {
                    (b"testcase", None) => case = Some(Case::start(&e)),
                    (b"failure" | b"error" | b"skipped", Some(c)) if into.is_none() => {
                        let kind = match name {
                            b"error" => RemoteVerdict::Error,
                            b"failure" => RemoteVerdict::Fail,
                            _ => RemoteVerdict::Skip,
                        };
                        c.statuses.push(Status {
                            kind,
                            message: attribute(&e, b"message"),
                            text: String::new(),
                        });
                        into = Some(Part::Status);
                    }
                    (b"system-out" | b"system-err", Some(_)) if into.is_none() => {
                        into = Some(Part::Output);
                    }
                    _ => {}
                }
            }
            Event::End(e) => match e.local_name().as_ref() {
                b"testcase" => out.extend(case.take().map(Case::finish)),
                b"failure" | b"error" | b"skipped" | b"system-out" | b"system-err" => into = None,
                _ => {}
            },
            Event::Text(t) => {
                let t = t.xml10_content().map_err(|e| broken(&reader, &e))?;
                push(&mut case, into, &t);
            }
            Event::CData(t) => {
                let t = t.decode().map_err(|e| broken(&reader, &e))?;
                push(&mut case, into, &t);
            }
            Event::GeneralRef(r) => {
                let name = r.decode().map_err(|e| broken(&reader, &e))?;
                let resolved = match r.resolve_char_ref().map_err(|e| broken(&reader, &e))? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_xml_entity(&name)
                        .map_or_else(|| format!("&{name};"), str::to_owned),
                };
                push(&mut case, into, &resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !root {
        return Err("the remote JUnit report holds no XML element".into());
    }
    Ok(out)
}

/// Which text of the open test case the reader is collecting.
#[derive(Clone, Copy)]
enum Part {
    Status,
    Output,
}

struct Status {
    kind: RemoteVerdict,
    message: Option<String>,
    text: String,
}

struct Case {
    name: String,
    time: Option<Duration>,
    statuses: Vec<Status>,
    output: String,
}

impl Case {
    fn start(e: &BytesStart<'_>) -> Case {
        let name = attribute(e, b"name").unwrap_or_default();
        let name = match attribute(e, b"classname") {
            Some(class) if !class.is_empty() => format!("{class}::{name}"),
            _ => name,
        };
        Case {
            name,
            time: attribute(e, b"time")
                .and_then(|t| t.trim().parse::<f64>().ok())
                .and_then(|s| Duration::try_from_secs_f64(s).ok()),
            statuses: Vec::new(),
            output: String::new(),
        }
    }

    /// The verdict of its worst status: error, then failure, then skipped; none is a pass.
    fn finish(self) -> RemoteCase {
        let rank = |k: RemoteVerdict| match k {
            RemoteVerdict::Error => 3,
            RemoteVerdict::Fail => 2,
            RemoteVerdict::Skip => 1,
            RemoteVerdict::Pass => 0,
        };
        let worst = self.statuses.into_iter().max_by_key(|s| rank(s.kind));
        let (verdict, message) = match worst {
            None => (RemoteVerdict::Pass, None),
            Some(s) if s.kind == RemoteVerdict::Skip => (s.kind, s.message),
            Some(s) => {
                let text = [s.message.as_deref(), Some(s.text.trim())]
                    .into_iter()
                    .flatten()
                    .filter(|t| !t.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                (s.kind, Some(text))
            }
        };
        RemoteCase {
            name: self.name,
            verdict,
            message,
            output: self.output.trim_end().to_owned(),
            time: self.time,
        }
    }
}

fn push(case: &mut Option<Case>, into: Option<Part>, text: &str) {
    match (case.as_mut(), into) {
        (Some(c), Some(Part::Output)) => c.output.push_str(text),
        (Some(c), Some(Part::Status)) => {
            if let Some(s) = c.statuses.last_mut() {
                s.text.push_str(text);
            }
        }
        _ => {}
    }
}

fn attribute(e: &BytesStart<'_>, key: &[u8]) -> Option<String> {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().as_ref() == key)
        .map(|a| {
            a.normalized_value(XmlVersion::Implicit1_0).map_or_else(
                |_| String::from_utf8_lossy(&a.value).into_owned(),
                |v| v.into_owned(),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(cases: &[RemoteCase]) -> Vec<RemoteVerdict> {
        cases.iter().map(|c| c.verdict).collect()
    }

    #[test]
    fn pytest_style_reports_map_to_verdicts_and_times() {
        let xml = br#"<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="4" errors="1" failures="1" skipped="1" timestamp="2026-11-30T10:00:00.123456">
<testcase classname="tests.integration.test_kafka_remote" name="test_ok" time="120.250"/>
<testcase classname="t" name="test_fail" time="0.1"><failure message="assert 1 == 2">diff &amp; more&#10;end</failure><system-out>printed</system-out></testcase>
<testcase classname="t" name="test_err" time="0.1"><error message="boom"/></testcase>
<testcase classname="t" name="test_skip" time="0"><skipped message="no broker"/></testcase>
</testsuite></testsuites>"#;
        let cases = cases(xml).unwrap();
        assert_eq!(
            verdicts(&cases),
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
        assert_eq!(cases[0].time, Some(Duration::from_millis(120_250)));
        assert_eq!(
            cases[1].message.as_deref(),
            Some("assert 1 == 2\ndiff & more\nend")
        );
        assert_eq!(cases[1].output, "printed");
        assert_eq!(cases[3].message.as_deref(), Some("no broker"));
    }

    #[test]
    fn a_lone_testsuite_root_and_a_suite_without_a_name_are_read() {
        let xml = br#"<testsuite tests="2"><testcase name="a" time="1.5"/><testcase name="b"><error/></testcase></testsuite>"#;
        let cases = cases(xml).unwrap();
        assert_eq!(
            verdicts(&cases),
            [RemoteVerdict::Pass, RemoteVerdict::Error]
        );
        assert_eq!(
            (cases[0].name.as_str(), cases[0].time),
            ("a", Some(Duration::from_millis(1500)))
        );
        assert_eq!((cases[1].name.as_str(), cases[1].time), ("b", None));
        let nested = br#"<testsuites><testsuite><testsuite name="inner"><testcase name="c" time="x"/></testsuite></testsuite></testsuites>"#;
        let cases = super::cases(nested).unwrap();
        assert_eq!((cases.len(), cases[0].time), (1, None));
    }

    #[test]
    fn garbage_and_other_documents_are_errors() {
        assert!(cases(b"not xml at all").is_err());
        assert!(cases(b"").is_err());
        let e = cases(b"<html><body/></html>").unwrap_err();
        assert!(e.contains("root element is <html>"), "{e}");
        assert!(cases(b"<testsuites><testsuite></testcase></testsuites>").is_err());
    }
}
