//! The cached environment of a course: a virtual environment in the user's cache folder, never
//! in the course, keyed by the requirements file's content and the base interpreter; made with
//! `uv` when it is on PATH, else `python -m venv` and pip; built beside its place and renamed
//! there only when complete. [`cached`] is the rule that runs a course declaring one in it
//! (a run and `lessonprobe env` make it, `lessonprobe doctor` only looks).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Declared;

/// Written last into a complete environment: without it a folder is never used.
const COMPLETE: &str = ".lessonprobe-complete";

/// How long one installation step may take.
const STEP_LIMIT: Duration = Duration::from_secs(15 * 60);

/// Why the environment could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("base interpreter {python:?} not found; give --python an interpreter to build the environment from")]
    NoBase { python: String },
    #[error("{}: cannot prepare the environment folder: {source}", path.display())]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{step} failed{}; nothing was kept", tail(.output))]
    Step { step: String, output: String },
}

/// The folder that holds every cached environment: `$XDG_CACHE_HOME/lessonprobe/envs`, else
/// `~/.cache/lessonprobe/envs`.
pub fn cache_root() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| std::env::temp_dir().join("lessonprobe-cache"));
    base.join("lessonprobe/envs")
}

/// A cached environment: where it is and whether it is complete.
#[derive(Debug, Clone)]
pub struct Cached {
    pub dir: PathBuf,
    /// The interpreter inside it.
    pub python: PathBuf,
    pub complete: bool,
}

/// The environment `declared` builds from the base interpreter `base`, made or not. The key
/// is the requirements file's text and the base interpreter's identity (its resolved path,
/// size and modification time: a new Python version is a new file), so nothing is spawned to
/// find an environment already made.
pub fn locate(declared: &Declared, base: &str) -> Result<Cached, ProvisionError> {
    let program = super::interpreter::resolve(base).ok_or(ProvisionError::NoBase {
        python: base.to_owned(),
    })?;
    let real = std::fs::canonicalize(&program).unwrap_or(program);
    let meta = std::fs::metadata(&real).ok();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    declared.text.hash(&mut hasher);
    if declared.kernel {
        super::KERNEL_PACKAGES.hash(&mut hasher);
    }
    real.hash(&mut hasher);
    meta.as_ref().map(|m| m.len()).hash(&mut hasher);
    meta.as_ref()
        .and_then(|m| m.modified().ok())
        .hash(&mut hasher);
    let dir = cache_root().join(format!("{:016x}", hasher.finish()));
    Ok(Cached {
        python: dir.join("bin/python"),
        complete: dir.join(COMPLETE).is_file(),
        dir,
    })
}

/// Whether finding the cached environment may make it: a run and `lessonprobe env` make it,
/// `lessonprobe doctor` only looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Making {
    WhenMissing,
    Never,
}

/// The cached environment the course's probes run in, built from `base`: `None` when the
/// interpreter is `given` on the command line or the course declares no environment (the
/// interpreter stays as it is). With [`Making::Never`] it may not be complete.
pub fn cached(
    declared: Option<&Declared>,
    given: bool,
    base: &str,
    making: Making,
) -> Result<Option<Cached>, ProvisionError> {
    let Some(declared) = declared.filter(|_| !given) else {
        return Ok(None);
    };
    match making {
        Making::WhenMissing => ensure(declared, base),
        Making::Never => locate(declared, base),
    }
    .map(Some)
}

/// Makes the environment unless it is made already; says each step on stderr. Returns it.
pub fn ensure(declared: &Declared, base: &str) -> Result<Cached, ProvisionError> {
    let cached = locate(declared, base)?;
    if cached.complete {
        return Ok(cached);
    }
    let root = cache_root();
    let folder = |source| ProvisionError::Folder {
        path: root.clone(),
        source,
    };
    std::fs::create_dir_all(&root).map_err(folder)?;
    // A half-made folder (an earlier attempt cut short) is never reused.
    if cached.dir.exists() {
        std::fs::remove_dir_all(&cached.dir).map_err(folder)?;
    }
    let building = tempfile::Builder::new()
        .prefix(".building-")
        .tempdir_in(&root)
        .map_err(folder)?;
    let venv = building.path().join("env");
    let uv = super::interpreter::resolve("uv");
    let tool = if uv.is_some() {
        "uv"
    } else {
        "python -m venv + pip"
    };
    errln!(
        "lessonprobe: making the environment of {} in {} ({tool})",
        declared.shown.display(),
        cached.dir.display()
    );
    let requirements = std::fs::canonicalize(&declared.file).unwrap_or(declared.file.clone());
    // Relative `--find-links` in the file resolve from its folder.
    let cwd = requirements
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned);
    let extra: &[&str] = match declared.kernel {
        true => super::KERNEL_PACKAGES,
        false => &[],
    };
    for (step, program, mut args) in steps(uv.as_deref(), base, &venv, &requirements) {
        // The notebooks' kernel goes in with the requirements, so pip resolves them together.
        if step.ends_with("install") {
            args.extend(extra.iter().map(|p| (*p).to_owned()));
        }
        run_step(step, &program, &args, &cwd)?;
    }
    std::fs::write(venv.join(COMPLETE), stamp(declared)).map_err(folder)?;
    std::fs::write(
        venv.join("lessonprobe-env.txt"),
        format!("requirements: {}\nbase: {base}\n", declared.shown.display()),
    )
    .map_err(folder)?;
    match std::fs::rename(&venv, &cached.dir) {
        Ok(()) => {}
        // Another run finished the same environment first: it is as good as ours.
        Err(_) if cached.dir.join(COMPLETE).is_file() => {}
        Err(source) => return Err(folder(source)),
    }
    errln!(
        "lessonprobe: environment ready: {}",
        cached.python.display()
    );
    Ok(Cached {
        complete: true,
        ..cached
    })
}

/// The installation steps (what each is called, its program and arguments) that make an
/// environment at `venv` from the interpreter `base` and the requirements file: with `uv`
/// when it is on PATH, else `python -m venv` and pip.
fn steps(
    uv: Option<&Path>,
    base: &str,
    venv: &Path,
    requirements: &Path,
) -> Vec<(String, String, Vec<String>)> {
    let req = requirements.display().to_string();
    let venv_text = venv.display().to_string();
    let inner = venv.join("bin/python").display().to_string();
    match uv {
        Some(uv) => {
            let uv = uv.display().to_string();
            vec![
                (
                    "uv venv".into(),
                    uv.clone(),
                    vec![
                        "venv".into(),
                        "--quiet".into(),
                        "--python".into(),
                        base.into(),
                        venv_text,
                    ],
                ),
                (
                    "uv pip install".into(),
                    uv,
                    vec![
                        "pip".into(),
                        "install".into(),
                        "--python".into(),
                        inner,
                        "-r".into(),
                        req,
                    ],
                ),
            ]
        }
        None => vec![
            (
                format!("{base} -m venv"),
                base.to_owned(),
                vec!["-m".into(), "venv".into(), venv_text],
            ),
            (
                "pip install".into(),
                inner,
                vec![
                    "-m".into(),
                    "pip".into(),
                    "install".into(),
                    "--disable-pip-version-check".into(),
                    "-r".into(),
                    req,
                ],
            ),
        ],
    }
}

/// Runs one installation step in `cwd`; a step that fails ends the making of the environment
/// with its output.
fn run_step(
    step: String,
    program: &str,
    args: &[String],
    cwd: &Path,
) -> Result<(), ProvisionError> {
    errln!("lessonprobe: {step} …");
    let done = crate::process::run(
        program,
        args,
        cwd,
        &BTreeMap::new(),
        STEP_LIMIT,
        &lessonprobe_probes::Cancel::new(),
    )
    .map_err(|e| ProvisionError::Step {
        step: step.clone(),
        output: e.to_string(),
    })?;
    if !done.status.is_some_and(|s| s.success()) {
        let output = format!("{}\n{}", done.stdout.text, done.stderr.text);
        return Err(ProvisionError::Step { step, output });
    }
    Ok(())
}

/// What a complete environment made from `declared` holds in its stamp.
fn stamp(declared: &Declared) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    declared.text.hash(&mut hasher);
    if declared.kernel {
        super::KERNEL_PACKAGES.hash(&mut hasher);
    }
    format!("{:016x}\n", hasher.finish())
}

/// Whether `python` is the interpreter of a complete cached environment made from `declared`:
/// then its requirements were installed and verified by pip, and need no asking.
pub fn is_made_for(python: &str, declared: &Declared) -> bool {
    let path = Path::new(python);
    let Some(dir) = path.parent().and_then(Path::parent) else {
        return false;
    };
    dir.starts_with(cache_root())
        && path.file_name().is_some_and(|n| n == "python")
        && std::fs::read_to_string(dir.join(COMPLETE)).is_ok_and(|s| s == stamp(declared))
}

/// `: LAST LINES` of a tool's output (the last 8 non-empty lines), or nothing.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        ":\n  {}",
        lines[lines.len().saturating_sub(8)..].join("\n  ")
    )
}
