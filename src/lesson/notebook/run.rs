//! Runs a notebook's code cells in order, up to the last one a run needs, in one kernel whose
//! working folder and imports are copies of the notebook's and the course's folders; each cell
//! judged as nbval judges it.

use std::time::{Duration, Instant};

use lessonprobe_probes::Cancel;
use serde_json::Value;

use super::compare::{compare, text_of};
use super::folders::Folders;
use super::kernel::{Asked, Kernel, Place, Reply, Unanswered, GRACE, INTERRUPT_GRACE, STARTUP};
use super::{Cell, Notebook, Outputs};
use crate::environment::interpreter::resolve;
use crate::lesson::doc_run::{DocRun, DocVerdict};
use crate::lesson::exercise::pinned_env;
use crate::lesson::session::Stop;

/// Runs code cells `0..=upto` of `notebook`, each under its limit (its own, the notebook's,
/// else `deadline`), stopping when `cancel` is set: their results in order.
pub fn run(notebook: &Notebook, upto: usize, deadline: Duration, cancel: &Cancel) -> Vec<DocRun> {
    let cells = &notebook.cells[..(upto + 1).min(notebook.cells.len())];
    let limit = |cell: &Cell| cell.timeout.or(notebook.timeout).unwrap_or(deadline);
    let mut results = Results {
        notebook,
        cells,
        done: Vec::new(),
    };
    let Some(python) = resolve(&notebook.python) else {
        results.rest(&format!(
            "python interpreter {:?} not found (give --python INTERP, or `python` in lessonprobe.toml)",
            notebook.python
        ));
        return results.done;
    };
    let folders = match Folders::take(notebook) {
        Ok(folders) => folders,
        Err(e) => {
            results.rest(&e.to_string());
            return results.done;
        }
    };
    let asked: Vec<Asked<'_>> = cells
        .iter()
        .map(|c| Asked {
            source: &c.source,
            timeout: limit(c).as_secs_f64(),
            skip: c.markers.skip,
        })
        .collect();
    let started = Instant::now();
    let end = notebook.notebook_timeout.map(|t| started + t);
    let bounded = |at: Instant| end.map_or(at, |end| at.min(end));
    // The cells import the course's code from its copy, before whatever PYTHONPATH the run was
    // given, which the kernel keeps.
    let path = folders.imports.as_ref().map(|imports| {
        let given = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty());
        match given {
            Some(given) => format!("{}:{}", imports.display(), given.to_string_lossy()),
            None => imports.display().to_string(),
        }
    });
    let place = Place {
        cwd: &folders.cwd,
        path: path.as_deref(),
    };
    let kernel = Kernel::start(
        &python,
        &place,
        &pinned_env(),
        (&notebook.kernel, &asked),
        bounded(started + STARTUP + GRACE),
        cancel,
    );
    let mut kernel = match kernel {
        Ok(kernel) => kernel,
        Err(unanswered) => {
            let why = results.unanswered(unanswered, None);
            results.rest(&why);
            return results.done;
        }
    };
    for cell in cells {
        let began = Instant::now();
        let reply = kernel.next(bounded(began + limit(cell) + GRACE), cancel);
        let reply = match reply {
            Ok(reply) => reply,
            Err(unanswered) => {
                let why = results.unanswered(unanswered, Some(cell));
                let mut run = DocRun::error(format!("{}: {why}", at(notebook, cell)));
                run.output = kernel.take_stderr();
                results.done.push(run);
                results.rest(&format!("the kernel stopped at cell {}", cell.index));
                return results.done;
            }
        };
        // After the kernel's death, or a timeout whose interrupt it did not answer, the
        // driver runs nothing more.
        let ended = match (&reply.dead, reply.timeout) {
            (Some(_), _) => Some(format!("the kernel died at cell {}", cell.index)),
            (None, Some(_)) if !reply.interrupted => Some(format!(
                "the kernel was killed at cell {} (it did not answer the interrupt)",
                cell.index
            )),
            _ => None,
        };
        let mut done = results.judged(cell, reply, limit(cell));
        done.duration = began.elapsed();
        results.done.push(done);
        if let Some(why) = ended {
            results.rest(&why);
            return results.done;
        }
    }
    kernel.finish();
    results.done
}

const KERNEL_DIED: &str = "the kernel died";

fn at(notebook: &Notebook, cell: &Cell) -> String {
    format!("{}:{}", notebook.file.display(), cell.line)
}

/// The results of a notebook's cells so far.
struct Results<'a> {
    notebook: &'a Notebook,
    cells: &'a [Cell],
    done: Vec<DocRun>,
}

impl Results<'_> {
    /// The cells not yet judged, each an ERROR saying it was not run and why.
    fn rest(&mut self, why: &str) {
        for cell in &self.cells[self.done.len()..] {
            self.done.push(DocRun::error(format!(
                "{}: cell {} not run: {why}",
                at(self.notebook, cell),
                cell.index
            )));
        }
    }

    /// Why the kernel gave no answer (for `cell`, or at its start).
    fn unanswered(&self, unanswered: Unanswered, cell: Option<&Cell>) -> String {
        let waited = match cell {
            Some(cell) => format!("cell {}", cell.index),
            None => "the kernel's start".to_owned(),
        };
        match unanswered {
            Unanswered::Failed(why) => why,
            Unanswered::Stopped(Stop::TimedOut) => match self.notebook.notebook_timeout {
                Some(limit) => format!(
                    "the notebook exceeded its limit of {} during {waited}; the kernel was killed",
                    humantime::format_duration(limit)
                ),
                None => format!("no answer from the kernel during {waited}; it was killed"),
            },
            Unanswered::Stopped(Stop::Cancelled) => {
                "stopped: the run was interrupted; the kernel was killed".to_owned()
            }
            Unanswered::Stopped(Stop::Ended(stderr)) => format!(
                "the notebook driver ended during {waited}{}",
                stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map_or_else(String::new, |l| format!(": {}", l.trim()))
            ),
        }
    }

    /// A cell's verdict from the driver's reply, as nbval gives it.
    fn judged(&self, cell: &Cell, reply: Reply, limit: Duration) -> DocRun {
        let here = at(self.notebook, cell);
        let n = cell.index;
        let mut run = DocRun::error(String::new());
        run.output = text_of(&reply.outputs);
        if reply.skipped {
            run.verdict = DocVerdict::Skip;
            run.message = Some(format!("{here}: cell {n} is marked nbval-skip"));
            return run;
        }
        if let Some(why) = &reply.dead {
            run.message = Some(format!(
                "{here}: {KERNEL_DIED} while cell {n} ran ({why}); the notebook's later cells are not run"
            ));
            return run;
        }
        if reply.timeout.is_some() {
            let kernel = if reply.interrupted {
                "the kernel was interrupted and runs the later cells".to_owned()
            } else {
                format!(
                    "the kernel was interrupted, did not answer within {}, and was killed",
                    humantime::format_duration(INTERRUPT_GRACE)
                )
            };
            run.message = Some(format!(
                "{here}: cell {n} exceeded its limit of {}; {kernel}",
                humantime::format_duration(limit)
            ));
            return run;
        }
        let error = reply
            .outputs
            .iter()
            .find(|o| o.get("output_type").and_then(Value::as_str) == Some("error"));
        if let Some(error) = error {
            let field = |k: &str| error.get(k).and_then(Value::as_str).unwrap_or("");
            let traceback = traceback(error);
            if field("ename") == "StdinNotImplementedError" {
                run.message = Some(format!(
                    "{here}: cell {n} asks for input (input()), which a notebook run cannot give"
                ));
                run.details = Some(traceback);
                return run;
            }
            if !cell.markers.raises {
                let line = cell_line(&traceback)
                    .map_or_else(String::new, |l| format!(" at line {l} of the cell"));
                run.verdict = DocVerdict::Fail;
                run.message = Some(format!(
                    "{here}: cell {n} raised {}: {}{line}",
                    field("ename"),
                    field("evalue")
                ));
                run.details = Some(traceback);
                return run;
            }
        }
        if !cell.executed && !cell.outputs.is_empty() {
            run.verdict = DocVerdict::Fail;
            run.message = Some(format!(
                "{here}: cell {n} stores outputs but no execution count (an unrun cell with outputs)"
            ));
            return run;
        }
        let check = cell
            .markers
            .check
            .unwrap_or(self.notebook.outputs == Outputs::Compared);
        if check && cell.executed {
            let label = format!("stored {here}");
            if let Err(diff) = compare(
                &cell.outputs,
                &reply.outputs,
                &self.notebook.redactions,
                &label,
            ) {
                let (why, diff) = diff.split_once('\n').unwrap_or((&diff, ""));
                run.blessable = cell.stored_at.as_ref().map(|at| {
                    vec![super::bless::rewrite(
                        cell.line,
                        at,
                        &reply.outputs,
                        &self.notebook.redactions,
                    )]
                });
                run.verdict = DocVerdict::Fail;
                run.message = Some(format!(
                    "{here}: cell {n} produced other outputs than the notebook stores ({why})"
                ));
                run.details = Some(diff.to_owned());
                return run;
            }
        }
        run.verdict = DocVerdict::Pass;
        run.message = None;
        run
    }
}

/// An error output's traceback as text, without the kernel's colours.
fn traceback(error: &Value) -> String {
    let lines: Vec<&str> = error
        .get("traceback")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut text = String::new();
    for line in lines {
        text.push_str(&without_colours(line));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

/// `text` without ANSI colour sequences (IPython colours its tracebacks).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ parameters final-letter
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The line of the cell an IPython traceback points at last (`Cell In[3], line 2`).
fn cell_line(traceback: &str) -> Option<usize> {
    traceback.lines().rev().find_map(|l| {
        let rest = l.split_once("Cell In[")?.1.split_once("], line ")?.1;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracebacks_lose_their_colours_and_give_the_cell_line() {
        let text = without_colours(
            "\u{1b}[36mCell\u{1b}[39m\u{1b}[36m \u{1b}[39m\u{1b}[32mIn[2]\u{1b}[39m\u{1b}[32m, line 3\u{1b}[39m",
        );
        assert_eq!(text, "Cell In[2], line 3");
        assert_eq!(cell_line(&text), Some(3));
    }
}
