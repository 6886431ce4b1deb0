//! The manifest format (`checkpoints/NN-name.toml`): parsing and validation. Every error names
//! the file, line and column.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::exit::Error;

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
}

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
    /// An exercise or snippet of a lesson document, run in a scratch copy of the course.
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    id: Spanned<String>,
    name: Spanned<String>,
    claim: String,
    kind: Spanned<String>,
    #[serde(default)]
    backends: Vec<Backend>,
    timeout: Option<Spanned<String>>,
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
}

/// Parses and validates one manifest. `known_builtins` are the registered probe names.
pub fn parse(path: &Path, text: &str, known_builtins: &[&str]) -> Result<Checkpoint, Error> {
    let at = |span: std::ops::Range<usize>, message: String| {
        let (line, column) = line_column(text, span.start);
        Error::Manifest {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    };
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        let message = e.message().to_owned();
        match e.span() {
            Some(span) => at(span, message),
            None => Error::Manifest {
                path: path.to_owned(),
                line: 1,
                column: 1,
                message,
            },
        }
    })?;

    let lesson_span = raw.checkpoint.lesson.span();
    let lesson = raw.checkpoint.lesson.into_inner();
    if lesson == 0 {
        return Err(at(
            lesson_span,
            "checkpoint.lesson must be a positive lesson number".into(),
        ));
    }
    if raw.probe.is_empty() {
        return Err(at(0..0, "a checkpoint needs at least one [[probe]]".into()));
    }

    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut probes = Vec::with_capacity(raw.probe.len());
    for spanned in raw.probe {
        let raw = spanned.into_inner();
        let id_span = raw.id.span();
        let id = raw.id.into_inner();
        if !valid_name(&id) {
            return Err(at(
                id_span,
                format!("probe id {id:?} may hold only letters, digits, '-', '_' and '.'"),
            ));
        }
        if let Some(first) = seen.insert(id.clone(), line_column(text, id_span.start).0) {
            return Err(at(
                id_span,
                format!("duplicate probe id {id:?} (first defined on line {first})"),
            ));
        }
        let name_span = raw.name.span();
        let name = raw.name.into_inner();
        if !valid_name(&name) {
            return Err(at(
                name_span,
                format!("probe name {name:?} may hold only letters, digits, '-', '_' and '.'"),
            ));
        }
        let timeout = match raw.timeout {
            None => None,
            Some(t) => {
                let span = t.span();
                let d = crate::config::duration::parse(t.get_ref())
                    .map_err(|e| at(span, format!("timeout {e}")))?;
                Some(d)
            }
        };
        let kind_span = raw.kind.span();
        // Fields that belong to another kind are mistakes, not decoration.
        let present: Vec<(&str, bool)> = vec![
            ("builtin", raw.builtin.is_some()),
            ("argv", raw.argv.is_some()),
            ("cwd", raw.cwd.is_some()),
            ("env", !raw.env.is_empty()),
            ("requires", !raw.requires.is_empty()),
            ("question", raw.question.is_some()),
            ("answer", raw.answer.is_some()),
            ("selector", raw.selector.is_some()),
            ("script", raw.script.is_some()),
            ("doc", raw.doc.is_some()),
        ];
        let allowed: &[&str] = match raw.kind.get_ref().as_str() {
            // An exercise made executable keeps its question and answer key.
            "builtin" => &["builtin", "question", "answer", "doc"],
            "command" => &["argv", "cwd", "env", "requires", "doc"],
            "prose" => &["question", "answer"],
            "remote" => &["selector", "script"],
            other => {
                return Err(at(
                    kind_span,
                    format!(
                        "unknown probe kind {other:?} (expected builtin, command, prose or remote)"
                    ),
                ))
            }
        };
        if let Some((field, _)) = present
            .iter()
            .find(|(f, there)| *there && !allowed.contains(f))
        {
            return Err(at(
                id_span,
                format!(
                    "probe {id}: field `{field}` does not apply to kind {}",
                    raw.kind.get_ref()
                ),
            ));
        }
        let missing = |field: &str| {
            at(
                id_span.clone(),
                format!("probe {id}: kind {} needs `{field}`", raw.kind.get_ref()),
            )
        };
        let kind = match raw.kind.get_ref().as_str() {
            "builtin" => {
                let b = raw.builtin.ok_or_else(|| missing("builtin"))?;
                if !known_builtins.contains(&b.get_ref().as_str()) {
                    return Err(at(
                        b.span(),
                        format!(
                            "unknown builtin {:?}; known: {}",
                            b.get_ref(),
                            known_builtins.join(", ")
                        ),
                    ));
                }
                ProbeKind::Builtin {
                    name: b.into_inner(),
                    answer: raw.answer,
                }
            }
            "command" => {
                let argv = raw.argv.ok_or_else(|| missing("argv"))?;
                if argv.get_ref().is_empty() || argv.get_ref()[0].is_empty() {
                    return Err(at(argv.span(), format!("probe {id}: argv needs a program")));
                }
                ProbeKind::Command {
                    argv: argv.into_inner(),
                    cwd: raw.cwd,
                    env: raw.env,
                    requires: raw.requires,
                }
            }
            "prose" => ProbeKind::Prose {
                question: raw.question.ok_or_else(|| missing("question"))?,
                answer: raw.answer,
            },
            _ => {
                let s = raw.selector.ok_or_else(|| missing("selector"))?;
                if s.get_ref().trim().is_empty() {
                    return Err(at(
                        s.span(),
                        format!("probe {id}: selector must not be empty"),
                    ));
                }
                ProbeKind::Remote {
                    selector: s.into_inner(),
                    script: raw.script,
                }
            }
        };
        // A builtin's claim is its printed line; a command may pin its exit status alone.
        if matches!(kind, ProbeKind::Builtin { .. }) && raw.expect.is_none() {
            return Err(at(
                id_span,
                format!("probe {id}: kind builtin needs `expect`, the exact output"),
            ));
        }
        if !matches!(kind, ProbeKind::Builtin { .. } | ProbeKind::Command { .. })
            && raw.expect.is_some()
        {
            return Err(at(
                id_span,
                format!(
                    "probe {id}: field `expect` does not apply to kind {}",
                    kind.label()
                ),
            ));
        }
        let doc = match raw.doc {
            None => None,
            Some(d) => {
                let whole = d.get_ref() == "*";
                let command = matches!(kind, ProbeKind::Command { .. });
                if whole != command || d.get_ref().trim().is_empty() {
                    return Err(at(
                        d.span(),
                        format!("probe {id}: `doc` names an exercise or snippet id for a builtin, or \"*\" (the whole lesson document) for a command"),
                    ));
                }
                Some(d.into_inner())
            }
        };
        let mut backends = raw.backends;
        backends.sort_unstable();
        backends.dedup();
        probes.push(Probe {
            id,
            name,
            claim: raw.claim,
            kind,
            backends,
            timeout,
            expect: raw.expect,
            line: Some(line_column(text, id_span.start).0),
            doc,
            drift: None,
        });
    }
    let document = match raw.checkpoint.document {
        None => None,
        Some(d) => {
            let p = PathBuf::from(d.get_ref());
            if !crate::lesson::is_inside(&p) {
                return Err(at(
                    d.span(),
                    "checkpoint.document must be a path inside the course".into(),
                ));
            }
            Some(p)
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

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["apply_once_twice"];

    fn parse_str(text: &str) -> Result<Checkpoint, Error> {
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
            format!("{HEAD}[[probe]]\nid = \"a\"\nname = \"a\"\nclaim = \"c\"\n{extra}\n")
        };
        assert!(err(&probe("kind = \"prose\"\nquestion = 3")).contains(":9:"));
        assert!(err(&probe("kind = \"magic\"")).contains("unknown probe kind \"magic\""));
        assert!(err(&probe(
            "kind = \"prose\"\nquestion = \"q\"\ntimeout = \"soon\""
        ))
        .contains("timeout \"soon\""));
        assert!(
            err(&probe("kind = \"prose\"\nquestion = \"q\"\nargv = [\"x\"]"))
                .contains("field `argv` does not apply to kind prose")
        );
        assert!(err(&probe("kind = \"command\"\nargv = []\nexpect = \"\""))
            .contains("argv needs a program"));
        assert!(
            err(&probe("kind = \"builtin\"\nbuiltin = \"apply_once_twice\""))
                .contains("needs `expect`")
        );
        assert!(
            err(&probe("kind = \"prose\"\nquestion = \"q\"\nexpect = \"x\""))
                .contains("`expect` does not apply")
        );
        assert!(err(&probe("kind = \"remote\"")).contains("needs `selector`"));
        assert!(err(&probe(
            "kind = \"prose\"\nquestion = \"q\"\nbackends = [\"oracle\"]"
        ))
        .contains("unknown variant `oracle`"));
        assert!(err("[checkpoint]\nlesson = 0\ntitle = \"t\"\n").contains("positive lesson number"));
        assert!(err("[checkpoint\n").starts_with("30.toml:1:"));
    }
}
