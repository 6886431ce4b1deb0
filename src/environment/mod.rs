//! A course's declared environment (`[environment]` of lessonprobe.toml): the requirements file
//! and the Python versions it accepts, the preflight's check of an interpreter against them,
//! the cached virtual environment `lessonprobe env` makes from them, and which interpreter a
//! run uses. Lessons use it; it knows nothing of them.

pub mod check;
pub mod interpreter;
pub mod provision;
pub mod requirements;

use std::path::{Path, PathBuf};

use pep508_rs::pep440_rs::VersionSpecifiers;
use serde::Deserialize;
use toml::Spanned;

use crate::diagnostics::{Diagnostic, Source};
pub use check::{check, check_kernel, EnvironmentProblem};
pub use requirements::Requirement;

/// `[environment]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEnvironment {
    requirements: Spanned<String>,
    python: Option<Spanned<String>>,
}

/// What a course declares it needs of Python, read and checked once.
#[derive(Debug, Clone)]
pub struct Declared {
    /// The requirements file as read (inside the course root).
    pub file: PathBuf,
    /// The same file as messages show it, relative to where the command ran.
    pub shown: PathBuf,
    /// Its text, which also keys the cached environment.
    pub text: String,
    /// Its named requirements, each with its line.
    pub requirements: Vec<Requirement>,
    /// The Python versions the course accepts (`python = ">=3.10"`), as written and parsed.
    pub python: Option<(String, VersionSpecifiers)>,
    /// The course has notebook lessons: its environment also holds [`KERNEL_PACKAGES`].
    pub kernel: bool,
}

/// What a notebook's Jupyter kernel needs of an environment: the kernel, and the executor that
/// runs a notebook's cells in it.
pub const KERNEL_PACKAGES: &[&str] = &["ipykernel", "nbclient"];

impl RawEnvironment {
    /// Reads the requirements file (relative to the course `root`, shown under `shown`) and
    /// parses the version range; errors name lessonprobe.toml's line, or the requirements
    /// file's.
    pub fn declare(
        self,
        root: &Path,
        shown: &Path,
        source: &Source<'_>,
    ) -> Result<Declared, Diagnostic> {
        let relative = PathBuf::from(self.requirements.get_ref());
        if !crate::course_files::is_inside(&relative) {
            return Err(source.error(
                self.requirements.span(),
                format!(
                    "requirements {:?} must be a file inside the course",
                    self.requirements.get_ref()
                ),
            ));
        }
        let file = root.join(&relative);
        let shown = crate::course_files::show(shown, &relative);
        let text = std::fs::read(&file)
            .map_err(|e| {
                source.error(
                    self.requirements.span(),
                    format!("cannot read requirements file {}: {e}", shown.display()),
                )
            })
            .and_then(|bytes| Source::decode(&shown, bytes))?;
        let requirements = requirements::parse(&shown, &text)?;
        let python = match self.python {
            Some(p) => {
                let specifiers = p.get_ref().parse::<VersionSpecifiers>().map_err(|e| {
                    source.error(
                        p.span(),
                        format!("python {:?} is not a version range: {e}", p.get_ref()),
                    )
                })?;
                Some((p.into_inner(), specifiers))
            }
            None => None,
        };
        Ok(Declared {
            file,
            shown,
            text,
            requirements,
            python,
            kernel: false,
        })
    }
}
