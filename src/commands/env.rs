//! `lessonprobe env`: the course's declared environment, made in the cache folder unless it is
//! there already; its interpreter on stdout (for `--python "$(lessonprobe env)"`).

use std::path::PathBuf;

use crate::cli::EnvArgs;
use crate::environment::provision;
use crate::exit::{Code, Error};
use crate::lesson::Course;

pub fn env(args: EnvArgs) -> Result<Code, Error> {
    let dir = args.course.clone().unwrap_or_else(|| PathBuf::from("."));
    let course = Course::find(&dir, true)?.ok_or_else(|| Error::Usage("no course".into()))?;
    let base = args
        .python
        .clone()
        .unwrap_or_else(|| course.settings.python.clone());
    let python = ensure(&course, &base)?.ok_or_else(|| {
        Error::Usage(format!(
            "{}: declares no [environment]; name a requirements file there (see docs/writing-lessons.md)",
            course.show(std::path::Path::new(crate::lesson::CONFIG_FILE)).display()
        ))
    })?;
    println!("{}", python.display());
    Ok(Code::Ok)
}

/// The interpreter of `course`'s declared environment built from `base`, made first when
/// missing; `None` when the course declares none. A failed installation exits 4.
pub(super) fn ensure(course: &Course, base: &str) -> Result<Option<PathBuf>, Error> {
    let Some(declared) = &course.settings.environment else {
        return Ok(None);
    };
    let cached = provision::ensure(declared, base).map_err(|e| match e {
        provision::ProvisionError::NoBase { .. } => Error::Usage(e.to_string()),
        e => Error::Operation(format!("cannot make the course's environment: {e}")),
    })?;
    Ok(Some(cached.python))
}
