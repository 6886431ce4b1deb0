//! The course a command works on: found from `--course`, read as of `--rev` when asked, its
//! lesson documents joined to the catalog, and the checkpoints `--changed-since` keeps.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::checkpoint::{Catalog, ProbeKind, Uncollected};
use crate::cli::CourseArgs;
use crate::environment::provision::{self, Making};
use crate::exit::Error;
use crate::lesson::{self, Course, DocBody, Snapshot};

/// A course and, for `--rev`, the temporary tree it is read from (removed when dropped).
pub struct OpenCourse {
    pub course: Course,
    snapshot: Option<Snapshot>,
}

impl OpenCourse {
    /// The course of the command line, if one is given or `.` is one; `rev` reads it as of a
    /// git revision.
    pub fn find(args: &CourseArgs, rev: Option<&str>) -> Result<Option<OpenCourse>, Error> {
        let dir = args.course.clone().unwrap_or_else(|| PathBuf::from("."));
        let Some(mut course) = Course::find(&dir, args.course.is_some())? else {
            if rev.is_some() {
                return Err(Error::Usage(
                    "--rev needs a course: give --course DIR".into(),
                ));
            }
            return Ok(None);
        };
        let snapshot = match rev {
            Some(rev) => {
                let snapshot = Snapshot::extract(&dir, rev)?;
                // Paths are shown as in the checkout, so reports annotate the same files.
                course = Course::open(&snapshot.root, &dir)?;
                Some(snapshot)
            }
            None => None,
        };
        if let Some(python) = &args.python {
            course.settings.python = python.clone();
        }
        if let Some(outputs) = args.notebook_outputs {
            course.settings.notebook_outputs_given = Some(outputs);
        }
        Ok(Some(OpenCourse { course, snapshot }))
    }

    /// Runs the course's probes in its declared environment, made when missing, unless the
    /// interpreter is `given` (`--python`); as [`provision::cached`] decides.
    pub fn run_in_environment(&mut self, given: bool) -> Result<(), Error> {
        let settings = &mut self.course.settings;
        let declared = settings.environment.as_ref();
        let made = provision::cached(declared, given, &settings.python, Making::WhenMissing)
            .map_err(unmade)?;
        if let Some(cached) = made {
            settings.python = cached.python.display().to_string();
        }
        Ok(())
    }

    /// Where `command` probes run.
    pub fn root(&self) -> &Path {
        self.course.root()
    }

    /// Joins every lesson document to `catalog`, printing the warnings of the lint (under
    /// `strict` they are failing probes instead) and returning them for the reports.
    pub fn attach(&self, catalog: &mut Catalog, strict: bool) -> Result<Vec<Uncollected>, Error> {
        let docs = self.course.documents(&catalog.named_documents())?;
        let warnings = catalog.add_documents(docs, strict);
        for warning in &warnings {
            errln!("lessonprobe: warning: {warning}");
        }
        Ok(warnings)
    }

    /// The commit a `--rev` run verifies.
    pub fn commit(&self) -> Option<&str> {
        self.snapshot.as_ref().map(|s| s.commit.as_str())
    }

    /// Keeps the checkpoints whose lesson file, or whose run-from folder, differs from `rev`;
    /// a change to the course's lessonprobe.toml keeps every checkpoint with a document.
    pub fn keep_changed(&self, catalog: &mut Catalog, rev: &str) -> Result<BTreeSet<u32>, Error> {
        let changed = lesson::changed_files(self.course.root(), rev)?;
        let config_changed = changed.contains(Path::new(lesson::CONFIG_FILE));
        let root = self.course.root();
        catalog.checkpoints.retain(|c| {
            let Some(document) = &c.document else {
                return false;
            };
            config_changed
                || changed.contains(document)
                || c.probes.iter().any(|p| match &p.kind {
                    ProbeKind::Document(doc) => match &doc.body {
                        DocBody::Code(code) => code
                            .run_from
                            .strip_prefix(root)
                            .is_ok_and(|dir| changed.iter().any(|f| f.starts_with(dir))),
                        _ => false,
                    },
                    _ => false,
                })
        });
        Ok(catalog.checkpoints.iter().map(|c| c.lesson).collect())
    }
}

/// Why the course's environment could not be made, as the command's error: a base interpreter
/// that is not there is a usage error, a failed installation exits 4.
pub(crate) fn unmade(e: provision::ProvisionError) -> Error {
    match e {
        provision::ProvisionError::NoBase { .. } => Error::Usage(e.to_string()),
        e => Error::Operation(format!("cannot make the course's environment: {e}")),
    }
}
