//! The outputs read in CI and by a student at the terminal, end to end on a small course with
//! failing exercises: GitHub Actions annotations and step summary (only under
//! GITHUB_ACTIONS=true), NDJSON events, the failure recap with its rerun commands, SLOW
//! notices, and the HTML report rendered by a real headless Chromium. Each agrees with the
//! exit code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::*;

/// Lesson 41: one exercise passes, one prints the wrong text (with `%`, `:` and `,` in it),
/// one exits 4, one sleeps past the slow threshold and passes, and a block no label binds.
const LESSON: &str = "# CI outputs

### Answer EX-41-01 [code]

Run:

```sh
cat data.txt
```

Expected output:

```text
from the project
```

### Answer EX-41-02 [code]

Run:

```sh
printf 'one\\ntwo: 100%%, three\\n'
```

Expected output:

```text
one
two
```

### Answer EX-41-03 [code]

Run:

```sh
sleep 2; echo slept
```

Expected output:

```text
slept
```

### Answer EX-41-04 [code]

Run:

```sh
exit 4
```

A block no label binds:

```sh
echo who runs me
```
";

/// The manifest of lesson 41: a command probe that fails, so a manifest's place is annotated.
fn manifest41() -> String {
    Manifest::lesson(41, "CI outputs")
        .probe(
            Probe::script("L41-01", "echo elsewhere; exit 3")
                .name("manifest-check")
                .claim("The project's data file says where it is from.")
                .expect("from the project"),
        )
        .to_string()
}

/// The course in `dir/course` and the manifests in `dir/checkpoints`.
fn course(dir: &Path) -> (PathBuf, PathBuf) {
    let course = dir.join("course");
    std::fs::create_dir_all(course.join("lessons")).unwrap();
    std::fs::create_dir_all(course.join("project")).unwrap();
    std::fs::write(course.join("project/data.txt"), "from the project\n").unwrap();
    std::fs::write(course.join("lessonprobe.toml"), "").unwrap();
    std::fs::write(course.join("lessons/41-ci.md"), LESSON).unwrap();
    let checkpoints = dir.join("checkpoints");
    std::fs::create_dir_all(&checkpoints).unwrap();
    std::fs::write(checkpoints.join("41-ci.toml"), manifest41()).unwrap();
    (course, checkpoints)
}

/// `lessonprobe --lesson 41` on the course, no JUnit, outside GitHub Actions unless told.
fn run41(dir: &Dir) -> Test {
    let (course, checkpoints) = course(dir);
    dir.lessonprobe()
        .args(["--lesson", "41", "--no-junit", "--course"])
        .arg(course)
        .arg("--checkpoints")
        .arg(checkpoints)
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_WORKSPACE")
}

/// A workflow command: its kind, properties and message, unescaped.
#[derive(Debug)]
struct Command {
    kind: String,
    props: BTreeMap<String, String>,
    message: String,
}

fn unescape(text: &str) -> String {
    text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
}

/// Every `::KIND props::message` line of `out`; a property or message holding a raw `:` pair
/// or line break could not have been parsed.
fn commands(out: &str) -> Vec<Command> {
    out.lines()
        .filter_map(|l| l.strip_prefix("::"))
        .map(|rest| {
            let (head, message) = rest
                .split_once("::")
                .expect("a command has '::' before its message");
            let (kind, props) = head.split_once(' ').unwrap_or((head, ""));
            let props = props
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').expect("a property is key=value");
                    assert!(
                        !v.contains(':') && !v.contains(','),
                        "unescaped property {p:?}"
                    );
                    (k.to_owned(), unescape(v))
                })
                .collect();
            assert!(!message.contains('\n'), "unescaped message");
            Command {
                kind: kind.to_owned(),
                props,
                message: unescape(message),
            }
        })
        .collect()
}

#[test]
fn github_actions_gets_an_error_per_failure_a_warning_per_uncollected_block_and_a_summary() {
    let dir = Dir::new();
    let summary = dir.join("step-summary.md");
    std::fs::write(&summary, "from an earlier step\n").unwrap();
    let ran = run41(&dir)
        .in_github_actions(&summary)
        .env("GITHUB_WORKSPACE", dir.path())
        .failure();
    let found = commands(&ran.stdout);
    let errors: Vec<&Command> = found.iter().filter(|c| c.kind == "error").collect();
    assert_eq!(errors.len(), 3, "{found:#?}");
    let by_title = |title: &str| {
        errors
            .iter()
            .find(|c| c.props.get("title").map(String::as_str) == Some(title))
            .unwrap_or_else(|| panic!("no ::error titled {title:?}: {found:#?}"))
    };
    // Paths are the repository's: relative to GITHUB_WORKSPACE.
    let wrong = by_title("FAIL EX-41-02 exercise");
    assert_eq!(wrong.props["file"], "course/lessons/41-ci.md");
    assert_eq!(
        wrong.props["line"],
        line_of(LESSON, "### Answer EX-41-02 [code]").to_string()
    );
    assert!(
        wrong.message.starts_with("course/lessons/41-ci.md:"),
        "{}",
        wrong.message
    );
    assert!(
        wrong.message.contains("output differs"),
        "{}",
        wrong.message
    );
    assert!(
        wrong.message.contains("\n-two\n+two: 100%, three"),
        "{}",
        wrong.message
    );
    let exit4 = by_title("FAIL EX-41-04 exercise");
    assert_eq!(
        exit4.props["line"],
        line_of(LESSON, "### Answer EX-41-04 [code]").to_string()
    );
    let manifest = by_title("FAIL L41-01 manifest-check");
    assert_eq!(manifest.props["file"], "checkpoints/41-ci.toml");
    assert_eq!(
        manifest.props["line"],
        line_of(&manifest41(), "id = \"L41-01\"").to_string()
    );
    let warnings: Vec<&Command> = found.iter().filter(|c| c.kind == "warning").collect();
    assert_eq!(warnings.len(), 1, "{found:#?}");
    assert_eq!(warnings[0].props["file"], "course/lessons/41-ci.md");
    assert_eq!(
        warnings[0].props["line"],
        (line_of(LESSON, "echo who runs me") - 1).to_string()
    );

    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.starts_with("from an earlier step\n## lessonprobe: failed"),
        "{md}"
    );
    assert!(
        md.contains("| passed | failed | errors | skipped | pending | flaky | not run |\n|---:|---:|---:|---:|---:|---:|---:|\n| 2 | 3 | 0 | 0 | 0 | 0 | 0 |"),
        "{md}"
    );
    let rows: Vec<Vec<&str>> = md
        .lines()
        .filter(|l| l.starts_with("| FAIL") || l.starts_with("| ERROR"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 3, "{md}");
    let row = rows
        .iter()
        .find(|r| r[2] == "EX-41-02 exercise")
        .unwrap_or_else(|| panic!("{md}"));
    assert_eq!(row[..2], ["FAIL", "41"]);
    assert_eq!(
        row[3],
        format!(
            "`course/lessons/41-ci.md:{}`",
            line_of(LESSON, "### Answer EX-41-02 [code]")
        )
    );
    assert_eq!(
        row[4],
        format!(
            "course/lessons/41-ci.md:{}: output differs from the expected output",
            line_of(LESSON, "one") - 1
        )
    );

    // Without the variable, none of it; with --annotations none, none either.
    let quiet = dir.join("quiet.md");
    let ran = run41(&dir)
        .env("GITHUB_STEP_SUMMARY", &quiet)
        .stdout_lacks("::error")
        .stdout_lacks("::warning")
        .failure();
    assert!(!ran.stderr.contains("::"), "{}", ran.stderr);
    run41(&dir)
        .args(["--annotations", "none"])
        .in_github_actions(&quiet)
        .stdout_lacks("::error")
        .failure();
    assert!(
        !quiet.exists(),
        "a step summary was written outside GitHub Actions"
    );

    // JSON keeps standard output to itself: the commands go to standard error.
    let ran = run41(&dir)
        .args(["--format", "json"])
        .env("GITHUB_ACTIONS", "true")
        .failure();
    assert_eq!(ran.json()["succeeded"], false);
    assert_eq!(
        commands(&ran.stderr)
            .iter()
            .filter(|c| c.kind == "error")
            .count(),
        3,
        "{}",
        ran.stderr
    );

    // A green run says so, and exits 0.
    let green = dir.join("green.md");
    run41(&dir)
        .args(["--select", "EX-41-01"])
        .in_github_actions(&green)
        .stdout_lacks("::error")
        .success();
    let md = std::fs::read_to_string(&green).unwrap();
    assert!(md.starts_with("## lessonprobe: passed"), "{md}");
}

#[test]
fn ndjson_tells_each_event_as_it_happens_and_ends_with_counts_that_match_the_exit_code() {
    let dir = Dir::new();
    for (select, code) in [(None, 1), (Some("EX-41-01"), 0)] {
        let mut test = run41(&dir).args(["--format", "ndjson"]);
        if let Some(select) = select {
            test = test.args(["--select", select]);
        }
        let ran = test.status(code);
        let events: Vec<serde_json::Value> = ran
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect();
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
        let planned = events[0]["cases"].as_array().unwrap().len();
        assert_eq!(planned, if select.is_some() { 1 } else { 5 });
        for index in 0..planned {
            let at = |kind: &str| {
                events
                    .iter()
                    .position(|e| e["event"] == kind && e["index"] == index)
                    .unwrap_or_else(|| panic!("no {kind} for case {index}: {kinds:?}"))
            };
            assert!(at("case_started") < at("case_finished"), "{kinds:?}");
        }
        let last = events.last().unwrap();
        assert_eq!(last["exit_code"], code);
        assert_eq!(last["succeeded"], code == 0);
        let failed =
            last["counts"]["failed"].as_u64().unwrap() + last["counts"]["errors"].as_u64().unwrap();
        assert_eq!(failed > 0, code != 0, "{last}");
        let finished: usize = events
            .iter()
            .filter(|e| e["event"] == "case_finished")
            .map(|e| e["outcomes"].as_array().unwrap().len())
            .sum();
        assert_eq!(finished, planned);
    }
    // `list` writes one checkpoint per line.
    let listed = dir
        .lessonprobe()
        .args(["list", "--format", "ndjson", "--checkpoints"])
        .arg(dir.join("checkpoints"))
        .success();
    let lessons: Vec<u64> = listed
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["lesson"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(lessons, [41]);
}

#[test]
fn the_recap_lists_each_failure_with_a_command_that_reruns_exactly_it_and_slow_cases_are_told() {
    let dir = Dir::new();
    let ran = run41(&dir).args(["--slow-after", "1s"]).failure();
    // stdout is a pipe here, not a terminal: the notice is printed all the same.
    assert!(
        ran.stdout
            .contains("SLOW    [>  1.000s] lesson 41 EX-41-03 exercise\n"),
        "{}",
        ran.stdout
    );
    let recap = ran
        .stdout
        .split("\nfailures (3), each rerun alone by its command:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no recap: {}", ran.stdout));
    let lines: Vec<&str> = recap.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 6, "{recap}");
    // The closing line stays the last.
    let closing = ran.stdout.lines().last().unwrap();
    assert!(closing.starts_with("2 passed, 3 failed, "), "{closing}");
    let course = dir.join("course");
    for (pair, (id, place)) in lines.chunks(2).zip([
        (
            "L41-01",
            format!(
                "{}:{}",
                dir.join("checkpoints/41-ci.toml").display(),
                line_of(&manifest41(), "id = \"L41-01\"")
            ),
        ),
        (
            "EX-41-02",
            format!(
                "{}/lessons/41-ci.md:{}",
                course.display(),
                line_of(LESSON, "### Answer EX-41-02 [code]")
            ),
        ),
        (
            "EX-41-04",
            format!(
                "{}/lessons/41-ci.md:{}",
                course.display(),
                line_of(LESSON, "### Answer EX-41-04 [code]")
            ),
        ),
    ]) {
        assert!(pair[0].starts_with("FAIL    "), "{recap}");
        assert!(
            pair[0].contains(&format!(" {place} lesson 41 {id} ")),
            "{pair:?}"
        );
        let words = shlex::split(pair[1].trim()).expect("a shell command");
        // Run as printed, it selects that probe and no other.
        let rerun = Test::new(&words[0])
            .args(&words[1..])
            .args(["--format", "json", "--no-junit"])
            .current_dir(dir.path())
            .failure();
        let doc = rerun.json();
        assert_eq!(outcome_ids(&doc), [id], "{}", pair[1]);
    }
    // Nothing failed: no recap.
    run41(&dir)
        .args(["--select", "EX-41-01"])
        .stdout_lacks("failures (")
        .stdout_lacks("SLOW")
        .success();
}

/// The page as Chromium renders it: its DOM after load, with the text a reader sees (
/// `innerText`, which leaves out what is hidden or folded) and the number of diff lines not
/// visible written into it by a script the test adds to a copy.
fn rendered(chromium: &str, page: &Path, dir: &Path) -> (String, String) {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = r#"<script>
const seen = document.createElement('pre'); seen.id = 'seen-text';
seen.textContent = document.body.innerText;
const hidden = [...document.querySelectorAll('pre.diff span')].filter(s => !s.checkVisibility()).length;
document.body.setAttribute('data-hidden-diff-lines', String(hidden));
document.body.appendChild(seen);
</script></body>"#;
    let copy = dir.join("rendered.html");
    std::fs::write(&copy, html.replace("</body>", probe)).unwrap();
    let ran = Test::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium-profile").display()
        ))
        .arg("--dump-dom")
        .arg(format!("file://{}", copy.display()))
        .within(Duration::from_secs(90))
        .success();
    let dom = ran.stdout;
    let seen = dom
        .split("<pre id=\"seen-text\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("the page did not render: {dom}"))
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    (dom, seen)
}

#[test]
fn the_html_report_renders_in_a_browser_with_the_counts_the_diff_and_the_verified_revision() {
    let Some(chromium) = service(
        "LESSONPROBE_TEST_CHROMIUM",
        "a headless Chromium (Debian's chromium)",
    ) else {
        return;
    };
    let dir = Dir::new();
    let page = dir.join("reports/course.html");
    run41(&dir).arg("--html").arg(&page).failure();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page refers to the network: {html}"
    );
    let (dom, seen) = rendered(&chromium, &page, dir.path());
    for shown in [
        "lessonprobe: failed",
        "2 passed, 3 failed, 0 errors, 0 skipped, 0 pending",
        "\n-two\n+two: 100%, three\n",
        "EX-41-04 exercise",
        "the checkout as it is on disk",
    ] {
        assert!(seen.contains(shown), "{shown:?} is not shown: {seen}");
    }
    assert!(
        dom.contains("data-hidden-diff-lines=\"0\""),
        "diff lines are hidden: {dom}"
    );

    // A revision: the page says which one was verified.
    if !tool("git") {
        return;
    }
    git_first_commit(&dir, "course");
    let commit = git(&dir, &["rev-parse", "HEAD"]).stdout.trim().to_owned();
    let at_rev = dir.join("reports/rev.html");
    run41(&dir)
        .args(["--select", "EX-41-01", "--rev", "HEAD", "--html"])
        .arg(&at_rev)
        .success();
    let (_, seen) = rendered(&chromium, &at_rev, dir.path());
    assert!(seen.contains("lessonprobe: passed"), "{seen}");
    assert!(
        seen.contains(&format!("revision HEAD (commit {})", &commit[..12])),
        "{seen}"
    );
}

#[test]
fn a_run_with_nothing_to_verify_says_so_in_the_step_summary() {
    if !tool("git") {
        return;
    }
    let dir = Dir::new();
    let (course, _) = course(&dir);
    git_first_commit(&dir, "course");
    let summary = dir.join("summary.md");
    dir.lessonprobe()
        .args(["--no-junit", "--changed-since", "HEAD", "--course"])
        .arg(&course)
        .in_github_actions(&summary)
        .stdout_has("nothing to verify")
        .success();
    assert_eq!(
        std::fs::read_to_string(&summary).unwrap(),
        "## lessonprobe: nothing to verify\n\nno lesson file or project file changed since HEAD.\n\n"
    );
}
