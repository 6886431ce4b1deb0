//! The preflight's check of an interpreter: it exists, its version is one the course accepts,
//! and every declared requirement is installed at a version its specifier allows — all asked
//! of the interpreter itself in one process (`importlib.metadata`, nothing to install).

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use pep508_rs::pep440_rs::Version;
use pep508_rs::{MarkerEnvironment, MarkerEnvironmentBuilder, VersionOrUrl};
use serde::Deserialize;

use super::Declared;

/// Prints the marker environment and the installed version of each distribution named in
/// argv (null when absent), as JSON; the standard library only.
const ASK: &str = r#"
import json, os, platform, sys
from importlib import metadata
def full(v):
    s = "%d.%d.%d" % (v.major, v.minor, v.micro)
    return s if v.releaselevel == "final" else s + v.releaselevel[0] + str(v.serial)
env = dict(
    implementation_name=sys.implementation.name,
    implementation_version=full(sys.implementation.version),
    os_name=os.name,
    platform_machine=platform.machine(),
    platform_python_implementation=platform.python_implementation(),
    platform_release=platform.release(),
    platform_system=platform.system(),
    platform_version=platform.version(),
    python_full_version=platform.python_version(),
    python_version=".".join(platform.python_version_tuple()[:2]),
    sys_platform=sys.platform,
)
dists = {}
for name in sys.argv[1:]:
    try:
        dists[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        dists[name] = None
print(json.dumps({"env": env, "dists": dists}))
"#;

#[derive(Deserialize)]
struct Answer {
    env: BTreeMap<String, String>,
    dists: BTreeMap<String, Option<String>>,
}

/// What is wrong with an interpreter for a course; [`EnvironmentProblem::fix`] says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentProblem {
    #[error("python interpreter {python:?} not found")]
    NotFound { python: String },
    #[error("{python} did not answer: {why}")]
    Unanswered { python: String, why: String },
    #[error("{python} {version} is not a Python the course accepts ({wanted} in {shown})")]
    WrongPython {
        python: String,
        version: String,
        wanted: String,
        shown: String,
    },
    #[error("{python} {version} {}", .lacks.join(", "))]
    Requirements {
        python: String,
        version: String,
        /// `lacks sqlalchemy (requirements.txt:1)`, `has pytest 6.2.0, not >=7 (requirements.txt:3)`.
        lacks: Vec<String>,
        /// The requirements file as shown.
        file: String,
    },
    #[error("{python} {version} lacks {}, which notebook lessons need for their Jupyter kernel", .lacks.join(", "))]
    Kernel {
        python: String,
        version: String,
        lacks: Vec<String>,
        /// The course declares an environment (`lessonprobe env` then adds them).
        declared: bool,
    },
}

impl EnvironmentProblem {
    /// How to put it right.
    pub fn fix(&self) -> String {
        match self {
            EnvironmentProblem::NotFound { .. } | EnvironmentProblem::Unanswered { .. } => {
                "give --python an interpreter that runs (or `python` in lessonprobe.toml)".into()
            }
            EnvironmentProblem::WrongPython { wanted, .. } => {
                format!("give --python a Python {wanted}")
            }
            EnvironmentProblem::Requirements { file, .. } => {
                format!("run lessonprobe env, or pip install -r {file}")
            }
            EnvironmentProblem::Kernel {
                python,
                lacks,
                declared,
                ..
            } => match declared {
                true => "run lessonprobe env (the course's environment gets them)".to_owned(),
                false => format!("{python} -m pip install {}", lacks.join(" ")),
            },
        }
    }
}

/// Checks `python` against what the course declares (nothing but its presence when it declares
/// nothing), within `limit`.
pub fn check(
    python: &str,
    declared: Option<&Declared>,
    limit: Duration,
) -> Result<(), EnvironmentProblem> {
    let Some(declared) = declared else {
        return match super::interpreter::resolve(python) {
            Some(_) => Ok(()),
            None => Err(EnvironmentProblem::NotFound {
                python: python.to_owned(),
            }),
        };
    };
    let Some(program) = super::interpreter::resolve(python) else {
        return Err(EnvironmentProblem::NotFound {
            python: python.to_owned(),
        });
    };
    // The cached environment of these very requirements: made and checked by its installer.
    if super::provision::is_made_for(python, declared) {
        return Ok(());
    }
    let names: Vec<String> = declared
        .requirements
        .iter()
        .map(|r| r.spec.name.to_string())
        .collect();
    let answer = ask(python, &program, &names, limit)?;
    judge(python, declared, &answer)
}

/// Checks that `python` holds what a notebook's Jupyter kernel needs ([`KERNEL_PACKAGES`]),
/// within `limit`; a cached environment made with them (`declared` with notebooks) holds them.
///
/// [`KERNEL_PACKAGES`]: super::KERNEL_PACKAGES
pub fn check_kernel(
    python: &str,
    declared: Option<&Declared>,
    limit: Duration,
) -> Result<(), EnvironmentProblem> {
    let Some(program) = super::interpreter::resolve(python) else {
        return Err(EnvironmentProblem::NotFound {
            python: python.to_owned(),
        });
    };
    if declared.is_some_and(|d| d.kernel && super::provision::is_made_for(python, d)) {
        return Ok(());
    }
    let names: Vec<String> = super::KERNEL_PACKAGES
        .iter()
        .map(|p| (*p).to_owned())
        .collect();
    let answer = ask(python, &program, &names, limit)?;
    let lacks: Vec<String> = names
        .into_iter()
        .filter(|n| answer.dists.get(n).cloned().flatten().is_none())
        .collect();
    if lacks.is_empty() {
        return Ok(());
    }
    Err(EnvironmentProblem::Kernel {
        python: python.to_owned(),
        version: answer
            .env
            .get("python_full_version")
            .cloned()
            .unwrap_or_default(),
        lacks,
        declared: declared.is_some(),
    })
}

/// Asks `program` (the interpreter `python`) for its marker environment and the installed
/// versions of the distributions `names`, within `limit`.
fn ask(
    python: &str,
    program: &Path,
    names: &[String],
    limit: Duration,
) -> Result<Answer, EnvironmentProblem> {
    let mut args = vec!["-c".to_owned(), ASK.to_owned()];
    args.extend(names.iter().cloned());
    let unanswered = |why: String| EnvironmentProblem::Unanswered {
        python: python.to_owned(),
        why,
    };
    let done = crate::process::run(
        &program.display().to_string(),
        &args,
        Path::new("/"),
        &BTreeMap::new(),
        limit,
        &lessonprobe_probes::Cancel::new(),
    )
    .map_err(|e| unanswered(e.to_string()))?;
    if done.timed_out {
        return Err(unanswered(format!(
            "no answer within {}",
            humantime::format_duration(limit)
        )));
    }
    if !done.status.is_some_and(|s| s.success()) {
        let last = done
            .stderr
            .text
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .to_owned();
        return Err(unanswered(format!("it failed: {last}")));
    }
    serde_json::from_str(done.stdout.text.trim())
        .map_err(|e| unanswered(format!("unreadable answer: {e}")))
}

fn judge(python: &str, declared: &Declared, answer: &Answer) -> Result<(), EnvironmentProblem> {
    let field = |k: &str| answer.env.get(k).map_or("", String::as_str);
    let version = field("python_full_version").to_owned();
    if let Some((wanted, specifiers)) = &declared.python {
        let ok = Version::from_str(&version).is_ok_and(|v| specifiers.contains(&v));
        if !ok {
            return Err(EnvironmentProblem::WrongPython {
                python: python.to_owned(),
                version,
                wanted: wanted.clone(),
                shown: crate::course_files::CONFIG_FILE.into(),
            });
        }
    }
    let markers = MarkerEnvironment::try_from(MarkerEnvironmentBuilder {
        implementation_name: field("implementation_name"),
        implementation_version: field("implementation_version"),
        os_name: field("os_name"),
        platform_machine: field("platform_machine"),
        platform_python_implementation: field("platform_python_implementation"),
        platform_release: field("platform_release"),
        platform_system: field("platform_system"),
        platform_version: field("platform_version"),
        python_full_version: field("python_full_version"),
        python_version: field("python_version"),
        sys_platform: field("sys_platform"),
    })
    .ok();
    let file = declared.shown.display().to_string();
    let mut lacks = Vec::new();
    for req in &declared.requirements {
        let spec = &req.spec;
        // A requirement whose markers exclude this interpreter is not needed here.
        if let Some(markers) = &markers {
            if !spec.marker.evaluate(markers, &[]) {
                continue;
            }
        }
        let at = format!("{file}:{}", req.line);
        let name = spec.name.to_string();
        match answer.dists.get(&name).cloned().flatten() {
            None => lacks.push(format!("lacks {name} ({at})")),
            Some(installed) => {
                if let Some(VersionOrUrl::VersionSpecifier(specifiers)) = &spec.version_or_url {
                    let ok = Version::from_str(&installed).is_ok_and(|v| specifiers.contains(&v));
                    if !ok {
                        lacks.push(format!("has {name} {installed}, not {specifiers} ({at})"));
                    }
                }
            }
        }
    }
    if lacks.is_empty() {
        Ok(())
    } else {
        Err(EnvironmentProblem::Requirements {
            python: python.to_owned(),
            version,
            lacks,
            file,
        })
    }
}
