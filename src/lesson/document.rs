//! One lesson file parsed into document probes: exercises (`### Answer EX-30-01 [code]`) and
//! snippets (a save label outside an exercise), each with its saved files, hidden setup, run
//! command, expected exit code, stdout and stderr, the step it continues and the fault steps done
//! to its services before its command, bound through the prose labels; and the runnable blocks
//! nothing collected.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use regex::Regex;

use super::isolation::Layout;
use super::labels::{Label, ServiceAction};
use super::matcher::Redactions;
use super::session::{self, SessionBlock, SessionBody, SessionProbe, Transcript};
use super::settings::{is_inside, Settings};
use super::CourseError;
use crate::diagnostics::Source;

/// Fence languages that look runnable: such a block must be bound, in a prose exercise, or
/// marked not-to-run.
const RUNNABLE: &[&str] = &[
    "python", "python3", "py", "bash", "sh", "shell", "console", "zsh",
];

/// One lesson's document and the probes it yields.
#[derive(Debug, Clone)]
pub struct LessonDoc {
    pub lesson: u32,
    /// The first level-1 heading, or the file name.
    pub title: String,
    /// The file as shown in messages (under the course folder as given).
    pub file: PathBuf,
    /// The file inside the course, relative to its root.
    pub relative: PathBuf,
    pub probes: Vec<DocProbe>,
    /// Lines of runnable-looking blocks that no label binds.
    pub uncollected: Vec<usize>,
}

/// An exercise or snippet of a lesson.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocProbe {
    /// `EX-30-01`, or a snippet's file name.
    pub id: String,
    /// The saved file's name, `exercise` or `snippet`.
    pub name: String,
    pub lesson: u32,
    /// The lesson file as shown, and the line of the exercise heading or the snippet's label.
    pub file: PathBuf,
    pub line: usize,
    /// The exercise heading, or what the snippet saves.
    pub title: String,
    pub body: DocBody,
}

impl DocProbe {
    /// Its deadline, when its lesson sets one.
    pub fn timeout(&self) -> Option<Duration> {
        match &self.body {
            DocBody::Code(code) => code.timeout,
            DocBody::Session(session) => session.transcript.timeout,
            DocBody::Cell(cell) => cell.cell().timeout.or(cell.notebook.timeout),
            DocBody::Prose { .. } | DocBody::Uncollected { .. } => None,
        }
    }

    /// The file its expected forms are read from (and bless rewrites), where it has any.
    pub fn source(&self) -> Option<PathBuf> {
        match &self.body {
            DocBody::Code(code) => Some(code.source.clone()),
            DocBody::Session(session) => {
                let transcript = &session.transcript;
                Some(
                    transcript
                        .testdir
                        .join(transcript.file.file_name().unwrap_or_default()),
                )
            }
            DocBody::Cell(cell) => Some(cell.notebook.source.clone()),
            DocBody::Prose { .. } | DocBody::Uncollected { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocBody {
    Code(Box<CodeProbe>),
    /// A `[prose]` exercise: never run; its text is the answer key.
    Prose {
        answer: String,
    },
    /// Runnable-looking blocks at these lines that nothing collects (a check of the whole
    /// document, made under `--strict`).
    Uncollected {
        lines: Vec<usize>,
    },
    /// A terminal or Python session block (or a plain Python block run in the sessions'
    /// namespace), run with the document's other session blocks.
    Session(SessionProbe),
    /// A notebook's code cell, run with the notebook's other cells in one kernel.
    Cell(super::notebook::CellProbe),
}

/// What a code exercise or snippet runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeProbe {
    /// The folder copied for each run, as read (inside the course root).
    pub run_from: PathBuf,
    /// The same folder as named in the lesson (`project/`).
    pub run_from_label: String,
    /// Paths of `run_from` the course declares shared and read-only (`shared` in
    /// lessonprobe.toml), relative to it: linked into the working copy, not copied.
    pub shared: Vec<PathBuf>,
    pub files: Vec<SavedFile>,
    pub command: Block,
    pub expected: Option<Block>,
    /// The expected stderr; without it stderr is not compared.
    pub stderr: Option<Block>,
    /// The exit status the command must end with; without it, 0.
    pub exit_code: Option<ExitCode>,
    /// The step whose folder this one runs in, after it.
    pub continues: Option<Continues>,
    /// A hidden block run in the folder before the command.
    pub setup: Option<Setup>,
    /// The course's named placeholders, for the expected blocks.
    pub redactions: Redactions,
    pub python: String,
    pub timeout: Option<Duration>,
    /// The lesson file itself, for rewriting an expected block.
    pub source: PathBuf,
    /// The declared services it needs: the lesson's and its exercise's `Services:` labels.
    pub services: Vec<String>,
    /// What is done to its services before its command runs, in order (`Stop service: cache`).
    pub faults: Vec<FaultStep>,
}

/// `Stop service: cache` / `停止服务：cache` (and start, restart): done to one of the step's
/// declared services, and waited for, before its command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultStep {
    pub action: ServiceAction,
    pub service: String,
    pub line: usize,
}

/// `Expected exit code: 3` / `预期退出码：3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitCode {
    pub code: u8,
    pub line: usize,
    /// Where the value is written in the lesson file, for bless.
    pub value: Range<usize>,
}

/// `Continues: EX-31-01` / `接续：EX-31-01`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Continues {
    /// The exercise id or snippet file name continued.
    pub id: String,
    pub line: usize,
}

/// An HTML comment `<!-- lessonprobe: setup … -->` holding one `sh` or `bash` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The comment's first line.
    pub line: usize,
    /// `sh` or `bash`.
    pub lang: String,
    pub script: String,
}

/// A file the lesson tells the student to save, relative to the run-from folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedFile {
    pub path: PathBuf,
    pub content: String,
    pub line: usize,
}

/// A fenced block: where it is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Line of the opening fence.
    pub line: usize,
    /// The info string's first word (`python`, `bash`, `text`).
    pub lang: String,
    pub content: String,
    /// The bytes between the opening and the closing fence lines.
    pub content_range: Range<usize>,
    /// What precedes the fence on its line (indentation, list or quote markers).
    pub prefix: String,
    /// The info string carries `unordered`: the lines may come in any order.
    pub unordered: bool,
}

/// A label waiting for its fenced block.
struct Pending {
    label: Label,
    line: usize,
}

/// The parts of one exercise or snippet, as they are bound.
#[derive(Default)]
struct Parts {
    files: Vec<(SavedFile, String, usize)>,
    command: Option<Block>,
    expected: Option<Block>,
    stderr: Option<Block>,
    exit_code: Option<ExitCode>,
    continues: Option<Continues>,
    setup: Option<Setup>,
    /// Declared services an exercise's own `Services:` label names.
    services: Vec<String>,
    faults: Vec<FaultStep>,
}

struct Exercise {
    id: String,
    code: bool,
    level: usize,
    line: usize,
    title: String,
    answer: String,
    parts: Parts,
}

struct Snippet {
    line: usize,
    parts: Parts,
}

/// The document at `relative` as the course shows its path, and its text decoded from `bytes`.
pub(super) fn decode(
    course: &Settings,
    relative: &Path,
    bytes: &[u8],
) -> Result<(PathBuf, String), CourseError> {
    let file = course.show(relative);
    // Lessons are placed by line alone, as every other lesson error is.
    let text = Source::decode(&file, bytes.to_vec()).map_err(|d| CourseError::Lesson {
        path: d.path,
        line: d.line,
        message: d.message,
    })?;
    Ok((file, text))
}

/// Parses the lesson file at `relative` (inside the course) whose bytes are `bytes`.
pub fn parse(
    course: &Settings,
    lesson: u32,
    relative: &Path,
    bytes: &[u8],
) -> Result<LessonDoc, CourseError> {
    let (file, text) = decode(course, relative, bytes)?;
    let text = text.as_str();
    // A course without its run-from folder still runs its sessions, in an empty folder.
    let run_from = Some(course.root.join(&course.run_from)).filter(|d| d.is_dir());
    Parse::new(course, lesson, relative, file, text, run_from).run()
}

/// Parses a Markdown document given to `lessonprobe doc` (`relative` inside `course.root`, its
/// folder): as a lesson, with its sessions run in an empty temporary folder and its exercises
/// and snippets in one too.
pub fn parse_free(
    course: &Settings,
    lesson: u32,
    relative: &Path,
    bytes: &[u8],
    empty: &Path,
) -> Result<LessonDoc, CourseError> {
    let (file, text) = decode(course, relative, bytes)?;
    let mut parse = Parse::new(course, lesson, relative, file, &text, None);
    parse.numbered = false;
    let mut doc = parse.run()?;
    for probe in &mut doc.probes {
        if let DocBody::Code(code) = &mut probe.body {
            code.run_from = empty.to_owned();
        }
    }
    Ok(doc)
}

struct Parse<'a> {
    course: &'a Settings,
    lesson: u32,
    relative: &'a Path,
    file: PathBuf,
    text: &'a str,
    line_starts: Vec<usize>,
    exercise_id: Regex,
    title: Option<String>,
    exercise: Option<Exercise>,
    snippet: Option<Snippet>,
    pending: Option<Pending>,
    /// A continues label outside an exercise, for the snippet its next save label starts.
    continues: Option<Continues>,
    /// Fault steps outside an exercise, for the snippet its next save label starts.
    faults: Vec<FaultStep>,
    /// The declared services a `Services:` label before the first exercise names: every code
    /// exercise and snippet of the lesson needs them.
    services: Vec<String>,
    probes: Vec<DocProbe>,
    uncollected: Vec<usize>,
    ids: HashMap<String, usize>,
    /// The session blocks, in document order.
    sessions: Vec<SessionBlock>,
    /// Plain Python blocks nothing binds: run in the sessions' namespace when the document
    /// has a Python session, else uncollected.
    python_code: Vec<SessionBlock>,
    /// Where the sessions run: a copy of this folder, or (`None`) an empty one.
    sessions_run_from: Option<PathBuf>,
    /// An exercise id must carry the lesson's number (not in a free document).
    numbered: bool,
}

impl<'a> Parse<'a> {
    fn new(
        course: &'a Settings,
        lesson: u32,
        relative: &'a Path,
        file: PathBuf,
        text: &'a str,
        sessions_run_from: Option<PathBuf>,
    ) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Parse {
            course,
            lesson,
            relative,
            file,
            text,
            line_starts,
            exercise_id: Regex::new(r"\bEX-(\d+)-(\d+)\b").unwrap_or_else(|_| unreachable!()),
            title: None,
            exercise: None,
            snippet: None,
            pending: None,
            continues: None,
            faults: Vec::new(),
            services: Vec::new(),
            probes: Vec::new(),
            uncollected: Vec::new(),
            ids: HashMap::new(),
            sessions: Vec::new(),
            python_code: Vec::new(),
            sessions_run_from,
            numbered: true,
        }
    }

    fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset)
    }

    fn error(&self, line: usize, message: impl Into<String>) -> CourseError {
        CourseError::Lesson {
            path: self.file.clone(),
            line,
            message: message.into(),
        }
    }

    fn run(mut self) -> Result<LessonDoc, CourseError> {
        let mut inline: Option<String> = None;
        let mut code: Option<(Range<usize>, String, String)> = None;
        let mut heading_level = 0;
        for (event, range) in Parser::new(self.text).into_offset_iter() {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    self.unbound(range.start, "a heading")?;
                    heading_level = level as usize;
                    inline = Some(String::new());
                }
                Event::End(TagEnd::Heading(_)) => {
                    let text = inline.take().unwrap_or_default();
                    self.heading(heading_level, text.trim(), self.line(range.start))?;
                }
                Event::Start(Tag::Paragraph) => {
                    self.unbound(range.start, "a paragraph")?;
                    inline = Some(String::new());
                }
                Event::End(TagEnd::Paragraph) => {
                    let text = inline.take().unwrap_or_default();
                    self.paragraph(&text, range)?;
                }
                Event::Start(Tag::HtmlBlock) => self.html_block(range)?,
                Event::Start(Tag::BlockQuote(_) | Tag::Table(_)) => {
                    self.unbound(range.start, "a quote or table")?;
                }
                Event::Start(Tag::CodeBlock(kind)) => {
                    let info = match kind {
                        CodeBlockKind::Fenced(info) => info.to_string(),
                        CodeBlockKind::Indented => String::new(),
                    };
                    code = Some((range, info, String::new()));
                }
                Event::End(TagEnd::CodeBlock) => {
                    if let Some((range, info, content)) = code.take() {
                        self.code_block(range, &info, content)?;
                    }
                }
                Event::Text(t) => match (&mut code, &mut inline) {
                    (Some((_, _, content)), _) => content.push_str(&t),
                    (None, Some(s)) => s.push_str(&t),
                    _ => {}
                },
                Event::Code(t) => {
                    if let Some(s) = &mut inline {
                        s.push('`');
                        s.push_str(&t);
                        s.push('`');
                    }
                }
                Event::SoftBreak | Event::HardBreak => {
                    if let Some(s) = &mut inline {
                        s.push('\n');
                    }
                }
                _ => {}
            }
        }
        self.unbound(self.text.len(), "the end of the lesson")?;
        self.finish_snippet()?;
        self.finish_exercise()?;
        self.dangling_continues()?;
        self.dangling_faults()?;
        self.check_chains()?;
        self.finish_sessions()?;
        let title = self.title.clone().unwrap_or_else(|| {
            self.relative
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
        });
        Ok(LessonDoc {
            lesson: self.lesson,
            title,
            file: self.file,
            relative: self.relative.to_owned(),
            probes: self.probes,
            uncollected: self.uncollected,
        })
    }

    /// A label followed by something other than its fenced block binds nothing.
    fn unbound(&mut self, offset: usize, what: &str) -> Result<(), CourseError> {
        match self.pending.take() {
            Some(p) => Err(self.error(
                p.line,
                format!(
                    "{} binds no fenced block: {what} follows it (line {})",
                    p.label.describe(),
                    self.line(offset.min(self.text.len().saturating_sub(1)))
                ),
            )),
            None => Ok(()),
        }
    }

    fn heading(&mut self, level: usize, text: &str, line: usize) -> Result<(), CourseError> {
        if level == 1 && self.title.is_none() {
            self.title = Some(text.to_owned());
        }
        self.finish_snippet()?;
        self.dangling_continues()?;
        self.dangling_faults()?;
        if self.exercise.as_ref().is_some_and(|e| level <= e.level) {
            self.finish_exercise()?;
        }
        let Some(caps) = self.exercise_id.captures(text) else {
            return Ok(());
        };
        let id = caps[0].to_owned();
        let code = text.contains("[code]");
        if !code && !text.contains("[prose]") {
            return Err(self.error(
                line,
                format!("exercise {id} needs a tag: [code] or [prose]"),
            ));
        }
        if self.numbered && caps[1].parse::<u32>().ok() != Some(self.lesson) {
            return Err(self.error(
                line,
                format!("exercise {id} is in lesson {}'s document", self.lesson),
            ));
        }
        self.finish_exercise()?;
        self.claim_id(&id, line)?;
        self.exercise = Some(Exercise {
            id,
            code,
            level,
            line,
            title: text.to_owned(),
            answer: String::new(),
            parts: Parts::default(),
        });
        Ok(())
    }

    fn claim_id(&mut self, id: &str, line: usize) -> Result<(), CourseError> {
        if let Some(first) = self.ids.insert(id.to_owned(), line) {
            return Err(self.error(line, format!("duplicate id {id} (first on line {first})")));
        }
        Ok(())
    }

    fn paragraph(&mut self, text: &str, range: Range<usize>) -> Result<(), CourseError> {
        let line = self.line(range.start);
        if let Some(ex) = self.exercise.as_mut().filter(|e| !e.code) {
            if !ex.answer.is_empty() {
                ex.answer.push('\n');
            }
            ex.answer.push_str(text.trim());
            return Ok(());
        }
        let Some(label) = self.course.labels.classify(text) else {
            return Ok(());
        };
        let line = line + text.trim_end().lines().count().saturating_sub(1);
        match &label {
            Label::ExitCode { value } => return self.exit_code(value, line, range),
            Label::Continues { id } => return self.continues(id, line),
            Label::Services { names } => return self.services(names, line),
            Label::Fault { action, service } => return self.fault(*action, service, line),
            Label::Save { .. } if self.exercise.is_none() => {
                if self
                    .snippet
                    .as_ref()
                    .is_some_and(|s| s.parts.command.is_some())
                {
                    self.finish_snippet()?;
                }
                if self.snippet.is_none() {
                    self.snippet = Some(Snippet {
                        line,
                        parts: Parts {
                            continues: self.continues.take(),
                            faults: std::mem::take(&mut self.faults),
                            ..Parts::default()
                        },
                    });
                }
            }
            Label::Save { .. } => {}
            Label::Run | Label::Expected | Label::Stderr => {
                let Some(parts) = self.parts() else {
                    return Err(self.error(
                        line,
                        format!(
                            "{} outside an exercise or a saved snippet binds nothing",
                            label.describe()
                        ),
                    ));
                };
                if label != Label::Run && parts.command.is_none() {
                    return Err(self.error(
                        line,
                        format!("{} before any run command binds nothing", label.describe()),
                    ));
                }
            }
        }
        self.pending = Some(Pending { label, line });
        Ok(())
    }

    /// `Expected exit code: N` after a run block: N must be 0–255, once per command.
    fn exit_code(
        &mut self,
        value: &str,
        line: usize,
        range: Range<usize>,
    ) -> Result<(), CourseError> {
        let code: Option<u8> = value.parse().ok();
        let source = &self.text[range.clone()];
        let at = source.rfind(value).map_or(range.end, |i| range.start + i);
        let problem = match self.parts() {
            None => Some(
                "exit-code label outside an exercise or a saved snippet binds nothing".to_owned(),
            ),
            Some(parts) if parts.command.is_none() => {
                Some("exit-code label before any run command binds nothing".to_owned())
            }
            Some(parts) if parts.exit_code.is_some() => {
                Some("a second exit-code label for one run command".to_owned())
            }
            Some(_) if code.is_none() => {
                Some(format!("exit code {value:?} is not an integer in 0-255"))
            }
            Some(_) => None,
        };
        if let Some(message) = problem {
            return Err(self.error(line, message));
        }
        let (Some(parts), Some(code)) = (self.parts(), code) else {
            return Ok(());
        };
        parts.exit_code = Some(ExitCode {
            code,
            line,
            value: at..at + value.len(),
        });
        Ok(())
    }

    /// `Continues: ID` in a code exercise, or before a snippet's first save label.
    fn continues(&mut self, id: &str, line: usize) -> Result<(), CourseError> {
        let step = Continues {
            id: id.to_owned(),
            line,
        };
        if let Some(ex) = &self.exercise {
            if ex.parts.continues.is_some() {
                return Err(self.error(line, format!("a second continues label in {}", ex.id)));
            }
        }
        if let Some(ex) = self.exercise.as_mut() {
            ex.parts.continues = Some(step);
            return Ok(());
        }
        match &self.snippet {
            Some(sn) if sn.parts.command.is_some() => self.finish_snippet()?,
            Some(_) => return Err(self.error(
                line,
                "continues label inside a snippet: put it before the snippet's first save label",
            )),
            None => {}
        }
        if let Some(first) = &self.continues {
            return Err(self.error(
                line,
                format!(
                    "a second continues label before one snippet (first on line {})",
                    first.line
                ),
            ));
        }
        self.continues = Some(step);
        Ok(())
    }

    /// `Services: NAMES`: before the first exercise for the whole lesson, inside an exercise for
    /// it; each a service the course declares.
    fn services(&mut self, names: &[String], line: usize) -> Result<(), CourseError> {
        if let Some(name) = names
            .iter()
            .find(|n| !self.course.services.contains_key(*n))
        {
            return Err(self.error(
                line,
                format!("service {name:?} is not declared in the course's lessonprobe.toml (add [services.{name}])"),
            ));
        }
        let slot = match self.exercise.as_mut() {
            Some(ex) => &mut ex.parts.services,
            None if self.probes.is_empty() && self.snippet.is_none() => &mut self.services,
            None => {
                return Err(self.error(
                    line,
                    "services label between exercises: put it before the first exercise (the whole lesson) or inside one",
                ))
            }
        };
        for name in names {
            if !slot.contains(name) {
                slot.push(name.clone());
            }
        }
        Ok(())
    }

    /// `Stop service: NAME` (start, restart) in a code exercise or snippet, before its run label;
    /// outside an exercise, before a snippet's first save label too. Whether the step needs
    /// the service is checked once its labels are all read.
    fn fault(
        &mut self,
        action: ServiceAction,
        service: &str,
        line: usize,
    ) -> Result<(), CourseError> {
        let step = FaultStep {
            action,
            service: service.to_owned(),
            line,
        };
        let before_run = "a fault step after the run label: put it before the run label (it is done before the command runs)";
        if let Some(ex) = self.exercise.as_mut() {
            if ex.parts.command.is_some() {
                return Err(self.error(line, before_run));
            }
            ex.parts.faults.push(step);
            return Ok(());
        }
        match self.snippet.as_mut() {
            Some(sn) if sn.parts.command.is_some() => self.finish_snippet()?,
            Some(sn) => {
                sn.parts.faults.push(step);
                return Ok(());
            }
            None => {}
        }
        self.faults.push(step);
        Ok(())
    }

    /// Fault steps outside an exercise that no save label took.
    fn dangling_faults(&mut self) -> Result<(), CourseError> {
        match self.faults.first() {
            Some(f) => Err(self.error(
                f.line,
                "fault step binds nothing: no exercise or save label of a snippet follows it",
            )),
            None => Ok(()),
        }
    }

    /// A continues label outside an exercise that no save label took.
    fn dangling_continues(&mut self) -> Result<(), CourseError> {
        match self.continues.take() {
            Some(c) => Err(self.error(
                c.line,
                "continues label binds nothing: no save label of a snippet follows it",
            )),
            None => Ok(()),
        }
    }

    /// Every continued step exists, is a code step, comes earlier and runs from the same folder.
    fn check_chains(&self) -> Result<(), CourseError> {
        for (at, probe) in self.probes.iter().enumerate() {
            let DocBody::Code(code) = &probe.body else {
                continue;
            };
            let Some(step) = &code.continues else {
                continue;
            };
            let id = &step.id;
            if *id == probe.id {
                return Err(self.error(
                    step.line,
                    format!("{id} continues itself: a cycle (a step continues one before it)"),
                ));
            }
            let Some(before) = self.probes.iter().position(|p| p.id == *id) else {
                return Err(self.error(
                    step.line,
                    format!("continues {id}, which is no exercise or snippet of this lesson"),
                ));
            };
            let earlier = &self.probes[before];
            if before > at {
                return Err(self.error(
                    step.line,
                    format!(
                        "continues {id}, which comes later in the document (line {}); a step continues one before it",
                        earlier.line
                    ),
                ));
            }
            let DocBody::Code(earlier_code) = &earlier.body else {
                return Err(self.error(
                    step.line,
                    format!("continues {id}, a prose exercise: nothing runs there"),
                ));
            };
            if earlier_code.run_from != code.run_from {
                return Err(self.error(
                    step.line,
                    format!(
                        "{} runs from {:?} but continues {id}, which runs from {:?}",
                        probe.id, code.run_from_label, earlier_code.run_from_label
                    ),
                ));
            }
        }
        Ok(())
    }

    /// An HTML block: a `<!-- lessonprobe: setup -->` comment is a code exercise's hidden
    /// setup; any other comment or HTML is left alone.
    fn html_block(&mut self, range: Range<usize>) -> Result<(), CourseError> {
        let raw = &self.text[range.clone()];
        let Some(body) = raw.trim_start().strip_prefix("<!--") else {
            return Ok(());
        };
        let first = body.lines().next().unwrap_or("");
        let first = first.split("-->").next().unwrap_or("").trim();
        let Some(at) = first.find([':', '：']) else {
            return Ok(());
        };
        if first[..at].trim() != "lessonprobe" {
            return Ok(());
        }
        let line = self.line(range.start);
        self.unbound(range.start, "a setup comment")?;
        let colon = first[at..].chars().next().map_or(1, char::len_utf8);
        let what = first[at + colon..].trim();
        if what != "setup" {
            return Err(self.error(
                line,
                format!(
                    "unknown lessonprobe comment {what:?}: the one known is `lessonprobe: setup`"
                ),
            ));
        }
        let Some(end) = body.find("-->") else {
            return Err(self.error(line, "setup comment is not closed with -->"));
        };
        let inner = body[..end].split_once('\n').map_or("", |(_, rest)| rest);
        let blocks = fenced_blocks(inner).map_err(|m| self.error(line, m))?;
        let [(lang, script)] = blocks.as_slice() else {
            return Err(self.error(
                line,
                format!(
                    "setup comment holds {} fenced blocks; it must hold exactly one ```sh or ```bash block",
                    blocks.len()
                ),
            ));
        };
        if lang != "sh" && lang != "bash" {
            return Err(self.error(
                line,
                format!("setup comment's block is {lang:?}; it must be ```sh or ```bash"),
            ));
        }
        let setup = Setup {
            line,
            lang: lang.clone(),
            script: script.clone(),
        };
        let parts = match &mut self.exercise {
            Some(ex) if ex.code && ex.parts.command.is_none() => &mut ex.parts,
            _ => {
                return Err(self.error(
                    line,
                    "a setup comment belongs in a [code] exercise, before its run label",
                ))
            }
        };
        if parts.setup.is_some() {
            return Err(self.error(line, "a second setup comment in one exercise"));
        }
        parts.setup = Some(setup);
        Ok(())
    }

    fn parts(&mut self) -> Option<&mut Parts> {
        match (&mut self.exercise, &mut self.snippet) {
            (Some(ex), _) if ex.code => Some(&mut ex.parts),
            (None, Some(sn)) => Some(&mut sn.parts),
            _ => None,
        }
    }

    fn code_block(
        &mut self,
        range: Range<usize>,
        info: &str,
        content: String,
    ) -> Result<(), CourseError> {
        let line = self.line(range.start);
        let lang = info.split_whitespace().next().unwrap_or("").to_owned();
        let fence = self.fence(&range);
        let Some(fence) = fence else {
            // An indented block: never bound; a session when it starts with `>>>`.
            if self.pending.is_none() && !self.in_prose() {
                if let Some(kind) = session::kind_of("", &content, false) {
                    return self.session(kind, info, &content, line, line.saturating_sub(1));
                }
            }
            return Ok(());
        };
        if !fence.terminated {
            return Err(self.error(
                line,
                "unterminated fence: no closing fence before the end of its section",
            ));
        }
        let block = Block {
            line,
            lang: lang.clone(),
            content,
            content_range: fence.content,
            prefix: fence.prefix,
            unordered: info.split_whitespace().skip(1).any(|w| w == "unordered"),
        };
        if let Some(p) = self.pending.take() {
            return self.bind(p, block);
        }
        if let Some(ex) = self.exercise.as_mut().filter(|e| !e.code) {
            ex.answer.push('\n');
            ex.answer.push_str(block.content.trim_end());
            return Ok(());
        }
        let no_run = info
            .split(|c: char| c.is_whitespace() || c == ',')
            .any(|w| self.course.no_run.iter().any(|n| n == w));
        if no_run {
            return Ok(());
        }
        if let Some(kind) = session::kind_of(info, &block.content, true) {
            return self.session(kind, info, &block.content, line, line);
        }
        let lang = lang.to_ascii_lowercase();
        if session::PYTHON_CODE.contains(&lang.as_str()) {
            let id = self.session_id(info, line);
            self.python_code.push(SessionBlock {
                line,
                id,
                body: SessionBody::PythonCode {
                    text: block.content,
                    offset: line,
                },
            });
        }
        if RUNNABLE.contains(&lang.as_str()) {
            self.uncollected.push(line);
        }
        Ok(())
    }

    fn in_prose(&self) -> bool {
        self.exercise.as_ref().is_some_and(|e| !e.code)
    }

    /// `id=NAME` from the info string, else `FILE:LINE` with the file's name.
    fn session_id(&self, info: &str, line: usize) -> String {
        info.split_whitespace()
            .find_map(|w| w.strip_prefix("id="))
            .filter(|id| !id.is_empty())
            .map_or_else(
                || format!("{}:{line}", file_name(&self.file)),
                str::to_owned,
            )
    }

    /// A session block at `line` whose text's first line follows document line `offset`; one
    /// with no command or example cannot be checked and is left to the lint.
    fn session(
        &mut self,
        kind: session::Kind,
        info: &str,
        content: &str,
        line: usize,
        offset: usize,
    ) -> Result<(), CourseError> {
        let id = self.session_id(info, line);
        let body = match kind {
            session::Kind::Terminal => {
                let commands = session::terminal_commands(content, offset + 1)
                    .map_err(|(l, m)| self.error(l, m))?;
                if commands.is_empty() {
                    self.uncollected.push(line);
                    return Ok(());
                }
                SessionBody::Terminal(commands)
            }
            session::Kind::Python => {
                if !content.lines().any(|l| l.trim_start().starts_with(">>>")) {
                    self.uncollected.push(line);
                    return Ok(());
                }
                let myst = info.trim_start().starts_with("{doctest}");
                let (text, flags) = if myst {
                    session::without_directive_options(content)
                } else {
                    (content.to_owned(), Vec::new())
                };
                SessionBody::Python {
                    text,
                    offset,
                    flags,
                }
            }
        };
        if info.split_whitespace().any(|w| w.starts_with("id=")) {
            self.claim_id(&id, line)?;
        }
        self.sessions.push(SessionBlock { line, id, body });
        Ok(())
    }

    /// The document's session blocks as probes, in document order with the others; its plain
    /// Python blocks join them when it has a Python session.
    fn finish_sessions(&mut self) -> Result<(), CourseError> {
        let has_python = self
            .sessions
            .iter()
            .any(|b| matches!(b.body, SessionBody::Python { .. }));
        if has_python {
            let code = std::mem::take(&mut self.python_code);
            self.uncollected
                .retain(|l| !code.iter().any(|c| c.line == *l));
            self.sessions.extend(code);
            self.sessions.sort_by_key(|b| b.line);
        }
        if self.sessions.is_empty() {
            return Ok(());
        }
        let testdir = self
            .course
            .root
            .join(self.relative)
            .parent()
            .map_or_else(|| self.course.root.clone(), Path::to_owned);
        let transcript = Arc::new(Transcript {
            file: self.file.clone(),
            blocks: std::mem::take(&mut self.sessions),
            run_from: self.sessions_run_from.clone().map(|source| Layout {
                shared: shared_under(&self.course.shared, &self.course.run_from),
                source,
            }),
            testdir,
            python: self.course.python.clone(),
            redactions: self.course.redactions.clone(),
            timeout: self.course.timeout,
        });
        for (index, block) in transcript.blocks.iter().enumerate() {
            let name = block.body.name();
            self.probes.push(DocProbe {
                id: block.id.clone(),
                name: name.to_owned(),
                lesson: self.lesson,
                file: self.file.clone(),
                line: block.line,
                title: format!("{name} at {}:{}", self.file.display(), block.line),
                body: DocBody::Session(SessionProbe {
                    transcript: Arc::clone(&transcript),
                    index,
                }),
            });
        }
        self.probes.sort_by_key(|p| p.line);
        Ok(())
    }

    fn bind(&mut self, pending: Pending, block: Block) -> Result<(), CourseError> {
        let file = self.file.clone();
        let course = self.course;
        let err = |line: usize, message: String| CourseError::Lesson {
            path: file.clone(),
            line,
            message,
        };
        let line = pending.line;
        let Some(parts) = self.parts() else {
            return Err(err(
                line,
                format!("{} binds nothing here", pending.label.describe()),
            ));
        };
        match pending.label {
            Label::Save { file: name, dir } => {
                let path = PathBuf::from(&name);
                if !is_inside(&path) {
                    return Err(err(
                        line,
                        format!("save label: file name {name:?} escapes the run-from folder (use a relative path without '..')"),
                    ));
                }
                let dir = dir.unwrap_or_else(|| course.run_from.display().to_string());
                let dir_path = PathBuf::from(dir.trim_end_matches('/'));
                if !is_inside(&dir_path) {
                    return Err(err(
                        line,
                        format!("save label: run-from folder {dir:?} is not inside the course"),
                    ));
                }
                if !course.root.join(&dir_path).is_dir() {
                    return Err(err(
                        line,
                        format!(
                            "save label: run-from folder {dir:?} does not exist in the course ({})",
                            course.show(&dir_path).display()
                        ),
                    ));
                }
                parts.files.push((
                    SavedFile {
                        path,
                        content: block.content,
                        line,
                    },
                    dir,
                    line,
                ));
            }
            Label::ExitCode { .. }
            | Label::Continues { .. }
            | Label::Services { .. }
            | Label::Fault { .. } => {}
            Label::Run | Label::Expected | Label::Stderr => {
                let (slot, twice) = match pending.label {
                    Label::Run => (
                        &mut parts.command,
                        "a second run label in one exercise or snippet; give it its own",
                    ),
                    Label::Stderr => (
                        &mut parts.stderr,
                        "a second expected-stderr label for one run command",
                    ),
                    _ => (
                        &mut parts.expected,
                        "a second expected-output label for one run command",
                    ),
                };
                if slot.is_some() {
                    return Err(err(line, twice.into()));
                }
                *slot = Some(block);
            }
        }
        Ok(())
    }

    fn finish_exercise(&mut self) -> Result<(), CourseError> {
        let Some(ex) = self.exercise.take() else {
            return Ok(());
        };
        if !ex.code {
            let body = DocBody::Prose { answer: ex.answer };
            return self.push(ex.id, "exercise".into(), ex.line, ex.title, body);
        }
        let name = ex
            .parts
            .files
            .first()
            .map_or("exercise".to_owned(), |(f, _, _)| file_name(&f.path));
        let code = self.code_probe(ex.parts, ex.line, &ex.id)?;
        self.push(
            ex.id,
            name,
            ex.line,
            ex.title,
            DocBody::Code(Box::new(code)),
        )
    }

    fn finish_snippet(&mut self) -> Result<(), CourseError> {
        let Some(sn) = self.snippet.take() else {
            return Ok(());
        };
        let Some((first, _, _)) = sn.parts.files.first() else {
            return Ok(());
        };
        let id = first.path.display().to_string();
        let title = format!("snippet {id}");
        self.claim_id(&id, sn.line)?;
        let code = self.code_probe(sn.parts, sn.line, &id)?;
        self.push(
            id,
            "snippet".into(),
            sn.line,
            title,
            DocBody::Code(Box::new(code)),
        )
    }

    fn code_probe(&self, parts: Parts, line: usize, id: &str) -> Result<CodeProbe, CourseError> {
        let Some(command) = parts.command else {
            return Err(self.error(
                line,
                format!("{id} has no run label with a command block, so nothing runs it"),
            ));
        };
        let mut dirs = parts.files.iter().map(|(_, d, l)| (d.clone(), *l));
        let (run_from_label, _) = dirs
            .next()
            .unwrap_or_else(|| (self.course.run_from.display().to_string(), line));
        if let Some((other, l)) =
            dirs.find(|(d, _)| d.trim_end_matches('/') != run_from_label.trim_end_matches('/'))
        {
            return Err(self.error(
                l,
                format!("{id}: saved files run from {run_from_label:?} and {other:?}; one exercise runs from one folder"),
            ));
        }
        let folder = PathBuf::from(run_from_label.trim_end_matches('/'));
        let shared = shared_under(&self.course.shared, &folder);
        let mut services = self.services.clone();
        services.extend(
            parts
                .services
                .into_iter()
                .filter(|n| !self.services.contains(n)),
        );
        for step in &parts.faults {
            if !services.contains(&step.service) {
                let name = &step.service;
                let why = match self.course.services.contains_key(name) {
                    true => format!("{id} does not need it: add `Services: {name}` to the lesson (before its first exercise) or to the exercise"),
                    false => format!("it is not declared in the course's lessonprobe.toml (add [services.{name}])"),
                };
                return Err(self.error(
                    step.line,
                    format!("{} service {name:?}: {why}", step.action.verb()),
                ));
            }
        }
        Ok(CodeProbe {
            services,
            faults: parts.faults,
            run_from: self.course.root.join(&folder),
            run_from_label,
            shared,
            files: parts.files.into_iter().map(|(f, _, _)| f).collect(),
            command,
            expected: parts.expected,
            stderr: parts.stderr,
            exit_code: parts.exit_code,
            continues: parts.continues,
            setup: parts.setup,
            redactions: self.course.redactions.clone(),
            python: self.course.python.clone(),
            timeout: self.course.timeout,
            source: self.course.root.join(self.relative),
        })
    }

    fn push(
        &mut self,
        id: String,
        name: String,
        line: usize,
        title: String,
        body: DocBody,
    ) -> Result<(), CourseError> {
        self.probes.push(DocProbe {
            id,
            name,
            lesson: self.lesson,
            file: self.file.clone(),
            line,
            title,
            body,
        });
        Ok(())
    }

    /// Where a fenced block's content lies, and whether its closing fence is there.
    fn fence(&self, range: &Range<usize>) -> Option<Fence> {
        let text = self.text;
        let open_start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
        let open_end = text[range.start..]
            .find('\n')
            .map_or(text.len(), |i| range.start + i);
        let opening = &text[open_start..open_end];
        let at = opening.find("```").or_else(|| opening.find("~~~"))?;
        let marker_char = opening[at..].chars().next()?;
        let marker_len = opening[at..]
            .chars()
            .take_while(|&c| c == marker_char)
            .count();
        let prefix = opening[..at].to_owned();
        let content_start = (open_end + 1).min(text.len());
        let end = range.end.min(text.len());
        let body = text[..end].trim_end_matches(['\n', '\r']);
        let last_start = body.rfind('\n').map_or(0, |i| i + 1);
        let closing = body[last_start..].trim_start_matches([' ', '\t', '>']);
        let terminated = last_start > open_start
            && closing.chars().take_while(|&c| c == marker_char).count() >= marker_len
            && closing.trim_start_matches(marker_char).trim().is_empty();
        Some(Fence {
            prefix,
            content: content_start..last_start.max(content_start),
            terminated,
        })
    }
}

struct Fence {
    prefix: String,
    content: Range<usize>,
    terminated: bool,
}

/// The fenced blocks of a comment's text, as (language, content); an unclosed one is an error.
fn fenced_blocks(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut blocks = Vec::new();
    let mut open: Option<(char, usize, String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = marker.map_or(0, |m| trimmed.chars().take_while(|c| *c == m).count());
        match (&mut open, marker) {
            (Some((m, n, _, _)), Some(c))
                if c == *m && run >= *n && trimmed.trim_start_matches(c).trim().is_empty() =>
            {
                if let Some((_, _, lang, content)) = open.take() {
                    blocks.push((lang, content));
                }
            }
            (Some((_, _, _, content)), _) => {
                content.push_str(line);
                content.push('\n');
            }
            (None, Some(c)) if run >= 3 => {
                let info = trimmed.trim_start_matches(c);
                let lang = info.split_whitespace().next().unwrap_or("").to_owned();
                open = Some((c, run, lang, String::new()));
            }
            (None, _) => {}
        }
    }
    match open {
        Some(_) => Err("setup comment's fenced block is not closed".into()),
        None => Ok(blocks),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The course's `shared` paths that lie inside `folder` (both relative to the course root),
/// relative to `folder`: what a copy of `folder` links instead of copying.
pub(crate) fn shared_under(shared: &[PathBuf], folder: &Path) -> Vec<PathBuf> {
    shared
        .iter()
        .filter_map(|s| s.strip_prefix(folder).ok())
        .filter(|s| !s.as_os_str().is_empty())
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn course(dir: &Path) -> super::super::Course {
        std::fs::create_dir_all(dir.join("project")).unwrap();
        super::super::Course::open(dir, Path::new(".")).unwrap()
    }

    fn doc(text: &str) -> Result<LessonDoc, String> {
        let dir = tempfile::tempdir().unwrap();
        parse(
            &course(dir.path()).settings,
            30,
            Path::new("lessons/30-replay.md"),
            text.as_bytes(),
        )
        .map_err(|e| e.to_string())
    }

    const CHINESE: &str = "# 第 30 课

### 答案 EX-30-01 [code]

保存为 `audit_sql_duplicate_probe.py`，从 `project/` 运行：

```python
print(\"True False 1\")
```

运行命令：

```bash
python audit_sql_duplicate_probe.py
```

预期输出：

```text
True False 1
```

### 答案 EX-30-02 [prose]

因为 earliest 只在没有已提交位置时生效。

## 附录

```python no-run
print('just reading')
```

```toml
a = 1
```
";

    #[test]
    fn an_exercise_binds_its_file_command_and_expected_output_with_lines() {
        let d = doc(CHINESE).unwrap();
        assert_eq!(d.title, "第 30 课");
        assert_eq!(d.probes.len(), 2);
        let p = &d.probes[0];
        assert_eq!((p.id.as_str(), p.line), ("EX-30-01", 3));
        assert_eq!(p.name, "audit_sql_duplicate_probe.py");
        let DocBody::Code(code) = &p.body else {
            panic!("{p:?}")
        };
        assert_eq!(
            code.files[0].path,
            PathBuf::from("audit_sql_duplicate_probe.py")
        );
        assert_eq!(code.files[0].content, "print(\"True False 1\")\n");
        assert_eq!(code.run_from_label, "project/");
        assert_eq!(
            code.command.content,
            "python audit_sql_duplicate_probe.py\n"
        );
        let expected = code.expected.as_ref().unwrap();
        assert_eq!(
            (expected.line, expected.content.as_str()),
            (19, "True False 1\n")
        );
        assert_eq!(&CHINESE[expected.content_range.clone()], "True False 1\n");
        assert_eq!(
            d.probes[1].body,
            DocBody::Prose {
                answer: "因为 earliest 只在没有已提交位置时生效。".into()
            }
        );
        assert!(d.uncollected.is_empty());
    }

    #[test]
    fn snippets_take_their_file_name_as_id_and_several_saves_before_a_run() {
        let d = doc("# L\n\nSave the complete `helper.py` below:\n\n```python\nX = 1\n```\n\nSave as `sql_audit_probe.py`, run from `project/`:\n\n```python\nimport helper\nprint(helper.X)\n```\n\nRun:\n\n```bash\npython sql_audit_probe.py\n```\n\nSave as `other.py`, run from `project/`:\n\n```python\nprint(2)\n```\n\nRun:\n\n```sh\npython other.py\n```\n").unwrap();
        let ids: Vec<&str> = d.probes.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["helper.py", "other.py"]);
        let DocBody::Code(code) = &d.probes[0].body else {
            panic!()
        };
        assert_eq!(code.files.len(), 2);
        assert!(code.expected.is_none());
        assert_eq!(d.probes[0].line, 3);
    }

    #[test]
    fn runnable_blocks_nothing_binds_are_uncollected() {
        let d = doc("# L\n\n```python\nprint(1)\n```\n\n```bash no-run\nrm -rf /\n```\n\n```text\nhello\n```\n\n### Answer EX-30-02 [prose]\n\nWhy?\n\n```python\nprint('an answer may show code')\n```\n\n## Next\n\n```sh\nls\n```\n").unwrap();
        assert_eq!(d.uncollected, vec![3, 25]);
    }

    #[test]
    fn labels_that_bind_nothing_are_errors_with_lines() {
        let e =
            doc("# L\n\n### Answer EX-30-01 [code]\n\nRun:\n\nThen something else.\n").unwrap_err();
        assert_eq!(
            e,
            "lessons/30-replay.md:5: run label binds no fenced block: a paragraph follows it (line 7)"
        );
        let e = doc("# L\n\n### Answer EX-30-01 [code]\n\nExpected output:\n\n```text\nx\n```\n")
            .unwrap_err();
        assert_eq!(
            e,
            "lessons/30-replay.md:5: expected-output label before any run command binds nothing"
        );
        let e = doc("# L\n\nRun:\n\n```sh\nls\n```\n").unwrap_err();
        assert!(
            e.starts_with("lessons/30-replay.md:3: run label outside an exercise"),
            "{e}"
        );
        let e = doc("# L\n\n### Answer EX-30-01 [code]\n\nRun:\n").unwrap_err();
        assert!(
            e.contains(":5: run label binds no fenced block: the end of the lesson follows it"),
            "{e}"
        );
        let e = doc("### Answer EX-30-01 [code]\n\nSave as `a.py`, run from `project/`:\n\n```python\nx\n```\n").unwrap_err();
        assert!(
            e.starts_with("lessons/30-replay.md:1: EX-30-01 has no run label"),
            "{e}"
        );
    }

    #[test]
    fn bad_ids_paths_and_fences_are_refused_with_lines() {
        let twice = "### Answer EX-30-01 [prose]\n\nA.\n\n### Answer EX-30-01 [prose]\n\nB.\n";
        assert_eq!(
            doc(twice).unwrap_err(),
            "lessons/30-replay.md:5: duplicate id EX-30-01 (first on line 1)"
        );
        assert!(doc("### Answer EX-29-01 [code]\n")
            .unwrap_err()
            .contains(":1: exercise EX-29-01 is in lesson 30's document"));
        assert!(doc("### Answer EX-30-01\n")
            .unwrap_err()
            .contains("needs a tag"));
        for name in ["../x.py", "/tmp/x.py"] {
            let e = doc(&format!("### Answer EX-30-01 [code]\n\nSave as `{name}`, run from `project/`:\n\n```python\nx\n```\n")).unwrap_err();
            assert!(
                e.starts_with("lessons/30-replay.md:3: save label: file name"),
                "{e}"
            );
            assert!(e.contains("escapes the run-from folder"), "{e}");
        }
        let e = doc(
            "### Answer EX-30-01 [code]\n\nSave as `a.py`, run from `app/`:\n\n```python\nx\n```\n",
        )
        .unwrap_err();
        assert!(
            e.contains(":3: save label: run-from folder \"app/\" does not exist"),
            "{e}"
        );
        let e = doc("# L\n\ntext\n\n```python\nprint(1)\n").unwrap_err();
        assert_eq!(e, "lessons/30-replay.md:5: unterminated fence: no closing fence before the end of its section");
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let e = parse(
            &course(dir.path()).settings,
            30,
            Path::new("lessons/30.md"),
            b"# ok\n\nline two \xff\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("lessons/30.md:3: not valid UTF-8"), "{e}");
    }

    #[test]
    fn blocks_in_list_items_keep_their_prefix_and_exact_range() {
        let text = "### Answer EX-30-01 [code]\n\n1. Run:\n\n   ```sh\n   echo hi\n   ```\n\n   Expected output:\n\n   ```text\n   hi\n   ```\n";
        let d = doc(text).unwrap();
        let DocBody::Code(code) = &d.probes[0].body else {
            panic!()
        };
        assert_eq!(code.command.content, "echo hi\n");
        let e = code.expected.as_ref().unwrap();
        assert_eq!(e.prefix, "   ");
        assert_eq!(&text[e.content_range.clone()], "   hi\n");
    }

    const FORMS: &str = "# L\n\n### Answer EX-30-01 [code]\n\nSave as `store.py`, run from `project/`:\n\n```python\nraise SystemExit(3)\n```\n\n<!-- lessonprobe: setup\n```sh\necho seed > seed.txt\n```\n-->\n\nRun:\n\n```bash\npython store.py\n```\n\nExpected exit code: 3\n\nExpected stderr:\n\n```text unordered\nb\na\n```\n\n## Next\n\nContinues: EX-30-01\n\n保存为 `next.py`，从 `project/` 运行：\n\n```python\nprint(1)\n```\n\n运行命令：\n\n```sh\npython next.py\n```\n\n预期退出码：0\n";

    #[test]
    fn exit_codes_stderr_setup_and_continues_are_bound_with_their_lines() {
        let d = doc(FORMS).unwrap();
        assert!(d.uncollected.is_empty(), "{:?}", d.uncollected);
        let DocBody::Code(code) = &d.probes[0].body else {
            panic!()
        };
        let exit = code.exit_code.as_ref().unwrap();
        assert_eq!((exit.code, exit.line), (3, 23));
        assert_eq!(&FORMS[exit.value.clone()], "3");
        let stderr = code.stderr.as_ref().unwrap();
        assert_eq!(
            (stderr.line, stderr.content.as_str(), stderr.unordered),
            (27, "b\na\n", true)
        );
        let setup = code.setup.as_ref().unwrap();
        assert_eq!(
            (setup.line, setup.lang.as_str(), setup.script.as_str()),
            (11, "sh", "echo seed > seed.txt\n")
        );
        assert!(code.continues.is_none());
        let DocBody::Code(next) = &d.probes[1].body else {
            panic!()
        };
        assert_eq!(d.probes[1].id, "next.py");
        assert_eq!(
            next.continues,
            Some(Continues {
                id: "EX-30-01".into(),
                line: 34
            })
        );
        assert_eq!(next.exit_code.as_ref().map(|e| e.code), Some(0));
    }

    /// Lesson 30 `text` in a course declaring the service `cache` (and `bus`).
    fn doc_with_services(text: &str) -> Result<LessonDoc, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(
            dir.path().join("lessonprobe.toml"),
            "[services.cache]\nstart = \"sleep 9\"\n[services.bus]\nstart = \"sleep 9\"\n",
        )
        .unwrap();
        let course = super::super::Course::open(dir.path(), Path::new(".")).unwrap();
        parse(
            &course.settings,
            30,
            Path::new("lessons/30-replay.md"),
            text.as_bytes(),
        )
        .map_err(|e| e.to_string())
    }

    fn faults(probe: &DocProbe) -> Vec<(ServiceAction, &str, usize)> {
        let DocBody::Code(code) = &probe.body else {
            panic!("{probe:?}")
        };
        code.faults
            .iter()
            .map(|f| (f.action, f.service.as_str(), f.line))
            .collect()
    }

    #[test]
    fn fault_steps_are_bound_in_order_to_their_exercise_or_snippet() {
        let run = "Run:\n\n```sh\ntrue\n```\n\n";
        let text = format!(
            "# L\n\nServices: cache\n\n### Answer EX-30-01 [code]\n\nStop service: cache\n\n服务：bus\n\n重启服务：`bus`\n\n{run}## Snippet\n\n启动服务：cache\n\nSave as `a.py`, run from `project/`:\n\n```python\nx = 1\n```\n\nRestart service: cache\n\n{run}"
        );
        let d = doc_with_services(&text).unwrap();
        assert_eq!(
            faults(&d.probes[0]),
            [
                (ServiceAction::Stop, "cache", 7),
                (ServiceAction::Restart, "bus", 11)
            ]
        );
        assert_eq!(d.probes[1].id, "a.py");
        assert_eq!(
            faults(&d.probes[1]),
            [
                (ServiceAction::Start, "cache", 21),
                (ServiceAction::Restart, "cache", 29)
            ]
        );
    }

    #[test]
    fn a_fault_step_on_a_service_its_step_does_not_need_or_in_the_wrong_place_is_refused() {
        let run = "Run:\n\n```sh\ntrue\n```\n\n";
        let ex = |body: &str| format!("# L\n\n### Answer EX-30-01 [code]\n\n{body}");
        for (text, wanted) in [
            (
                ex(&format!("Stop service: cache\n\n{run}")),
                "lessons/30-replay.md:5: stop service \"cache\": EX-30-01 does not need it: add `Services: cache`",
            ),
            (
                ex(&format!("服务：cache\n\n重启服务：db\n\n{run}")),
                "lessons/30-replay.md:7: restart service \"db\": it is not declared in the course's lessonprobe.toml (add [services.db])",
            ),
            (
                ex(&format!("Services: cache\n\n{run}Start service: cache\n")),
                "lessons/30-replay.md:13: a fault step after the run label",
            ),
            (
                "# L\n\nServices: cache\n\nStop service: cache\n\n## End\n".to_owned(),
                "lessons/30-replay.md:5: fault step binds nothing",
            ),
        ] {
            let e = doc_with_services(&text).unwrap_err();
            assert!(e.starts_with(wanted), "{wanted}\nnot the start of\n{e}");
        }
    }

    #[test]
    fn malformed_forms_are_refused_with_their_lines() {
        let ex = |body: &str| format!("# L\n\n### Answer EX-30-01 [code]\n\n{body}");
        let run = "Run:\n\n```sh\ntrue\n```\n\n";
        for (text, wanted) in [
            (ex(&format!("{run}Expected exit code: 256\n")), ":11: exit code \"256\" is not an integer in 0-255"),
            (ex(&format!("{run}Expected exit code: -1\n")), ":11: exit code \"-1\" is not an integer"),
            (ex(&format!("{run}预期退出码：三\n")), ":11: exit code \"三\" is not an integer"),
            (ex("Expected exit code: 1\n"), ":5: exit-code label before any run command binds nothing"),
            (ex("Expected stderr:\n\n```text\nx\n```\n"), ":5: expected-stderr label before any run command binds nothing"),
            ("# L\n\nExpected exit code: 1\n".to_owned(), ":3: exit-code label outside an exercise"),
            (ex(&format!("Continues: EX-30-09\n\n{run}")), ":5: continues EX-30-09, which is no exercise or snippet of this lesson"),
            (ex(&format!("Continues: EX-30-01\n\n{run}")), ":5: EX-30-01 continues itself: a cycle"),
            (
                format!("# L\n\n### Answer EX-30-01 [code]\n\nContinues: EX-30-02\n\n{run}### Answer EX-30-02 [code]\n\n{run}"),
                ":5: continues EX-30-02, which comes later in the document (line 13)",
            ),
            ("# L\n\nContinues: x.py\n\n## Other\n".to_owned(), ":3: continues label binds nothing"),
            (ex(&format!("<!-- lessonprobe: setup\nno block\n-->\n\n{run}")), ":5: setup comment holds 0 fenced blocks"),
            (
                ex(&format!("<!-- lessonprobe: setup\n```sh\na\n```\n```sh\nb\n```\n-->\n\n{run}")),
                ":5: setup comment holds 2 fenced blocks",
            ),
            (ex(&format!("<!-- lessonprobe: setup\n```python\na\n```\n-->\n\n{run}")), ":5: setup comment's block is \"python\""),
            (ex(&format!("{run}<!-- lessonprobe: setup\n```sh\na\n```\n-->\n")), ":11: a setup comment belongs in a [code] exercise, before its run label"),
            (ex(&format!("<!-- lessonprobe: setpu\n-->\n\n{run}")), ":5: unknown lessonprobe comment \"setpu\""),
        ] {
            let e = doc(&text).unwrap_err();
            assert!(e.starts_with("lessons/30-replay.md:"), "{e}");
            assert!(e.contains(wanted), "{wanted} not in {e}");
        }
        // A plain comment is not a setup, and binds nothing.
        assert!(doc(&ex(&format!("<!-- a note: setup -->\n\n{run}"))).is_ok());
    }
}
