//! `lessonprobe doc` on a README someone else wrote (addict 2.4.0's, vendored with its package
//! and license under `tests/readmes/`) and on every form of Python session, judged block by
//! block against Python's own doctest.

use std::path::Path;

use lessonprobe_testkit::*;

/// (line of the opening fence, verdict, line of the failing example or statement).
type Verdict = (u64, String, Option<u64>);

/// What Python's doctest says of each block, through the reference of
/// `benches/doctest_agreement.py` (its own Markdown reader, doctest for sessions, `exec` for
/// plain code, one namespace in document order), in `dir`.
fn reference(readme: &Path, package: &Path, dir: &Dir) -> Vec<Verdict> {
    let out = dir.join("reference.json");
    Test::new("python3")
        .arg(repo().join("benches/doctest_agreement.py"))
        .arg("--reference")
        .arg(readme)
        .arg("--out")
        .arg(&out)
        .current_dir(dir)
        .env("PYTHONPATH", package)
        .env("PYTHONHASHSEED", "0")
        .env("TZ", "UTC")
        .env("LC_ALL", "C.UTF-8")
        .success();
    let blocks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    blocks
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["line"].as_u64().unwrap(),
                b["verdict"].as_str().unwrap().to_owned(),
                b["failing"].as_u64(),
            )
        })
        .collect()
}

/// What `lessonprobe doc` says of each block, in the same terms.
fn lessonprobe_doc(readme: &Path, package: &Path) -> Vec<Verdict> {
    let ran = lessonprobe()
        .args([
            "doc",
            "--python",
            "python3",
            "--format",
            "json",
            "--no-junit",
        ])
        .arg(readme)
        .env("PYTHONPATH", package)
        .failure();
    ran.json()["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_eq!(o["file"].as_str(), readme.to_str(), "{o}");
            let verdict = o["verdict"].as_str().unwrap().to_owned();
            // A failure names the failing example's line first: FILE:LINE: what happened.
            let failing = (verdict != "PASS").then(|| {
                let message = o["message"].as_str().unwrap_or_default();
                let (at, _) = message.split_once(": ").unwrap_or_default();
                at.rsplit(':')
                    .next()
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0)
            });
            (o["line"].as_u64().unwrap(), verdict, failing)
        })
        .collect()
}

#[test]
fn a_real_readme_gets_python_doctests_verdict_for_every_block() {
    if !tool("python3") {
        return;
    }
    let package = repo().join("tests/readmes/addict-2.4.0");
    let readme = package.join("README.md");
    let dir = Dir::new();
    let doctest = reference(&readme, &package, &dir);

    let ours = lessonprobe_doc(&readme, &package);
    assert_eq!(ours, doctest, "lessonprobe doc against Python's doctest");

    // What doctest says today, written out, so that neither side drifts unseen: five of the
    // README's seventeen blocks are stale (a name never defined, a session that shows output a
    // statement does not print, a traceback written as a continuation).
    let fail = |line, at| (line, "FAIL".to_owned(), Some(at));
    let pass = |line| (line, "PASS".to_owned(), None);
    let expected: Vec<Verdict> = vec![
        pass(7),
        fail(22, 23),
        pass(45),
        pass(55),
        pass(62),
        pass(67),
        fail(77, 80),
        pass(84),
        pass(91),
        pass(101),
        fail(115, 116),
        fail(125, 126),
        fail(133, 137),
        pass(145),
        pass(164),
        pass(182),
        pass(189),
    ];
    assert_eq!(doctest, expected, "Python's doctest on addict's README");
}

#[test]
fn every_python_session_form_gets_python_doctests_verdict() {
    if !tool("python3") {
        return;
    }
    // ~~~ fences, python-repl, doctest, MyST {doctest} with :options:, a list item's fenced and
    // indented sessions, a longer fence holding ```, no-run, a tab doctest expands, a block
    // quote, an HTML comment, an indented session right under a fence, a capitalised PyCon.
    let readme = repo().join("tests/readmes/forms.md");
    let dir = Dir::new();
    let doctest = reference(&readme, dir.path(), &dir);
    assert_eq!(doctest.len(), 16, "{doctest:?}");
    assert_eq!(
        doctest.iter().filter(|v| v.1 == "FAIL").count(),
        3,
        "{doctest:?}"
    );
    assert_eq!(lessonprobe_doc(&readme, dir.path()), doctest);
}
