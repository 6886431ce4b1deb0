//! The failure recap before the terminal's closing lines (as pytest's short summary): each case that
//! failed the run, in plan order, with its `file:line`, and a ready-to-paste command that reruns that case
//! alone (its lesson, a `--select` pattern that matches it and no other probe of the lesson,
//! its SQL backend).

use std::io::Write;

use super::{failed_itself, ReportError, Reporter};
use crate::checkpoint::selects;
use crate::run::{Outcome, PlannedCase, RunEvent};

/// How to run a case again: the program and the options of this run that decide what the
/// probes run against (course, revision, manifests, backends, broker, hosts), none of those
/// that select cases or write reports.
#[derive(Debug, Clone, Default)]
pub struct Rerun {
    pub program: String,
    pub args: Vec<String>,
    /// `--db` value per SQL backend label, e.g. ("sqlite", "sqlite:dbs").
    pub db: Vec<(&'static str, String)>,
}

impl Rerun {
    /// The shell command rerunning `outcome`'s case; `pattern` selects it in its lesson.
    fn command(&self, outcome: &Outcome, pattern: &str) -> String {
        let mut words: Vec<String> = vec![self.program.clone()];
        words.extend(self.args.iter().cloned());
        words.extend(["--lesson".into(), outcome.lesson.to_string()]);
        words.extend(["--select".into(), pattern.to_owned()]);
        if let Some(backend) = outcome.backend {
            if let Some((_, db)) = self.db.iter().find(|(label, _)| *label == backend) {
                words.extend(["--db".into(), db.clone()]);
            }
        }
        words
            .iter()
            .map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One entry of the recap, decided when the case finished.
struct Failed {
    /// The case's place in the plan: the recap is in plan order.
    index: usize,
    head: String,
    rerun: String,
}

pub struct Recap<W: Write> {
    out: W,
    strict: bool,
    rerun: Rerun,
    failed: Vec<Failed>,
}

impl Recap<std::io::Stdout> {
    pub fn stdout(rerun: Rerun) -> Self {
        Recap::to(std::io::stdout(), rerun)
    }
}

impl<W: Write> Recap<W> {
    pub fn to(out: W, rerun: Rerun) -> Self {
        Recap {
            out,
            strict: false,
            rerun,
            failed: Vec::new(),
        }
    }

    /// Under `--strict`, PENDING cases fail the run and are listed too.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

/// A `--select` pattern that, within its lesson, selects `case`'s probe and no other: its
/// id, else its name, else its id as a prefix; `None` when none of them does.
pub fn unique_pattern(case: &PlannedCase<'_>) -> Option<String> {
    let probe = case.probe;
    let candidates = [
        probe.id.clone(),
        probe.name.clone(),
        format!("{}*", probe.id),
    ];
    candidates
        .into_iter()
        .filter(|c| !c.trim().is_empty() && !c.starts_with('-'))
        .find(|pattern| {
            let mut hits = case
                .checkpoint
                .probes
                .iter()
                .filter(|p| selects(pattern, p));
            hits.next().is_some_and(|p| std::ptr::eq(p, probe)) && hits.next().is_none()
        })
}

impl<W: Write> Reporter for Recap<W> {
    fn event(&mut self, event: &RunEvent<'_>) {
        let RunEvent::CaseFinished {
            index,
            case,
            outcomes,
        } = event
        else {
            return;
        };
        for o in outcomes
            .iter()
            // A failed preflight check says its fix on its own line; nothing reruns it alone.
            .filter(|o| failed_itself(o.verdict, self.strict) && o.kind != crate::run::PREFLIGHT)
        {
            let place = o.location().unwrap_or_else(|| "(no file)".into());
            self.failed.push(Failed {
                index: *index,
                head: format!(
                    "{:<7} {place} lesson {} {}",
                    o.verdict.label(),
                    o.lesson,
                    o.display_name()
                ),
                rerun: match unique_pattern(case) {
                    Some(pattern) => self.rerun.command(o, &pattern),
                    None => format!(
                        "{}  # no pattern selects this probe alone: others run too",
                        self.rerun.command(o, &case.probe.id)
                    ),
                },
            });
        }
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        if self.failed.is_empty() {
            return Ok(());
        }
        self.failed.sort_by_key(|f| f.index);
        let mut text = format!(
            "\nfailures ({}), each rerun alone by its command:\n",
            self.failed.len()
        );
        for f in &self.failed {
            text.push_str(&format!("{}\n    {}\n", f.head, f.rerun));
        }
        text.push('\n');
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::reported;

    #[test]
    fn each_failure_with_its_place_and_a_command_that_reruns_it() {
        let rerun = Rerun {
            program: "lessonprobe".into(),
            args: vec!["--course".into(), "my course".into()],
            db: vec![("sqlite", "sqlite".into())],
        };
        let recap = reported(Recap::to(Vec::new(), rerun), None);
        let text = String::from_utf8(recap.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "failures (1), each rerun alone by its command:");
        assert!(lines[2].starts_with("FAIL    "), "{text}");
        assert!(
            lines[2].ends_with("90.toml:29 lesson 90 third fails"),
            "{text}"
        );
        assert_eq!(
            lines[3],
            "    lessonprobe --course 'my course' --lesson 90 --select third"
        );
    }

    /// Probes whose ids and names overlap: `EX-1` is part of `EX-10`, `EX-3` of `EX-3x`, and
    /// the last two share a name.
    const OVERLAPPING: &str = r#"
[checkpoint]
lesson = 92
title = "overlaps"

[[probe]]
id = "EX-1"
name = "first"
claim = "c"
kind = "prose"
question = "?"

[[probe]]
id = "EX-10"
name = "tenth"
claim = "c"
kind = "prose"
question = "?"

[[probe]]
id = "EX-3"
name = "same"
claim = "c"
kind = "prose"
question = "?"

[[probe]]
id = "EX-3x"
name = "same"
claim = "c"
kind = "prose"
question = "?"
"#;

    #[test]
    fn the_pattern_selects_its_probe_and_no_other_of_the_lesson() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("92.toml"), OVERLAPPING).unwrap();
        let catalog = crate::checkpoint::Catalog::load(Some(dir.path()), &[]).unwrap();
        let checkpoint = catalog.checkpoint(92).unwrap();
        let pattern = |i: usize| {
            unique_pattern(&PlannedCase {
                checkpoint,
                probe: &checkpoint.probes[i],
                sql: None,
                decision: crate::run::Decision::Run,
            })
        };
        // `EX-1` is also in `EX-10`: the name is unique.
        assert_eq!(pattern(0).as_deref(), Some("first"));
        assert_eq!(pattern(1).as_deref(), Some("EX-10"));
        // Id part of another, name shared, prefix shared too: none.
        assert_eq!(pattern(2), None);
        assert_eq!(pattern(3).as_deref(), Some("EX-3x"));
    }

    #[test]
    fn nothing_when_nothing_failed() {
        let mut recap = Recap::to(Vec::new(), Rerun::default());
        recap.finish().unwrap();
        assert!(recap.out.is_empty());
    }
}
