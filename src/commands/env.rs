//! `lessonprobe env`: the course's declared environment, made in the cache folder unless it is
//! there already; its interpreter on stdout (for `--python "$(lessonprobe env)"`).

use std::path::PathBuf;

use crate::cli::EnvArgs;
use crate::environment::provision::{self, Making};
use crate::exit::{Code, Error};
use crate::lesson::Course;

pub fn env(args: EnvArgs) -> Result<Code, Error> {
    let dir = args.course.clone().unwrap_or_else(|| PathBuf::from("."));
    let course = Course::find(&dir, true)?.ok_or_else(|| Error::Usage("no course".into()))?;
    let base = args
        .python
        .clone()
        .unwrap_or_else(|| course.settings.python.clone());
    let declared = course.settings.environment.as_ref();
    let cached = provision::cached(declared, false, &base, Making::WhenMissing)
        .map_err(super::course::unmade)?
        .ok_or_else(|| {
            Error::Usage(format!(
                "{}: declares no [environment]; name a requirements file there (see docs/writing-lessons.md)",
                course.show(std::path::Path::new(crate::lesson::CONFIG_FILE)).display()
            ))
        })?;
    outln!("{}", cached.python.display());
    Ok(Code::Ok)
}
