//! The manifest format (`checkpoints/NN-name.toml`): parsing and validation. Every error names
//! the file, line and column.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::config::duration::TomlDuration;
use crate::diagnostics::{Diagnostic, Source};

/// One numbered checkpoint and its probes, in manifest order.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub lesson: u32,
    pub title: String,
    pub source: PathBuf,
    /// The lesson document this checkpoint verifies, relative to the course root, when the
    /// manifest names one (else the course's `lessons/NN-*.md` convention finds it).
    pub document: Option<PathBuf>,
    pub probes: Vec<Probe>,
}

/// One claim of a lesson and how to check it.
#[derive(Debug, Clone)]
pub struct Probe {
    pub id: String,
    pub name: String,
    pub claim: String,
    pub kind: ProbeKind,
    /// Services the probe may run on. SQL backends multiply into one case per selected backend.
    pub backends: Vec<Backend>,
    pub timeout: Option<Duration>,
    pub expect: Option<String>,
    /// Line of the probe in its file (the manifest's `id`, a lesson's exercise heading).
    pub line: Option<usize>,
    /// The part of the lesson document this probe mirrors: an exercise or snippet id for a
    /// builtin, `*` (the whole document) for a command.
    pub doc: Option<String>,
    /// Set when a course is given and this probe's `expect` disagrees with the document.
    pub drift: Option<String>,
    /// How often a failing run of this probe is tried again, when its manifest says; else the
    /// run's `--retries` decides.
    pub retries: Option<u32>,
    /// The course's declared services this probe needs (`services`, a lesson's `Services:`
    /// label): started before it runs, their variables in its environment.
    pub services: Vec<String>,
}

impl Probe {
    /// A probe of `kind` that no manifest wrote (a remote selector given on the command line, a
    /// preflight check's case): no backend, deadline, expectation, place, document or service.
    pub fn new(id: &str, name: &str, claim: String, kind: ProbeKind) -> Probe {
        Probe {
            id: id.to_owned(),
            name: name.to_owned(),
            claim,
            kind,
            backends: Vec::new(),
            timeout: None,
            expect: None,
            line: None,
            doc: None,
            drift: None,
            retries: None,
            services: Vec::new(),
        }
    }
}

/// The most retries a manifest or `--retries` may ask for.
pub const MAX_RETRIES: u32 = 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeKind {
    /// A Rust probe of the probes crate, by registered name, with the exercise's text if any.
    Builtin {
        name: String,
        answer: Option<String>,
    },
    /// An external program, run without a shell.
    Command {
        argv: Vec<String>,
        cwd: Option<PathBuf>,
        env: BTreeMap<String, String>,
        requires: Vec<PathBuf>,
    },
    /// An exercise answered in writing: never executed, always SKIP.
    Prose {
        question: String,
        answer: Option<String>,
    },
    /// A test selector run on an authorized remote host.
    Remote {
        selector: String,
        script: Option<String>,
    },
    /// An exercise or snippet of a lesson document, run in a working copy of the course.
    Document(Box<crate::lesson::DocProbe>),
}

impl ProbeKind {
    pub fn label(&self) -> &'static str {
        match self {
            ProbeKind::Builtin { .. } => "builtin",
            ProbeKind::Command { .. } => "command",
            ProbeKind::Prose { .. } => "prose",
            ProbeKind::Remote { .. } => "remote",
            ProbeKind::Document(_) => "document",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
    Kafka,
}

impl Backend {
    pub fn label(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Kafka => "kafka",
        }
    }
    pub fn is_sql(self) -> bool {
        matches!(self, Backend::Sqlite | Backend::Postgres)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    checkpoint: RawCheckpoint,
    #[serde(default)]
    probe: Vec<Spanned<RawProbe>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpoint {
    lesson: Spanned<u32>,
    title: String,
    document: Option<Spanned<String>>,
}

/// A `[[probe]]` as written. The fields after `expect` mean something only for some kinds:
/// each kind takes its own and refuses the others.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    id: Spanned<String>,
    name: Spanned<String>,
    claim: String,
    kind: Spanned<String>,
    #[serde(default)]
    backends: Vec<Backend>,
    timeout: Option<Spanned<TomlDuration>>,
    expect: Option<String>,
    // builtin
    builtin: Option<Spanned<String>>,
    // command
    argv: Option<Spanned<Vec<String>>>,
    cwd: Option<PathBuf>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    requires: Vec<PathBuf>,
    // prose
    question: Option<String>,
    answer: Option<String>,
    // remote
    selector: Option<Spanned<String>>,
    script: Option<String>,
    // builtin (an exercise id) or command (`*`)
    doc: Option<Spanned<String>>,
    // builtin, command, remote
    retries: Option<Spanned<i64>>,
    // command
    #[serde(default)]
    services: Vec<String>,
}

impl RawProbe {
    /// The first field given that `kind` does not take: a mistake, not decoration.
    fn misplaced(&self, allowed: &[&str]) -> Option<&'static str> {
        let given = [
            ("builtin", self.builtin.is_some()),
            ("argv", self.argv.is_some()),
            ("cwd", self.cwd.is_some()),
            ("env", !self.env.is_empty()),
            ("requires", !self.requires.is_empty()),
            ("question", self.question.is_some()),
            ("answer", self.answer.is_some()),
            ("selector", self.selector.is_some()),
            ("script", self.script.is_some()),
            ("expect", self.expect.is_some()),
            ("doc", self.doc.is_some()),
            ("retries", self.retries.is_some()),
            ("services", !self.services.is_empty()),
        ];
        given
            .into_iter()
            .find(|(field, there)| *there && !allowed.contains(field))
            .map(|(field, _)| field)
    }
}

/// Parses and validates one manifest. `known_builtins` are the registered probe names.
pub fn parse(path: &Path, text: &str, known_builtins: &[&str]) -> Result<Checkpoint, Diagnostic> {
    let src = Source::new(path, text);
    let raw: RawManifest = src.toml()?;
    let lesson_span = raw.checkpoint.lesson.span();
    let lesson = raw.checkpoint.lesson.into_inner();
    if lesson == 0 {
        return Err(src.error(
            lesson_span,
            "checkpoint.lesson must be a positive lesson number",
        ));
    }
    if raw.probe.is_empty() {
        return Err(src.error(0..0, "a checkpoint needs at least one [[probe]]"));
    }
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut probes = Vec::with_capacity(raw.probe.len());
    for raw in raw.probe {
        let probe = probe(&src, raw.into_inner(), known_builtins)?;
        let line = src.line(probe.span.start);
        if let Some(first) = first_line.insert(probe.probe.id.clone(), line) {
            return Err(src.error(
                probe.span,
                format!(
                    "duplicate probe id {:?} (first defined on line {first})",
                    probe.probe.id
                ),
            ));
        }
        probes.push(probe.probe);
    }
    let document = match raw.checkpoint.document {
        None => None,
        Some(d) if crate::lesson::is_inside(Path::new(d.get_ref())) => {
            Some(PathBuf::from(d.into_inner()))
        }
        Some(d) => {
            return Err(src.error(
                d.span(),
                "checkpoint.document must be a path inside the course",
            ))
        }
    };
    Ok(Checkpoint {
        lesson,
        title: raw.checkpoint.title,
        source: path.to_owned(),
        document,
        probes,
    })
}

/// A probe and where its id is written, the place its errors point at.
struct Placed {
    probe: Probe,
    span: Range<usize>,
}

fn probe(
    src: &Source<'_>,
    mut raw: RawProbe,
    known_builtins: &[&str],
) -> Result<Placed, Diagnostic> {
    let span = raw.id.span();
    let id = valid_name(src, &raw.id, "probe id")?;
    let name = valid_name(src, &raw.name, "probe name")?;
    let timeout = match &raw.timeout {
        None => None,
        Some(t) => Some(
            t.get_ref()
                .duration()
                .map_err(|e| src.error(t.span(), format!("timeout {e}")))?,
        ),
    };
    let label = raw.kind.get_ref().clone();
    let at = Kind {
        src,
        id: &id,
        span: span.clone(),
        label: &label,
    };
    let kind = match label.as_str() {
        "builtin" => at.builtin(&mut raw, known_builtins)?,
        "command" => at.command(&mut raw)?,
        "prose" => at.prose(&mut raw)?,
        "remote" => at.remote(&mut raw)?,
        other => {
            return Err(src.error(
                raw.kind.span(),
                format!(
                    "unknown probe kind {other:?} (expected builtin, command, prose or remote)"
                ),
            ))
        }
    };
    let doc = at.doc(&mut raw, &kind)?;
    let retries = at.retries(&mut raw)?;
    let mut backends = raw.backends;
    backends.sort_unstable();
    backends.dedup();
    Ok(Placed {
        probe: Probe {
            id,
            name,
            claim: raw.claim,
            kind,
            backends,
            timeout,
            expect: raw.expect,
            line: Some(src.line(span.start)),
            doc,
            drift: None,
            retries,
            services: raw.services,
        },
        span,
    })
}

/// One probe's kind being read: each kind is a method that takes its fields.
struct Kind<'s> {
    src: &'s Source<'s>,
    id: &'s str,
    /// The probe's id, where errors without a field of their own point.
    span: Range<usize>,
    label: &'s str,
}

impl Kind<'_> {
    fn builtin(&self, f: &mut RawProbe, known: &[&str]) -> Result<ProbeKind, Diagnostic> {
        // An exercise made executable keeps its question and answer key.
        self.only(
            f,
            &["builtin", "question", "answer", "expect", "doc", "retries"],
        )?;
        let b = f.builtin.take().ok_or_else(|| self.missing("builtin"))?;
        if !known.contains(&b.get_ref().as_str()) {
            return Err(self.src.error(
                b.span(),
                format!(
                    "unknown builtin {:?}; known: {}",
                    b.get_ref(),
                    known.join(", ")
                ),
            ));
        }
        // A builtin's claim is its printed line.
        if f.expect.is_none() {
            return Err(self.error("kind builtin needs `expect`, the exact output"));
        }
        Ok(ProbeKind::Builtin {
            name: b.into_inner(),
            answer: f.answer.take(),
        })
    }

    /// A command may pin its exit status alone, without `expect`.
    fn command(&self, f: &mut RawProbe) -> Result<ProbeKind, Diagnostic> {
        self.only(
            f,
            &[
                "argv", "cwd", "env", "requires", "expect", "doc", "retries", "services",
            ],
        )?;
        let argv = f.argv.take().ok_or_else(|| self.missing("argv"))?;
        if argv.get_ref().first().is_none_or(String::is_empty) {
            return Err(self.src.error(
                argv.span(),
                format!("probe {}: argv needs a program", self.id),
            ));
        }
        Ok(ProbeKind::Command {
            argv: argv.into_inner(),
            cwd: f.cwd.take(),
            env: std::mem::take(&mut f.env),
            requires: std::mem::take(&mut f.requires),
        })
    }

    fn prose(&self, f: &mut RawProbe) -> Result<ProbeKind, Diagnostic> {
        self.only(f, &["question", "answer"])?;
        Ok(ProbeKind::Prose {
            question: f.question.take().ok_or_else(|| self.missing("question"))?,
            answer: f.answer.take(),
        })
    }

    fn remote(&self, f: &mut RawProbe) -> Result<ProbeKind, Diagnostic> {
        self.only(f, &["selector", "script", "retries"])?;
        let s = f.selector.take().ok_or_else(|| self.missing("selector"))?;
        crate::selector::validate_selector(s.get_ref())
            .map_err(|e| self.src.error(s.span(), format!("probe {}: {e}", self.id)))?;
        Ok(ProbeKind::Remote {
            selector: s.into_inner(),
            script: f.script.take(),
        })
    }

    /// `doc`: an exercise or snippet id on a builtin, `*` (the whole lesson document) on a
    /// command.
    fn doc(&self, f: &mut RawProbe, kind: &ProbeKind) -> Result<Option<String>, Diagnostic> {
        let Some(d) = f.doc.take() else {
            return Ok(None);
        };
        let whole = d.get_ref() == "*";
        if whole != matches!(kind, ProbeKind::Command { .. }) || d.get_ref().trim().is_empty() {
            return Err(self.src.error(
                d.span(),
                format!(
                    "probe {}: `doc` names an exercise or snippet id for a builtin, or \"*\" (the whole lesson document) for a command",
                    self.id
                ),
            ));
        }
        Ok(Some(d.into_inner()))
    }

    /// `retries`: a whole number from 0 to [`MAX_RETRIES`].
    fn retries(&self, f: &mut RawProbe) -> Result<Option<u32>, Diagnostic> {
        let Some(r) = f.retries.take() else {
            return Ok(None);
        };
        match u32::try_from(*r.get_ref()) {
            Ok(n) if n <= MAX_RETRIES => Ok(Some(n)),
            _ => Err(self.src.error(
                r.span(),
                format!(
                    "probe {}: retries {} must be a whole number from 0 to {MAX_RETRIES}",
                    self.id,
                    r.get_ref()
                ),
            )),
        }
    }

    fn only(&self, f: &RawProbe, allowed: &[&str]) -> Result<(), Diagnostic> {
        match f.misplaced(allowed) {
            None => Ok(()),
            Some(field) => Err(self.error(&format!(
                "field `{field}` does not apply to kind {}",
                self.label
            ))),
        }
    }

    fn missing(&self, field: &str) -> Diagnostic {
        self.error(&format!("kind {} needs `{field}`", self.label))
    }

    fn error(&self, what: &str) -> Diagnostic {
        self.src
            .error(self.span.clone(), format!("probe {}: {what}", self.id))
    }
}

/// An id or name: letters, digits, '-', '_' and '.'.
fn valid_name(src: &Source<'_>, value: &Spanned<String>, what: &str) -> Result<String, Diagnostic> {
    let ok = !value.get_ref().is_empty()
        && value
            .get_ref()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(src.error(
            value.span(),
            format!(
                "{what} {:?} may hold only letters, digits, '-', '_' and '.'",
                value.get_ref()
            ),
        ));
    }
    Ok(value.get_ref().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["apply_once_twice"];

    fn parse_str(text: &str) -> Result<Checkpoint, Diagnostic> {
        parse(Path::new("30.toml"), text, KNOWN)
    }

    fn err(text: &str) -> String {
        parse_str(text).unwrap_err().to_string()
    }

    const HEAD: &str = "[checkpoint]\nlesson = 30\ntitle = \"t\"\n";

    #[test]
    fn a_valid_manifest_parses_every_kind() {
        let text = format!(
            "{HEAD}
[[probe]]
id = \"EX-30-01\"
name = \"dup\"
claim = \"c\"
kind = \"builtin\"
builtin = \"apply_once_twice\"
backends = [\"postgres\", \"sqlite\"]
timeout = \"5s\"
expect = \"True False 1\"

[[probe]]
id = \"cmd\"
name = \"cmd\"
claim = \"c\"
kind = \"command\"
argv = [\"echo\", \"hi\"]
env = {{ A = \"1\" }}
timeout = 7
expect = \"hi\"

[[probe]]
id = \"EX-30-02\"
name = \"why\"
claim = \"c\"
kind = \"prose\"
question = \"q?\"

[[probe]]
id = \"remote\"
name = \"remote\"
claim = \"c\"
kind = \"remote\"
selector = \"tests/a.py::b\"
"
        );
        let cp = parse_str(&text).unwrap();
        assert_eq!(cp.lesson, 30);
        assert_eq!(cp.probes.len(), 4);
        assert_eq!(
            cp.probes[0].backends,
            vec![Backend::Sqlite, Backend::Postgres]
        );
        assert_eq!(cp.probes[0].timeout, Some(Duration::from_secs(5)));
        assert_eq!(cp.probes[1].timeout, Some(Duration::from_secs(7)));
        assert!(matches!(cp.probes[1].kind, ProbeKind::Command { ref env, .. } if env["A"] == "1"));
    }

    #[test]
    fn doc_links_and_documents_are_checked_and_lines_recorded() {
        let probe = |kind: &str, doc: &str| {
            format!("[checkpoint]\nlesson = 30\ntitle = \"t\"\ndocument = \"lessons/30.md\"\n\n[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\n{kind}\ndoc = \"{doc}\"\n")
        };
        let builtin = "kind = \"builtin\"\nbuiltin = \"apply_once_twice\"\nexpect = \"x\"";
        let command = "kind = \"command\"\nargv = [\"true\"]";
        let cp = parse_str(&probe(builtin, "EX-30-01")).unwrap();
        assert_eq!(cp.document, Some(PathBuf::from("lessons/30.md")));
        assert_eq!(cp.probes[0].doc.as_deref(), Some("EX-30-01"));
        assert_eq!(cp.probes[0].line, Some(7));
        assert_eq!(
            parse_str(&probe(command, "*")).unwrap().probes[0]
                .doc
                .as_deref(),
            Some("*")
        );
        assert!(err(&probe(builtin, "*")).contains("`doc` names an exercise or snippet id"));
        assert!(err(&probe(command, "EX-30-01")).contains("`doc` names an exercise or snippet id"));
        assert!(
            err(&probe("kind = \"prose\"\nquestion = \"q\"", "EX-30-02"))
                .contains("field `doc` does not apply to kind prose")
        );
        let escaping = probe(builtin, "EX-30-01").replace("lessons/30.md", "../30.md");
        assert!(
            err(&escaping)
                .starts_with("30.toml:4:12: checkpoint.document must be a path inside the course"),
            "{}",
            err(&escaping)
        );
    }

    #[test]
    fn retries_are_read_for_probes_that_run_and_refused_when_invalid_or_misplaced() {
        let probe = |extra: &str| {
            format!("{HEAD}[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\n{extra}\n")
        };
        let command = "kind = \"command\"\nargv = [\"true\"]";
        let cp = parse_str(&probe(&format!("{command}\nretries = 2"))).unwrap();
        assert_eq!(cp.probes[0].retries, Some(2));
        assert_eq!(parse_str(&probe(command)).unwrap().probes[0].retries, None);
        for bad in ["-1", "21"] {
            let e = err(&probe(&format!("{command}\nretries = {bad}")));
            assert!(
                e.starts_with(&format!(
                    "30.toml:10:11: probe a: retries {bad} must be a whole number from 0 to 20"
                )),
                "{e}"
            );
        }
        let e = err(&probe(&format!("{command}\nretries = \"two\"")));
        assert!(e.starts_with("30.toml:10:11:"), "{e}");
        let e = err(&probe("kind = \"prose\"\nquestion = \"q\"\nretries = 1"));
        assert!(
            e.contains("field `retries` does not apply to kind prose"),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_names_file_line_and_column() {
        let e = err(&format!("{HEAD}[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\nkind = \"prose\"\nquestion = \"q\"\ncolour = 1\n"));
        assert!(e.starts_with("30.toml:10:1: unknown field `colour`"), "{e}");
    }

    #[test]
    fn duplicate_ids_point_at_the_second() {
        let p = "[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\nkind = \"prose\"\nquestion = \"q\"\n";
        let e = err(&format!("{HEAD}{p}{p}"));
        assert!(
            e.starts_with("30.toml:11:6: duplicate probe id \"a\" (first defined on line 5)"),
            "{e}"
        );
    }

    #[test]
    fn unknown_builtin_lists_the_known_ones() {
        let e = err(&format!(
            "{HEAD}[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\nkind = \"builtin\"\nbuiltin = \"nope\"\nexpect = \"x\"\n"
        ));
        assert!(
            e.starts_with("30.toml:9:11: unknown builtin \"nope\"; known: apply_once_twice"),
            "{e}"
        );
    }

    #[test]
    fn bad_types_kinds_timeouts_and_misplaced_fields_are_refused() {
        let probe = |extra: &str| {
            err(&format!(
                "{HEAD}[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\n{extra}\n"
            ))
        };
        // The probe's fields after `claim`, and what the error says.
        for (extra, says) in [
            ("kind = \"prose\"\nquestion = 3", ":9:"),
            ("kind = \"magic\"", "unknown probe kind \"magic\""),
            (
                "kind = \"prose\"\nquestion = \"q\"\ntimeout = \"soon\"",
                "timeout \"soon\"",
            ),
            (
                "kind = \"prose\"\nquestion = \"q\"\nargv = [\"x\"]",
                "field `argv` does not apply to kind prose",
            ),
            (
                "kind = \"command\"\nargv = []\nexpect = \"\"",
                "argv needs a program",
            ),
            (
                "kind = \"builtin\"\nbuiltin = \"apply_once_twice\"",
                "needs `expect`",
            ),
            (
                "kind = \"prose\"\nquestion = \"q\"\nexpect = \"x\"",
                "`expect` does not apply",
            ),
            ("kind = \"remote\"", "needs `selector`"),
            (
                "kind = \"remote\"\nselector = \"-k\"",
                "must not start with '-'",
            ),
            (
                "kind = \"prose\"\nquestion = \"q\"\nbackends = [\"oracle\"]",
                "unknown variant `oracle`",
            ),
        ] {
            let e = probe(extra);
            assert!(e.contains(says), "{extra:?}: {e}");
        }
        // Where the error points, too.
        let e = probe("kind = \"prose\"\nquestion = \"q\"\ntimeout = 0");
        assert!(
            e.starts_with("30.toml:10:11: timeout \"0\": a duration must be positive"),
            "{e}"
        );
        let e = probe("kind = \"prose\"\nquestion = \"q\"\ntimeout = true");
        assert!(
            e.starts_with("30.toml:10:11: a duration: a string such as"),
            "{e}"
        );
        let e = probe("kind = \"remote\"\nselector = \"x;touch /tmp/p\"");
        assert!(e.starts_with("30.toml:9:12:") && e.contains("';'"), "{e}");
        assert!(err("[checkpoint]\nlesson = 0\ntitle = \"t\"\n").contains("positive lesson number"));
        assert!(err("[checkpoint\n").starts_with("30.toml:1:"));
    }
}
