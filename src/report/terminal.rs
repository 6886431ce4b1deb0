//! The terminal reporter: a line per case as it ends, diffs for mismatches, and a closing line
//! with the counts, the wall time and why the run failed (the FAIL and ERROR ids, PENDING under
//! `--strict`, the NOT RUN left by `--max-fail`, an interruption) and the FLAKY ids (failing
//! the run under `--strict`). On a terminal a status line below the lines names the cases
//! running now; when stdout is not a terminal there is none. Colour only on a terminal and
//! never with NO_COLOR.

use std::io::{IsTerminal, Stdout, Write};
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::output::Delivered;
use super::{ReportError, Reporter};
use crate::run::{Interruption, Outcome, RunEvent, RunSummary, Verdict};

pub struct Terminal<W: Write> {
    out: W,
    colour: bool,
    verbose: bool,
    /// Whether to keep a status line of running cases (stdout is a terminal).
    status_line: bool,
    live: Option<Live>,
    /// Named in the closing lines, with whether it was written.
    junit: Option<(PathBuf, Delivered)>,
    strict: bool,
    /// Verdict and name of every case the closing line names (those that fail the run, and
    /// FLAKY ones), in the order they finished.
    failing: Vec<(Verdict, String)>,
    /// Whether the run covers several lessons: then the recap names each case's lesson.
    several_lessons: bool,
    summary: Option<RunSummary>,
}

/// Cases the closing line names; more are counted.
const RECAP: usize = 10;

impl Terminal<Stdout> {
    /// On standard output: a status line and colour when it is a terminal.
    pub fn stdout(verbose: bool, junit: Option<(PathBuf, Delivered)>) -> Self {
        let tty = std::io::stdout().is_terminal();
        let mut terminal = Terminal::to(std::io::stdout(), verbose, junit, colour(tty));
        terminal.status_line = tty;
        terminal
    }
}

impl Terminal<std::io::Stderr> {
    /// On standard error, when a report takes standard output: colour when it is a terminal,
    /// no status line.
    pub fn stderr(verbose: bool, junit: Option<(PathBuf, Delivered)>) -> Self {
        let tty = std::io::stderr().is_terminal();
        Terminal::to(std::io::stderr(), verbose, junit, colour(tty))
    }
}

impl<W: Write> Terminal<W> {
    /// To `out`, never with a status line.
    pub fn to(out: W, verbose: bool, junit: Option<(PathBuf, Delivered)>, colour: bool) -> Self {
        Terminal {
            out,
            colour,
            verbose,
            status_line: false,
            live: None,
            junit,
            strict: false,
            failing: Vec::new(),
            several_lessons: false,
            summary: None,
        }
    }

    /// Under `--strict`, PENDING cases fail the run and the closing line says so.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Writes `lines` above the status line, if there is one.
    fn print(&mut self, lines: &[String]) {
        let out = &mut self.out;
        let mut write = || {
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        };
        match &self.live {
            Some(live) => live.bar.suspend(write),
            None => write(),
        }
    }

    /// Notes a case that fails the run, or is FLAKY, for the closing line.
    fn record(&mut self, o: &Outcome) {
        let fails = match o.verdict {
            Verdict::Fail | Verdict::Error | Verdict::NotRun | Verdict::Flaky => true,
            Verdict::Pending => self.strict,
            Verdict::Pass | Verdict::Skip => false,
        };
        if !fails {
            return;
        }
        if o.kind == crate::run::PREFLIGHT {
            self.failing
                .push((o.verdict, format!("environment: {}", o.name)));
            return;
        }
        let mut name = o.id.clone();
        if let Some(backend) = o.backend {
            name.push_str(&format!(" [{backend}]"));
        }
        if self.several_lessons {
            name = format!("{}/{name}", o.lesson);
        }
        self.failing.push((o.verdict, name));
    }

    /// The counts, the wall time, the cases that failed the run by verdict, an interruption.
    fn closing(&self, summary: RunSummary) -> String {
        let mut closing = format!("{} in {:.2}s", summary.counts, summary.wall.as_secs_f64());
        let flaky = if self.strict {
            "FLAKY under --strict"
        } else {
            "FLAKY"
        };
        for (verdict, label) in [
            (Verdict::Fail, "FAIL"),
            (Verdict::Error, "ERROR"),
            (Verdict::Pending, "PENDING under --strict"),
            (Verdict::Flaky, flaky),
            (Verdict::NotRun, "NOT RUN"),
        ] {
            let names: Vec<&str> = self
                .failing
                .iter()
                .filter(|(v, _)| *v == verdict)
                .map(|(_, name)| name.as_str())
                .collect();
            if names.is_empty() {
                continue;
            }
            let mut recap = names[..names.len().min(RECAP)].join(", ");
            if names.len() > RECAP {
                recap.push_str(&format!(" and {} more", names.len() - RECAP));
            }
            closing.push_str(&format!("; {label}: {recap}"));
        }
        if let Some(why) = summary.interrupted {
            closing.push_str(&format!("; interrupted ({})", why.name()));
        }
        closing
    }

    fn outcome_lines(&self, o: &Outcome) -> Vec<String> {
        let mut lines = vec![self.line(o)];
        lines.extend(self.details(o));
        lines
    }

    fn line(&self, o: &Outcome) -> String {
        let label = format!("{:<7}", o.verdict.label());
        let label = if self.colour {
            paint(o.verdict, &label)
        } else {
            label
        };
        // A failed preflight check: what is wrong and the fix, on one line.
        if o.kind == crate::run::PREFLIGHT {
            return format!(
                "{label} environment: {}",
                o.message.as_deref().unwrap_or("")
            );
        }
        let mut line = format!(
            "{label} [{:>7.3}s] lesson {} {}",
            o.duration.as_secs_f64(),
            o.lesson,
            o.display_name()
        );
        if let Some(host) = &o.host {
            line.push_str(&format!(" @{host}"));
        }
        if matches!(
            o.verdict,
            Verdict::Skip | Verdict::Pending | Verdict::NotRun | Verdict::Flaky
        ) {
            if let Some(reason) = &o.message {
                line.push_str(&format!(": {reason}"));
            }
        }
        if o.attempts > 1 && o.verdict.failed() {
            line.push_str(&format!(" (failed all {} attempts)", o.attempts));
        }
        line
    }

    fn details(&self, o: &Outcome) -> Vec<String> {
        let mut lines = Vec::new();
        if matches!(o.verdict, Verdict::Fail | Verdict::Error) && o.kind != crate::run::PREFLIGHT {
            if let Some(message) = &o.message {
                lines.push(format!("        {message}"));
            }
            if let Some(diff) = &o.diff {
                lines.extend(diff.lines().map(|l| format!("        {l}")));
            }
        }
        // The earlier attempts of a retried case, the last attempt being the case's own.
        for a in &o.failed_attempts {
            lines.push(format!(
                "        attempt {} of {}: {}: {}",
                a.number,
                o.attempts,
                a.verdict.label(),
                a.message.as_deref().unwrap_or("")
            ));
            if self.verbose && !a.output.is_empty() {
                lines.extend(a.output.lines().map(|l| format!("        | {l}")));
            }
        }
        if self.verbose {
            lines.push(format!("        claim: {}", o.claim));
            if !o.output.is_empty() {
                lines.extend(o.output.lines().map(|l| format!("        | {l}")));
            }
            if let Some(answer) = &o.answer {
                lines.push(format!("        answer key: {answer}"));
            }
        }
        lines
    }
}

impl<W: Write> Reporter for Terminal<W> {
    fn event(&mut self, event: &RunEvent<'_>) {
        match event {
            RunEvent::RunStarted { cases, .. } => {
                self.several_lessons = cases
                    .windows(2)
                    .any(|w| w[0].checkpoint.lesson != w[1].checkpoint.lesson);
                if self.status_line {
                    self.live = Some(Live::start(cases.len()));
                }
            }
            RunEvent::CaseStarted { index, case } => {
                if let Some(live) = &mut self.live {
                    live.running.push((*index, case.display_name()));
                    live.show();
                }
            }
            RunEvent::CaseFinished {
                index, outcomes, ..
            } => {
                let lines: Vec<String> = outcomes
                    .iter()
                    .flat_map(|o| self.outcome_lines(o))
                    .collect();
                self.print(&lines);
                for o in outcomes.iter() {
                    self.record(o);
                }
                if let Some(live) = &mut self.live {
                    live.running.retain(|(i, _)| i != index);
                    live.bar.inc(1);
                    live.show();
                }
            }
            RunEvent::RunInterrupted {
                reason,
                running,
                not_started,
            } => {
                let line = match reason {
                    Interruption::Restart => format!(
                        "RESTARTING: a watched file changed; {running} running and {not_started} waiting cases end as ERROR; stopping what runs"
                    ),
                    _ => format!(
                        "INTERRUPTED ({}): {running} running and {not_started} waiting cases end as ERROR; stopping what runs (interrupt again to exit at once)",
                        reason.name()
                    ),
                };
                self.print(&[line]);
            }
            RunEvent::RunFinished { summary } => {
                self.summary = Some(*summary);
                if let Some(live) = self.live.take() {
                    live.bar.finish_and_clear();
                }
            }
        }
    }

    /// The closing lines: where the JUnit report is (or that it could not be written: its
    /// reporter finished first, and a stale report was removed before the run), and the counts,
    /// the wall time and why the run failed.
    fn finish(&mut self) -> Result<(), ReportError> {
        let mut lines = Vec::new();
        if let Some((path, delivered)) = &self.junit {
            lines.push(if delivered.get() {
                format!("JUnit report: {}", path.display())
            } else {
                format!("JUnit report not written: {}", path.display())
            });
        }
        if let Some(summary) = self.summary {
            lines.push(self.closing(summary));
        }
        self.print(&lines);
        Ok(())
    }
}

/// Whether a stream gets colour: only a terminal, and never when NO_COLOR is set to anything.
pub fn colour(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The status line: cases finished of all, and the names of those running.
struct Live {
    bar: ProgressBar,
    /// Plan index and name of each running case, in the order they started.
    running: Vec<(usize, String)>,
}

impl Live {
    fn start(cases: usize) -> Live {
        let bar = ProgressBar::with_draw_target(Some(cases as u64), ProgressDrawTarget::stdout());
        let style = ProgressStyle::with_template("{spinner} [{elapsed}] {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(100));
        Live {
            bar,
            running: Vec::new(),
        }
    }

    fn show(&self) {
        let names: Vec<&str> = self.running.iter().map(|(_, n)| n.as_str()).collect();
        self.bar.set_message(if names.is_empty() {
            String::new()
        } else {
            format!("running: {}", names.join(", "))
        });
    }
}

fn paint(verdict: Verdict, text: &str) -> String {
    let code = match verdict {
        Verdict::Pass => "32",
        Verdict::Fail | Verdict::Error => "31;1",
        Verdict::Skip => "33",
        Verdict::Pending => "36",
        Verdict::Flaky => "35;1",
        Verdict::NotRun => "2",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;
    use crate::run::test_support;

    /// The terminal's output for the test run, durations blanked.
    fn output(interrupt_at: Option<usize>, colour: bool) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("r.xml");
        let delivered = Delivered::default();
        delivered.mark();
        let terminal = reported(
            Terminal::to(Vec::new(), false, Some((report, delivered)), colour),
            interrupt_at,
        );
        String::from_utf8(terminal.out)
            .unwrap()
            .lines()
            .map(test_support::without_temp_dir)
            .map(|l| l.replace(&format!("{}/", dir.path().display()), ""))
            .map(|l| match (l.find(" ["), l.find("s] ")) {
                (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 2..]),
                _ => l.to_owned(),
            })
            .map(|l| {
                let wall = regex::Regex::new(r" in [0-9]+\.[0-9]{2}s").unwrap();
                wall.replace(&l, " in Ts").into_owned()
            })
            .collect()
    }

    #[test]
    fn a_line_per_case_then_the_report_and_the_counts() {
        assert_eq!(
            output(None, false),
            [
                "PASS    lesson 90 first prints",
                "PASS    lesson 90 second prints-too",
                "SKIP    lesson 90 prose answered-in-writing: prose exercise: answered in writing, no executable form",
                "FAIL    lesson 90 third fails",
                "        90.toml:29: exited with status 3",
                "JUnit report: r.xml",
                "2 passed, 1 failed, 0 errors, 1 skipped, 0 pending in Ts; FAIL: third",
            ]
        );
    }

    #[test]
    fn an_interruption_is_announced_and_closes_the_counts() {
        assert_eq!(
            output(Some(1), false),
            [
                "PASS    lesson 90 first prints",
                "INTERRUPTED (SIGINT): 1 running and 1 waiting cases end as ERROR; stopping what runs (interrupt again to exit at once)",
                "ERROR   lesson 90 second prints-too",
                "        interrupted (SIGINT) while it ran",
                "SKIP    lesson 90 prose answered-in-writing: prose exercise: answered in writing, no executable form",
                "ERROR   lesson 90 third fails",
                "        interrupted (SIGINT) before it started",
                "JUnit report: r.xml",
                "1 passed, 0 failed, 2 errors, 1 skipped, 0 pending in Ts; ERROR: second, third; interrupted (SIGINT)",
            ]
        );
    }

    #[test]
    fn the_closing_line_names_what_failed_and_under_strict_what_is_pending() {
        let mut terminal = Terminal::to(Vec::new(), false, None, false).strict(true);
        for (i, verdict) in [
            Verdict::Fail,
            Verdict::Error,
            Verdict::Pending,
            Verdict::Pass,
        ]
        .into_iter()
        .cycle()
        .take(48)
        .enumerate()
        {
            let lesson = if i % 2 == 0 { 30 } else { 31 };
            terminal.several_lessons = true;
            let mut o = crate::run::test_support::outcome(lesson, &format!("P{i:02}"), verdict);
            o.backend = (i == 0).then_some("postgres");
            terminal.record(&o);
        }
        let closing = terminal.closing(crate::run::RunSummary {
            counts: crate::run::Counts::default(),
            wall: Duration::from_millis(1234),
            interrupted: None,
        });
        assert!(closing.starts_with("0 passed, 0 failed, 0 errors, 0 skipped, 0 pending in 1.23s; FAIL: 30/P00 [postgres], 30/P04,"), "{closing}");
        assert!(
            closing.contains("30/P36 and 2 more; ERROR: 31/P01, "),
            "{closing}"
        );
        assert!(
            closing.contains("; PENDING under --strict: 30/P02, "),
            "{closing}"
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let plain = output(None, false).join("\n");
        assert!(!plain.contains('\u{1b}'), "{plain}");
        let painted = output(None, true);
        assert!(
            painted[0].starts_with("\u{1b}[32mPASS   \u{1b}[0m"),
            "{painted:?}"
        );
        assert!(
            painted[3].starts_with("\u{1b}[31;1mFAIL   \u{1b}[0m"),
            "{painted:?}"
        );
    }
}
