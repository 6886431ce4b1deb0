//! The terminal reporter: a line per case as it ends, diffs for mismatches, a closing count.
//! On a terminal a status line below the lines names the cases running now; when stdout is not
//! a terminal there is none. Colour only on a terminal and never with NO_COLOR.

use std::io::{IsTerminal, Stdout, Write};
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{ReportError, Reporter};
use crate::run::{Outcome, RunEvent, RunSummary, Verdict};

pub struct Terminal<W: Write> {
    out: W,
    colour: bool,
    verbose: bool,
    /// Whether to keep a status line of running cases (stdout is a terminal).
    status_line: bool,
    live: Option<Live>,
    /// Named in the closing lines.
    junit: Option<PathBuf>,
    summary: Option<RunSummary>,
}

impl Terminal<Stdout> {
    /// On standard output: a status line and colour when it is a terminal.
    pub fn stdout(verbose: bool, junit: Option<PathBuf>) -> Self {
        let tty = std::io::stdout().is_terminal();
        let colour = tty && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty());
        let mut terminal = Terminal::to(std::io::stdout(), verbose, junit, colour);
        terminal.status_line = tty;
        terminal
    }
}

impl<W: Write> Terminal<W> {
    /// To `out`, never with a status line.
    pub fn to(out: W, verbose: bool, junit: Option<PathBuf>, colour: bool) -> Self {
        Terminal {
            out,
            colour,
            verbose,
            status_line: false,
            live: None,
            junit,
            summary: None,
        }
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
        let mut line = format!(
            "{label} [{:>7.3}s] lesson {} {}",
            o.duration.as_secs_f64(),
            o.lesson,
            o.display_name()
        );
        if let Some(host) = &o.host {
            line.push_str(&format!(" @{host}"));
        }
        if matches!(o.verdict, Verdict::Skip | Verdict::Pending) {
            if let Some(reason) = &o.message {
                line.push_str(&format!(": {reason}"));
            }
        }
        line
    }

    fn details(&self, o: &Outcome) -> Vec<String> {
        let mut lines = Vec::new();
        if matches!(o.verdict, Verdict::Fail | Verdict::Error) {
            if let Some(message) = &o.message {
                lines.push(format!("        {message}"));
            }
            if let Some(diff) = &o.diff {
                lines.extend(diff.lines().map(|l| format!("        {l}")));
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
                let line = format!(
                    "INTERRUPTED ({}): {running} running and {not_started} waiting cases end as ERROR",
                    reason.signal_name()
                );
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

    /// The closing lines: where the JUnit report is, and the counts.
    fn finish(&mut self) -> Result<(), ReportError> {
        let mut lines = Vec::new();
        if let Some(path) = &self.junit {
            lines.push(format!("JUnit report: {}", path.display()));
        }
        if let Some(summary) = self.summary {
            let mut closing = summary.counts.to_string();
            if let Some(why) = summary.interrupted {
                closing.push_str(&format!("; interrupted ({})", why.signal_name()));
            }
            lines.push(closing);
        }
        self.print(&lines);
        Ok(())
    }
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
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::testing;

    /// The terminal's output for the test run, durations blanked.
    fn output(interrupt_at: Option<usize>, colour: bool) -> Vec<String> {
        let mut terminal = Terminal::to(Vec::new(), false, Some("r.xml".into()), colour);
        testing::run(interrupt_at, |e| terminal.event(e));
        terminal.finish().unwrap();
        String::from_utf8(terminal.out)
            .unwrap()
            .lines()
            .map(testing::without_temp_dir)
            .map(|l| match (l.find(" ["), l.find("s] ")) {
                (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 2..]),
                _ => l.to_owned(),
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
                "        90.toml:30: exited with status 3",
                "JUnit report: r.xml",
                "2 passed, 1 failed, 0 errors, 1 skipped, 0 pending",
            ]
        );
    }

    #[test]
    fn an_interruption_is_announced_and_closes_the_counts() {
        assert_eq!(
            output(Some(1), false),
            [
                "PASS    lesson 90 first prints",
                "INTERRUPTED (SIGINT): 1 running and 1 waiting cases end as ERROR",
                "ERROR   lesson 90 second prints-too",
                "        interrupted (SIGINT) while it ran",
                "SKIP    lesson 90 prose answered-in-writing: prose exercise: answered in writing, no executable form",
                "ERROR   lesson 90 third fails",
                "        interrupted (SIGINT) before it started",
                "JUnit report: r.xml",
                "1 passed, 0 failed, 2 errors, 1 skipped, 0 pending; interrupted (SIGINT)",
            ]
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
