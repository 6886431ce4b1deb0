//! The terminal reporter: a line per case as it ends, diffs for mismatches, a closing count.
//! Colour only on a terminal and never with NO_COLOR.

use std::io::{IsTerminal, Write};

use crate::run::{Counts, Outcome, Verdict};

pub struct Terminal {
    colour: bool,
    verbose: bool,
}

impl Terminal {
    pub fn new(verbose: bool) -> Self {
        let colour = std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Terminal { colour, verbose }
    }

    pub fn outcome(&self, o: &Outcome) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", self.line(o));
        for detail in self.details(o) {
            let _ = writeln!(out, "{detail}");
        }
    }

    pub fn finish(&self, counts: &Counts, junit: Option<&std::path::Path>) {
        let mut out = std::io::stdout().lock();
        if let Some(path) = junit {
            let _ = writeln!(out, "JUnit report: {}", path.display());
        }
        let _ = writeln!(out, "{counts}");
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

fn paint(verdict: Verdict, text: &str) -> String {
    let code = match verdict {
        Verdict::Pass => "32",
        Verdict::Fail | Verdict::Error => "31;1",
        Verdict::Skip => "33",
        Verdict::Pending => "36",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}
