//! A course checkout: its optional `lessonprobe.toml` (where lessons live, the default run-from
//! folder, the Python interpreter, a deadline, extra label words, named redactions) and its
//! lesson files.

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::document::{self, LessonDoc};
use super::labels::{ExtraLabels, Labels};
use super::matcher::Redactions;
use super::settings::{is_inside, show, Settings};
use super::CourseError;
use crate::diagnostics::Source;

/// The course configuration file at the root of a course checkout.
pub use crate::course_files::CONFIG_FILE;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    lessons: Option<Spanned<String>>,
    run_from: Option<Spanned<String>>,
    python: Option<Spanned<String>>,
    timeout: Option<Spanned<String>>,
    #[serde(default)]
    shared: Vec<Spanned<String>>,
    #[serde(default)]
    labels: RawLabels,
    #[serde(default)]
    redactions: BTreeMap<Spanned<String>, Spanned<String>>,
    environment: Option<crate::environment::RawEnvironment>,
    #[serde(default)]
    services: BTreeMap<Spanned<String>, crate::services::RawService>,
    #[serde(default)]
    notebooks: RawNotebooks,
}

/// `[notebooks]`: how the course's notebooks are judged.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNotebooks {
    /// `compared` (nbval's default) or `run-only` (nbval's `--nbval-lax`).
    outputs: Option<Spanned<String>>,
    /// An nbval sanitize file (`--nbval-sanitize-with`), relative to the course.
    sanitize: Option<Spanned<String>>,
}

impl RawNotebooks {
    /// How the course's notebooks are judged: their outputs, and the patterns of the nbval
    /// sanitize file it gives (read from under `root`, shown under `shown`).
    fn read(
        self,
        root: &Path,
        shown: &Path,
        source: &Source,
    ) -> Result<(super::notebook::Outputs, super::notebook::Patterns), CourseError> {
        let outputs = match self.outputs {
            Some(o) => o
                .get_ref()
                .parse()
                .map_err(|e| source.error(o.span(), format!("[notebooks] {e}")))?,
            None => super::notebook::Outputs::default(),
        };
        let Some(file) = self.sanitize else {
            return Ok((outputs, super::notebook::Patterns::default()));
        };
        let path = inside(&file, "[notebooks] sanitize", "file", source)?;
        if !root.join(&path).is_file() {
            return Err(source
                .error(
                    file.span(),
                    format!(
                        "[notebooks] sanitize file {:?} does not exist in the course",
                        file.get_ref()
                    ),
                )
                .into());
        }
        let patterns = super::notebook::Patterns::read(&root.join(&path), &show(shown, &path))?;
        Ok((outputs, patterns))
    }
}

/// The path a configuration value gives (`what`, a `kind` of entry), when it stays inside the
/// course.
fn inside(
    value: &Spanned<String>,
    what: &str,
    kind: &str,
    source: &Source,
) -> Result<PathBuf, CourseError> {
    let path = PathBuf::from(value.get_ref());
    if is_inside(&path) {
        return Ok(path);
    }
    let message = format!(
        "{what} {:?} must be a {kind} inside the course",
        value.get_ref()
    );
    Err(source.error(value.span(), message).into())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLabels {
    #[serde(default)]
    save: Vec<String>,
    #[serde(default)]
    run: Vec<String>,
    #[serde(default)]
    expected: Vec<String>,
    #[serde(default)]
    no_run: Vec<String>,
    #[serde(default)]
    stderr: Vec<String>,
    #[serde(default)]
    exit_code: Vec<String>,
    #[serde(default)]
    continues: Vec<String>,
}

/// A course checkout: where its lessons are, and how they are written and run.
#[derive(Debug, Clone)]
pub struct Course {
    pub settings: Settings,
    /// The lessons folder, relative to the root.
    pub lessons: PathBuf,
    lessons_configured: bool,
}

impl Course {
    /// The course in `dir`. An `explicit` folder (given with `--course` or
    /// `LESSONPROBE_COURSE`) must exist; the default `.` is a course only when it holds
    /// `lessonprobe.toml` or a `lessons/` folder.
    pub fn find(dir: &Path, explicit: bool) -> Result<Option<Course>, CourseError> {
        if !dir.is_dir() {
            return match explicit {
                true => Err(CourseError::Missing(dir.to_owned())),
                false => Ok(None),
            };
        }
        if !explicit && !dir.join(CONFIG_FILE).is_file() && !dir.join("lessons").is_dir() {
            return Ok(None);
        }
        Course::open(dir, dir).map(Some)
    }

    /// Reads the course at `root`, showing its paths under `shown`.
    pub fn open(root: &Path, shown: &Path) -> Result<Course, CourseError> {
        let config_path = root.join(CONFIG_FILE);
        let shown_config = show(shown, Path::new(CONFIG_FILE));
        let text = match std::fs::read(&config_path) {
            Ok(bytes) => Source::decode(&shown_config, bytes)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(CourseError::io(&config_path, e)),
        };
        let source = Source::new(&shown_config, &text);
        let raw: RawConfig = source.toml()?;
        let at = |span: std::ops::Range<usize>, message: String| -> CourseError {
            source.error(span, message).into()
        };
        let folder = |value: Option<Spanned<String>>, default: &str, what: &str| {
            let Some(value) = value else {
                return Ok((PathBuf::from(default), false));
            };
            let path = inside(&value, what, "folder", &source)?;
            if !root.join(&path).is_dir() {
                return Err(at(
                    value.span(),
                    format!(
                        "{what} folder {:?} does not exist in the course",
                        value.get_ref()
                    ),
                ));
            }
            Ok((path, true))
        };
        let (lessons, lessons_configured) = folder(raw.lessons, "lessons", "lessons")?;
        let (run_from, _) = folder(raw.run_from, "project", "run_from")?;
        let shared = shared_paths(raw.shared, root, &source)?;
        let python = match raw.python {
            Some(p) if p.get_ref().trim().is_empty() => {
                return Err(at(p.span(), "python must name an interpreter".into()))
            }
            Some(p) => p.into_inner(),
            None => "python3".to_owned(),
        };
        let timeout = match raw.timeout {
            Some(t) => Some(
                crate::config::duration::parse(t.get_ref())
                    .map_err(|e| at(t.span(), format!("timeout {e}")))?,
            ),
            None => None,
        };
        let l = raw.labels;
        let labels = Labels::with(&ExtraLabels {
            save: l.save,
            run: l.run,
            expected: l.expected,
            stderr: l.stderr,
            exit_code: l.exit_code,
            continues: l.continues,
        })
        .map_err(|e| at(0..0, format!("[labels] {e}")))?;
        let redactions = redactions(&raw.redactions).map_err(|(span, e)| at(span, e))?;
        let environment = match raw.environment {
            Some(env) => Some(env.declare(root, shown, &source)?),
            None => None,
        };
        let services = crate::services::declare_all(raw.services, &source)?;
        let (notebook_outputs, notebook_sanitize) = raw.notebooks.read(root, shown, &source)?;
        let mut course = Course {
            settings: Settings {
                root: root.to_owned(),
                shown: shown.to_owned(),
                run_from,
                shared,
                python,
                timeout,
                labels,
                no_run: ["no-run".to_owned()].into_iter().chain(l.no_run).collect(),
                redactions,
                environment,
                services,
                notebook_outputs,
                notebook_outputs_given: None,
                notebook_sanitize,
            },
            lessons,
            lessons_configured,
        };
        // A course with notebooks has their kernel made in its environment.
        let kernel = course.has_notebooks();
        if let Some(environment) = &mut course.settings.environment {
            environment.kernel = kernel;
        }
        Ok(course)
    }

    /// Where the course's files are read.
    pub fn root(&self) -> &Path {
        &self.settings.root
    }

    /// How `relative` (a path inside the course) is shown.
    pub fn show(&self, relative: &Path) -> PathBuf {
        self.settings.show(relative)
    }

    /// Every lesson document: the files manifests name for their lesson (`named`, relative to
    /// the course root), and the course's `lessons/NN-*.md` and `lessons/NN-*.ipynb` files by
    /// their leading number.
    pub fn documents(&self, named: &[(u32, PathBuf)]) -> Result<Vec<LessonDoc>, CourseError> {
        let mut files: Vec<(u32, PathBuf)> = Vec::new();
        for (lesson, path) in named {
            if !self.root().join(path).is_file() {
                return Err(CourseError::Document {
                    path: self.show(path),
                    message: format!(
                        "lesson {lesson}'s manifest names this document, which the course does not have"
                    ),
                });
            }
            files.push((*lesson, path.clone()));
        }
        for (lesson, path) in self.numbered()? {
            if files.iter().any(|(_, p)| *p == path) {
                continue;
            }
            if let Some((_, other)) = files.iter().find(|(l, _)| *l == lesson) {
                return Err(CourseError::Document {
                    path: self.show(&path),
                    message: format!(
                        "lesson {lesson} already has a document: {}",
                        self.show(other).display()
                    ),
                });
            }
            files.push((lesson, path));
        }
        files.sort();
        files
            .iter()
            .map(|(lesson, path)| {
                let source = self.root().join(path);
                let bytes = std::fs::read(&source).map_err(|e| CourseError::io(&source, e))?;
                match super::notebook_doc::parse(&self.settings, *lesson, path, &bytes) {
                    Some(notebook) => notebook,
                    None => document::parse(&self.settings, *lesson, path, &bytes),
                }
            })
            .collect()
    }
}

impl Course {
    /// The lessons folder's numbered documents (`NN-*.md`, `NN-*.ipynb`), sorted, relative to
    /// the course root.
    fn numbered(&self) -> Result<Vec<(u32, PathBuf)>, CourseError> {
        let dir = self.root().join(&self.lessons);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.lessons_configured => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(CourseError::io(&dir, e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let name = entry.map_err(|e| CourseError::io(&dir, e))?.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !(name.ends_with(".md") || name.ends_with(".ipynb")) {
                continue;
            }
            let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(lesson) = digits.parse::<u32>() {
                found.push((lesson, self.lessons.join(name.as_ref())));
            }
        }
        found.sort();
        Ok(found)
    }

    /// Whether the course has notebook lessons (which need a Jupyter kernel).
    pub fn has_notebooks(&self) -> bool {
        self.numbered()
            .is_ok_and(|found| found.iter().any(|(_, p)| super::notebook::is_notebook(p)))
    }
}

/// The `[redactions]` table checked one entry at a time, so a bad one is named at its place.
fn redactions(
    raw: &BTreeMap<Spanned<String>, Spanned<String>>,
) -> Result<Redactions, (std::ops::Range<usize>, String)> {
    for (placeholder, expression) in raw {
        Redactions::new([(
            placeholder.get_ref().as_str(),
            expression.get_ref().as_str(),
        )])
        .map_err(|e| {
            let span = match e {
                super::matcher::BadRedaction::Placeholder(_) => placeholder.span(),
                super::matcher::BadRedaction::Expression { .. } => expression.span(),
            };
            (span, format!("[redactions] {e}"))
        })?;
    }
    Redactions::new(
        raw.iter()
            .map(|(p, e)| (p.get_ref().as_str(), e.get_ref().as_str())),
    )
    .map_err(|e| (0..0, format!("[redactions] {e}")))
}

/// The `shared` paths of the course at `root`, each inside it and existing.
fn shared_paths(
    values: Vec<Spanned<String>>,
    root: &Path,
    source: &Source,
) -> Result<Vec<PathBuf>, CourseError> {
    let mut shared = Vec::new();
    for value in values {
        let path = PathBuf::from(value.get_ref().trim_end_matches('/'));
        if !is_inside(&path) {
            return Err(CourseError::from(source.error(
                value.span(),
                format!(
                    "shared {:?} must be a path inside the course",
                    value.get_ref()
                ),
            )));
        }
        if std::fs::symlink_metadata(root.join(&path)).is_err() {
            return Err(CourseError::from(source.error(
                value.span(),
                format!(
                    "shared {:?} does not exist in the course (make it first, e.g. python3 -m venv {})",
                    value.get_ref(),
                    value.get_ref()
                ),
            )));
        }
        shared.push(path);
    }
    Ok(shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_explicit_course_is_an_error_and_a_bare_folder_is_no_course() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("typo");
        assert!(matches!(
            Course::find(&missing, true),
            Err(CourseError::Missing(_))
        ));
        assert!(Course::find(&missing, false).unwrap().is_none());
        assert!(Course::find(dir.path(), false).unwrap().is_none());
        let course = Course::find(dir.path(), true).unwrap().unwrap();
        assert_eq!(course.settings.run_from, PathBuf::from("project"));
        assert_eq!(course.settings.python, "python3");
        assert!(course.documents(&[]).unwrap().is_empty());
    }

    #[test]
    fn config_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| std::fs::write(dir.path().join(CONFIG_FILE), text).unwrap();
        let err = |text: &str| {
            write(text);
            Course::open(dir.path(), Path::new("c"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("python = \"py\"\ncolour = 1\n"),
            "c/lessonprobe.toml:2:1: unknown field `colour`, expected one of `lessons`, `run_from`, `python`, `timeout`, `shared`, `labels`, `redactions`, `environment`, `services`, `notebooks`"
        );
        assert_eq!(
            err("[redactions]\n\"[ID]\" = \"x\"\n\"EVENT\" = \"evt-[0-9]+\"\n"),
            "c/lessonprobe.toml:3:1: [redactions] redaction placeholder \"EVENT\" must be a name in square brackets, as \"[EVENT_ID]\" (not \"[..]\", which is the inline elision)"
        );
        let e = err("[redactions]\n\"[ID]\" = \"evt-(\"\n");
        assert!(
            e.starts_with("c/lessonprobe.toml:2:10: [redactions] redaction [ID]: \"evt-(\" is not a valid regular expression"),
            "{e}"
        );
        assert!(err("run_from = \"app\"\n")
            .starts_with("c/lessonprobe.toml:1:12: run_from folder \"app\" does not exist"));
        assert!(err("lessons = \"../x\"\n").contains("must be a folder inside the course"));
        assert!(err("timeout = \"soon\"\n").contains("timeout \"soon\" is not a duration"));
        assert!(err("[labels]\nsave = [\"Keep it\"]\n").contains("must contain {file}"));
        std::fs::create_dir(dir.path().join("app")).unwrap();
        write("run_from = \"app\"\npython = \"python3.12\"\ntimeout = \"5s\"\n[labels]\nrun = [\"Command\"]\nexit_code = [\"Exit status\"]\n[redactions]\n\"[ID]\" = \"evt-[0-9a-f]{8}\"\n");
        let c = Course::open(dir.path(), Path::new(".")).unwrap();
        assert_eq!(c.settings.run_from, PathBuf::from("app"));
        assert_eq!(c.settings.python, "python3.12");
        assert_eq!(c.settings.timeout, Some(std::time::Duration::from_secs(5)));
        assert!(!c.settings.redactions.is_empty());
        assert_eq!(
            c.show(Path::new("lessons/30.md")),
            PathBuf::from("lessons/30.md")
        );
    }
}
