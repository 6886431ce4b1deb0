//! `lessonprobe doc PATH...`: the sessions and labelled blocks of any Markdown files and the
//! code cells of Jupyter notebooks, each document a checkpoint of its own (Markdown run in a
//! fresh empty temporary folder with `TESTDIR` naming the document's folder, a notebook in a
//! copy of its folder), and reported as a lesson run is.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::checkpoint::{Catalog, CatalogSource};
use crate::cli::{CourseArgs, DocArgs, RunArgs};
use crate::exit::{Code, Error};
use crate::history::Recorder;
use crate::lesson::{self, Course, LessonDoc};

use super::run::{execute_and_record, new_run_id, select, RunBuilder};

/// Folders never searched for documents.
const SKIPPED: &[&str] = &["node_modules", "target", "venv", "__pycache__"];

pub fn doc(args: DocArgs) -> Result<Code, Error> {
    let run = &args.run;
    for (given, flag) in [
        (run.course.course.is_some(), "--course"),
        (run.rev.is_some(), "--rev"),
        (run.changed_since.is_some(), "--changed-since"),
        (run.partition.is_some(), "--partition"),
        (run.watch, "--watch"),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "lessonprobe doc takes no {flag}: it verifies the Markdown files and notebooks it is given"
            )));
        }
    }
    let files = documents(&args.paths)?;
    // Labelled exercises and snippets run in an empty folder of their document's own too.
    let empty_roots = tempfile::Builder::new()
        .prefix("lessonprobe-doc-")
        .tempdir()
        .map_err(|e| Error::Operation(format!("cannot create a temporary folder: {e}")))?;
    let docs = parse(&files, &run.course, empty_roots.path())?;
    let mut catalog = Catalog {
        source: CatalogSource::Embedded,
        checkpoints: Vec::new(),
    };
    let uncollected = catalog.add_documents(docs, run.strict);
    for warning in &uncollected {
        errln!("lessonprobe: warning: {warning}");
    }
    if catalog.checkpoints.is_empty() {
        return Err(Error::Usage(format!(
            "nothing to verify in {}: no terminal or Python session, exercise, snippet or notebook cell",
            shown(&args.paths)
        )));
    }
    let key = selection_key(&files, run);
    // Kept outside the user's tree: `doc` writes nothing there unless told to (--junit, --html).
    let (selection, history) = select(run, &catalog, |_| {}, &cache_dir(), key)?;
    // No course: the documents' interpreter is as given; the services are checked as in a run.
    let (config, mut reporting) = RunBuilder::new(run)
        .junit(run.junit.clone())
        .uncollected(uncollected)
        .build(&selection)?;
    // A failure's rerun command is this command with its paths.
    let paths = args.paths.iter().map(|p| p.display().to_string());
    let before: Vec<String> = std::iter::once("doc".to_owned()).chain(paths).collect();
    reporting.extras.rerun.args.splice(0..0, before);
    let run_id = run.run_id.clone().unwrap_or_else(new_run_id);
    execute_and_record(
        &selection,
        &config,
        &run_id,
        &reporting,
        &super::run::interruptible()?,
        Some(Recorder::new(history)),
    )
}

/// Each Markdown file or notebook as a lesson of its own (numbered from its name), a Markdown
/// file's labelled exercises and snippets to run in an empty folder under `empty_roots`;
/// the interpreter and notebook outputs as `given` on the command line.
fn parse(
    files: &[PathBuf],
    given: &CourseArgs,
    empty_roots: &Path,
) -> Result<Vec<LessonDoc>, Error> {
    let mut used = BTreeSet::new();
    let mut docs = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let dir = file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = PathBuf::from(file.file_name().unwrap_or_default());
        let mut course = Course::open(dir, dir)?;
        if let Some(python) = &given.python {
            course.settings.python = python.clone();
        }
        course.settings.notebook_outputs_given = given.notebook_outputs;
        let lesson = number(&name, &mut used);
        let empty = empty_roots.join(i.to_string());
        std::fs::create_dir_all(&empty).map_err(|e| Error::io(&empty, e))?;
        let bytes = std::fs::read(file).map_err(|e| Error::io(file, e))?;
        if let Some(notebook) = lesson::notebook_doc::parse(&course.settings, lesson, &name, &bytes)
        {
            docs.push(notebook?);
            continue;
        }
        docs.push(lesson::parse_free(
            &course.settings,
            lesson,
            &name,
            &bytes,
            &empty,
        )?);
    }
    Ok(docs)
}

/// What names the files and selection in the last-failed state.
fn selection_key(files: &[PathBuf], run: &RunArgs) -> String {
    format!(
        "doc={}; lesson={}; select={}",
        files
            .iter()
            .map(|f| f
                .canonicalize()
                .map_or_else(|_| f.display().to_string(), |p| p.display().to_string()))
            .collect::<Vec<_>>()
            .join(","),
        run.lesson
            .map_or_else(|| "all".to_owned(), |n| n.to_string()),
        run.select.join(","),
    )
}

/// The documents of `paths`: each file as given, each folder's `*.md`, `*.markdown` and
/// `*.ipynb` files (hidden and dependency folders left out, `.ipynb_checkpoints` with them),
/// sorted, each once.
fn documents(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut seen = BTreeSet::new();
    files.retain(|f| seen.insert(f.canonicalize().unwrap_or_else(|_| f.clone())));
    if files.is_empty() {
        return Err(Error::Usage(format!(
            "no Markdown file (*.md) or notebook (*.ipynb) in {}",
            shown(paths)
        )));
    }
    Ok(files)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
        if kind.is_dir() {
            if !SKIPPED.contains(&name.as_ref()) {
                walk(&path, found)?;
            }
        } else if name.ends_with(".md") || name.ends_with(".markdown") || name.ends_with(".ipynb") {
            found.push(path);
        }
    }
    Ok(())
}

/// The document's number: the leading digits of its file name (a lesson's `30-replay.md`),
/// else the first number not taken.
fn number(name: &Path, used: &mut BTreeSet<u32>) -> u32 {
    let digits: String = name
        .to_string_lossy()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let n = digits
        .parse::<u32>()
        .ok()
        .filter(|n| !used.contains(n))
        .unwrap_or_else(|| (1..).find(|n| !used.contains(n)).unwrap_or(0));
    used.insert(n);
    n
}

/// Where `doc` keeps its `--last-failed` state: the user's cache folder.
fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home.map(|h| h.join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("lessonprobe")
        .join("doc")
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
