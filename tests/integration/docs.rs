//! The command examples of the README and `docs/`, verified by `lessonprobe doc` itself: every
//! `console` block is a terminal session whose `$ lessonprobe …` lines run the built binary from
//! the repository root (a `lessonprobe` on the sessions' PATH that starts in a folder of the
//! repository's links, [`Dir::like_repo`], so that what the runs write stays out of the
//! checkout), with the lines
//! under each as its expected output (`[..]`, `...`) and `? N` as its exit status.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use lessonprobe_testkit::{bin, lessonprobe, repo, services, Dir};

/// The pages whose examples are verified, and how many `console` blocks each holds at the top
/// level (a line that is exactly the opening fence), counted here without lessonprobe's reader.
fn pages() -> Vec<(PathBuf, usize)> {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
        .into_iter()
        .map(|page| {
            let text = std::fs::read_to_string(&page).expect("a readable page");
            let blocks = text
                .lines()
                .filter(|l| l.trim_end() == "```console")
                .count();
            (page, blocks)
        })
        .collect()
}

#[test]
fn every_console_example_in_the_docs_holds_under_lessonprobe_doc() {
    let Some(python) = services::python() else {
        return;
    };
    let dir = Dir::new();
    let root = Dir::like_repo();
    // The examples are written as run from the repository root, with `lessonprobe` on PATH.
    let tools = dir.join("bin");
    std::fs::create_dir_all(&tools).unwrap();
    let quoted = |p: PathBuf| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let wrapper = tools.join("lessonprobe");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncd {} && exec {} \"$@\"\n",
            quoted(root.to_path_buf()),
            quoted(bin())
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let pages = pages();
    let ran = lessonprobe()
        .current_dir(&dir)
        .args(["doc", "--format", "json", "--no-junit"])
        .args(pages.iter().map(|(p, _)| p))
        .env("PATH", path)
        // A lesson's run commands take the sample course's interpreter.
        .env("LESSONPROBE_PYTHON", &python)
        .spawn()
        .within(Duration::from_secs(300))
        .status_among(&[0, 1]);
    let report = ran.json();
    let outcomes = report["outcomes"].as_array().expect("outcomes");
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| o["verdict"] != "PASS")
        .map(|o| {
            format!(
                "{}:{} {}: {}\n{}",
                o["file"].as_str().unwrap_or("?"),
                o["line"],
                o["verdict"],
                o["message"].as_str().unwrap_or(""),
                o["diff"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert!(
        failed.is_empty(),
        "examples that do not hold:\n{}",
        failed.join("\n")
    );
    // Every console block of every page ran, each as one terminal session.
    for (page, blocks) in &pages {
        let sessions = outcomes
            .iter()
            .filter(|o| {
                o["file"].as_str().map(PathBuf::from).as_ref() == Some(page)
                    && o["name"] == "terminal session"
            })
            .count();
        assert_eq!(sessions, *blocks, "{}", page.display());
    }
    let total: usize = pages.iter().map(|(_, n)| n).sum();
    assert!(total >= 5, "the docs hold console examples: {pages:?}");
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
}

/// `docs/development.md` is the contributor's map: it names every folder of `src/` and
/// `ticketflow/src/` (`src/lesson/isolation/`), every module of `src/commands/`
/// (`src/commands/run/builder.rs`) and every integration test module
/// (`tests/integration/cli.rs`) by its path, as they are on disk.
#[test]
fn the_contributor_map_names_every_folder_command_module_and_test_module() {
    let page = std::fs::read_to_string(repo().join("docs/development.md"))
        .expect("docs/development.md is readable");
    let mut wanted = Vec::new();
    for root in ["src", "ticketflow/src"] {
        let mut folders = Vec::new();
        walk(&repo().join(root), &mut folders, &mut Vec::new());
        wanted.extend(folders.iter().map(|f| format!("{}/", relative(f))));
    }
    let (mut folders, mut files) = (Vec::new(), Vec::new());
    walk(&repo().join("src/commands"), &mut folders, &mut files);
    wanted.extend(
        files
            .iter()
            .filter(|f| !f.ends_with("src/commands/mod.rs"))
            .map(|f| relative(f)),
    );
    let tests = std::fs::read_dir(repo().join("tests/integration"))
        .expect("tests/integration is readable")
        .map(|e| e.expect("a tests/integration entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"));
    wanted.extend(tests.map(|p| relative(&p)));
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|path| !page.contains(&format!("`{path}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/development.md does not name (as `PATH`): {missing:?}"
    );
    assert!(wanted.len() > 60, "the tree was read: {wanted:?}");
}

/// Every folder under `dir` (itself included) and every `.rs` file in them.
fn walk(dir: &std::path::Path, folders: &mut Vec<PathBuf>, files: &mut Vec<PathBuf>) {
    folders.push(dir.to_owned());
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("a readable source folder")
        .map(|e| e.expect("a source folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, folders, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `path` relative to the repository, with `/` between its parts.
fn relative(path: &std::path::Path) -> String {
    path.strip_prefix(repo())
        .expect("a path in the repository")
        .to_string_lossy()
        .into_owned()
}
