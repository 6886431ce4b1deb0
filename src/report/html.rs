//! The HTML report (`--html PATH`): one self-contained page (styles inline, no script, no
//! network) for a maintainer reviewing a revision of a course: the run's verdict as the exit
//! code gives it and the counts, what was verified (course, revision, backends, broker), each
//! lesson's probes with their verdicts, each failing case's expected-against-actual diff (open,
//! not folded) and the code it ran where its document gives it (a notebook cell's source), and
//! the PENDING cases with what would enable them.

use std::fmt::Write as _;
use std::path::PathBuf;

use html_escape::encode_text as esc;

use super::output::Destination;
use super::provenance::Provenance;
use super::{failed_itself, Gathered, ReportError, Reporter};
use crate::run::RunEvent;
use crate::run::{Counts, Outcome, Verdict};

pub struct Html {
    path: PathBuf,
    strict: bool,
    provenance: Provenance,
    gathered: Gathered,
}

impl Html {
    pub fn new(path: impl Into<PathBuf>, provenance: Provenance) -> Self {
        Html {
            path: path.into(),
            strict: false,
            provenance,
            gathered: Gathered::default(),
        }
    }

    /// Under `--strict`, PENDING cases fail the run.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

impl Reporter for Html {
    fn event(&mut self, event: &RunEvent<'_>) {
        self.gathered.take(event);
    }

    fn report_failed(&mut self, error: &ReportError) {
        self.gathered.report_failed(error);
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        let page = Page {
            run_id: self.gathered.run_id.clone(),
            succeeded: self.gathered.succeeded(self.strict),
            interrupted: self
                .gathered
                .summary
                .and_then(|s| s.interrupted)
                .map(|i| i.name()),
            wall: self.gathered.wall().as_secs_f64(),
            strict: self.strict,
            report_error: self.gathered.report_error.clone(),
            outcomes: self.gathered.outcomes(),
        };
        let text = page.render(&self.provenance);
        Destination::of(&self.path)
            .and_then(|to| to.write(text.as_bytes()))
            .map_err(|e| {
                let (path, source) = e.into_parts();
                ReportError::WriteOther {
                    what: "the HTML report",
                    path,
                    source,
                }
            })
    }
}

struct Page {
    run_id: String,
    succeeded: bool,
    interrupted: Option<&'static str>,
    wall: f64,
    strict: bool,
    report_error: Option<String>,
    outcomes: Vec<Outcome>,
}

const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
h1.passed{color:#1a7f37}h1.failed{color:#cf222e}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
.v{font-weight:bold}.PASS{color:#1a7f37}.FAIL,.ERROR{color:#cf222e}.SKIP{color:#9a6700}.PENDING{color:#0969da}
pre.diff{background:#f6f8fa;padding:.6em;overflow-x:auto}
pre.diff span{display:block}
pre.source{background:#f6f8fa;padding:.6em;overflow-x:auto;border-left:3px solid #0969da}
.del{background:#ffebe9}.ins{background:#dafbe1}.hunk{color:#8250df}
code{font-size:90%}
";

/// The code a failing case ran, where its document gives it (a notebook cell's source), headed
/// by where it is written: its file, its cell and line.
fn code(h: &mut String, o: &Outcome) {
    let Some(code) = &o.code else {
        return;
    };
    let mut place = o.file.clone().unwrap_or_default();
    if let Some(cell) = o.cell {
        let _ = write!(place, " cell {cell}");
    }
    if let Some(line) = o.line {
        let _ = write!(place, " line {line}");
    }
    let _ = writeln!(
        h,
        "<p>source ({}):</p><pre class=\"source\">{}</pre>",
        esc(place.trim()),
        esc(code)
    );
}

impl Page {
    fn render(&self, env: &Provenance) -> String {
        let counts = Counts::of(&self.outcomes);
        let verdict = if self.succeeded { "passed" } else { "failed" };
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>lessonprobe: {verdict}</title><style>{STYLE}</style></head><body>\n\
             <h1 id=\"verdict\" class=\"{verdict}\">lessonprobe: {verdict}</h1>\n\
             <p id=\"counts\">{}</p>\n",
            esc(&counts.to_string())
        );
        let mut notes = vec![format!("run {} in {:.2}s", self.run_id, self.wall)];
        if let Some(signal) = self.interrupted {
            notes.push(format!(
                "interrupted ({signal}): cases that did not finish are ERROR"
            ));
        }
        if self.strict {
            notes.push("--strict: PENDING cases fail the run".into());
        }
        if let Some(error) = &self.report_error {
            notes.push(error.clone());
        }
        let _ = writeln!(h, "<p>{}</p>", esc(&notes.join("; ")));
        h.push_str("<h2>Environment</h2>\n<table id=\"environment\">\n");
        for (label, value) in env.rows() {
            let _ = writeln!(
                h,
                "<tr><th>{}</th><td>{}</td></tr>",
                esc(label),
                esc(&value)
            );
        }
        h.push_str("</table>\n");
        self.lessons(&mut h);
        self.failures(&mut h);
        self.pending(&mut h);
        h.push_str("</body></html>\n");
        h
    }

    /// A table per lesson: every case with its verdict, place, time and message.
    fn lessons(&self, h: &mut String) {
        h.push_str("<h2>Lessons</h2>\n");
        let mut lessons: Vec<u32> = self.outcomes.iter().map(|o| o.lesson).collect();
        lessons.dedup();
        for lesson in lessons {
            let cases: Vec<&Outcome> = self
                .outcomes
                .iter()
                .filter(|o| o.lesson == lesson)
                .collect();
            let title = cases.first().map_or("", |o| o.checkpoint.as_str());
            let mut c = Counts::default();
            for o in &cases {
                c.add(std::slice::from_ref(*o));
            }
            let _ = writeln!(
                h,
                "<h3 id=\"lesson-{lesson}\">lesson {lesson}: {} <small>({})</small></h3>",
                esc(title),
                esc(&c.to_string())
            );
            h.push_str("<table class=\"lesson\"><tr><th>verdict</th><th>probe</th><th>where</th><th>time</th><th>message</th></tr>\n");
            for o in cases {
                let _ = writeln!(
                    h,
                    "<tr><td class=\"v {v}\">{v}</td><td>{}</td><td><code>{}</code></td><td>{:.3}s</td><td>{}</td></tr>",
                    esc(&o.display_name()),
                    esc(&o.location().unwrap_or_default()),
                    o.duration.as_secs_f64(),
                    esc(o.message.as_deref().unwrap_or("")),
                    v = o.verdict.label(),
                );
            }
            h.push_str("</table>\n");
        }
    }

    /// Each case that failed the run: its message and its diff, or its output, shown open.
    fn failures(&self, h: &mut String) {
        let failing: Vec<&Outcome> = self
            .outcomes
            .iter()
            .filter(|o| failed_itself(o.verdict, self.strict) && o.verdict != Verdict::Pending)
            .collect();
        if failing.is_empty() {
            return;
        }
        h.push_str("<h2>Failures</h2>\n");
        for o in failing {
            let _ = writeln!(
                h,
                "<details open class=\"failure\"><summary><span class=\"v {v}\">{v}</span> lesson {} {} <code>{}</code></summary>",
                o.lesson,
                esc(&o.display_name()),
                esc(&o.location().unwrap_or_default()),
                v = o.verdict.label(),
            );
            if let Some(message) = &o.message {
                let _ = writeln!(h, "<p>{}</p>", esc(message));
            }
            code(h, o);
            match &o.diff {
                Some(diff) => {
                    h.push_str("<pre class=\"diff\">");
                    for line in diff.lines() {
                        let class = match line.chars().next() {
                            Some('-') if !line.starts_with("---") => "del",
                            Some('+') if !line.starts_with("+++") => "ins",
                            Some('@') => "hunk",
                            _ => "ctx",
                        };
                        let _ = write!(h, "<span class=\"{class}\">{}</span>", esc(line));
                    }
                    h.push_str("</pre>\n");
                }
                None if !o.output.is_empty() => {
                    let _ = writeln!(
                        h,
                        "<p>output:</p><pre class=\"diff\">{}</pre>",
                        esc(&o.output)
                    );
                }
                None => {}
            }
            h.push_str("</details>\n");
        }
    }

    /// PENDING cases and what would enable them.
    fn pending(&self, h: &mut String) {
        let pending: Vec<&Outcome> = self
            .outcomes
            .iter()
            .filter(|o| o.verdict == Verdict::Pending)
            .collect();
        if pending.is_empty() {
            return;
        }
        h.push_str("<h2>Pending</h2>\n<table id=\"pending\"><tr><th>probe</th><th>where</th><th>what would enable it</th></tr>\n");
        for o in pending {
            let _ = writeln!(
                h,
                "<tr><td>lesson {} {}</td><td><code>{}</code></td><td>{}</td></tr>",
                o.lesson,
                esc(&o.display_name()),
                esc(&o.location().unwrap_or_default()),
                esc(o.message.as_deref().unwrap_or("")),
            );
        }
        h.push_str("</table>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;
    use crate::run::test_support;

    #[test]
    fn a_self_contained_page_with_counts_verdicts_and_the_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/report.html");
        reported(Html::new(&path, Provenance::default()), None);
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(
            page.contains("<h1 id=\"verdict\" class=\"failed\">"),
            "{page}"
        );
        assert!(page.contains("2 passed, 1 failed, 0 errors, 1 skipped, 0 pending"));
        assert!(page.contains("<details open class=\"failure\">"));
        assert!(page.contains("third fails"));
        assert!(!page.contains("http://") && !page.contains("https://"));
    }

    /// The page of a failed run of the one outcome `o`.
    fn failed_page(o: Outcome) -> String {
        Page {
            run_id: "r".into(),
            succeeded: false,
            interrupted: None,
            wall: 0.0,
            strict: false,
            report_error: None,
            outcomes: vec![o],
        }
        .render(&Provenance::default())
    }

    #[test]
    fn a_failing_cells_source_is_shown_escaped_with_its_notebook_cell_and_line() {
        let mut o = test_support::outcome(36, "nb.ipynb#c1", Verdict::Fail);
        o.file = Some("lessons/nb.ipynb".into());
        o.cell = Some(2);
        o.line = Some(31);
        o.code = Some("print('<rows>')".into());
        o.diff = Some("-3 rows\n+4 rows".into());
        let page = failed_page(o);
        assert!(
            page.contains(
                "<p>source (lessons/nb.ipynb cell 2 line 31):</p><pre class=\"source\">print('&lt;rows&gt;')</pre>"
            ),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"del\">-3 rows</span>"),
            "{page}"
        );
    }

    #[test]
    fn text_is_escaped() {
        let mut o = test_support::outcome(5, "<b>x</b>", Verdict::Fail);
        o.diff = Some("-<script>\n+&amp;".into());
        let page = failed_page(o);
        assert!(
            !page.contains("<b>x</b>") && !page.contains("<script>"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"del\">-&lt;script&gt;</span>"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"ins\">+&amp;amp;</span>"),
            "{page}"
        );
    }
}
