//! The command examples of the README and `docs/`: every `console` block's `$ lessonprobe …`
//! line runs against the built binary from the repository root, with the lines under it as the
//! expected output (stdout, then stderr; `[..]` stands for any text within a line and a line
//! `...` for any lines) and a line `? N` as its exit status (0 when absent). A `text` block
//! shows output without running anything (an example on a course that is not in the repository).

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::{lessonprobe, repo, services};

/// One `$ lessonprobe …` line of a console block, and what it must print.
#[derive(Debug)]
struct Example {
    place: String,
    args: Vec<String>,
    expected: String,
    status: i32,
}

/// The Markdown files whose examples are verified.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Every example of `page`, named `FILE:LINE` by its `$` line.
fn examples_of(page: &Path) -> Vec<Example> {
    let text = std::fs::read_to_string(page).expect("a readable page");
    let name = page
        .strip_prefix(repo())
        .unwrap_or(page)
        .display()
        .to_string();
    let mut examples: Vec<Example> = Vec::new();
    let mut in_console = false;
    for (i, line) in text.lines().enumerate() {
        if !in_console {
            in_console = line.trim_end() == "```console";
            continue;
        }
        if line.trim_end() == "```" {
            in_console = false;
        } else if let Some(command) = line.strip_prefix("$ ") {
            let words = shlex::split(command)
                .unwrap_or_else(|| panic!("{name}:{}: unbalanced quotes", i + 1));
            assert_eq!(
                words.first().map(String::as_str),
                Some("lessonprobe"),
                "{name}:{}: a console example runs lessonprobe only",
                i + 1
            );
            examples.push(Example {
                place: format!("{name}:{}", i + 1),
                args: words[1..].to_vec(),
                expected: String::new(),
                status: 0,
            });
        } else if let Some(example) = examples.last_mut() {
            match line.strip_prefix("? ").map(str::parse::<i32>) {
                Some(Ok(status)) => example.status = status,
                _ => {
                    example.expected.push_str(line);
                    example.expected.push('\n');
                }
            }
        }
    }
    examples
}

#[test]
fn every_console_example_in_the_docs_runs_as_written() {
    let Some(python) = services::python() else {
        return;
    };
    let examples: Vec<Example> = pages().iter().flat_map(|p| examples_of(p)).collect();
    assert!(
        examples.len() >= 5,
        "the docs hold console examples: {examples:?}"
    );
    for example in &examples {
        let outcome = std::panic::catch_unwind(|| {
            lessonprobe()
                .in_repo()
                .args(&example.args)
                // A lesson's run commands take the sample course's interpreter.
                .env("LESSONPROBE_PYTHON", &python)
                .within(Duration::from_secs(180))
                .output_matches(example.expected.clone())
                .status(example.status)
        });
        if let Err(why) = outcome {
            let why = why
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a panic".into());
            panic!("{}: the example does not hold:\n{why}", example.place);
        }
    }
}

#[test]
fn a_console_example_names_its_status_and_elided_output() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let page = dir.path().join("page.md");
    std::fs::write(
        &page,
        "text\n\n```console\n$ lessonprobe replay --topic 't x'\n? 2\nlessonprobe: [..]\n$ lessonprobe list\n...\n```\n\n```sh\n$ not an example\n```\n",
    )
    .expect("write the page");
    let examples = examples_of(&page);
    assert_eq!(examples.len(), 2, "{examples:?}");
    assert_eq!(examples[0].args, ["replay", "--topic", "t x"]);
    assert_eq!(examples[0].status, 2);
    assert_eq!(examples[0].expected, "lessonprobe: [..]\n");
    assert!(
        examples[0].place.ends_with("page.md:4"),
        "{}",
        examples[0].place
    );
    assert_eq!(
        (examples[1].status, examples[1].expected.as_str()),
        (0, "...\n")
    );
}
