//! `lessonprobe bless` as a run: Ctrl-C stops its probes (exit 130, no process and no scratch
//! folder left), and the preflight stops it before anything runs (one `ERROR environment:`,
//! the lesson untouched).

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::process::group_gone;
use lessonprobe_testkit::*;

/// A course in `dir/course` with `config` as its lessonprobe.toml and `lesson` as lesson 48;
/// the lesson's path.
fn course_with(dir: &Dir, config: &str, lesson: &str) -> (PathBuf, PathBuf) {
    dir.write("course/project/data.txt", "from the project\n");
    dir.write("course/lessonprobe.toml", config);
    let file = dir.write("course/lessons/48-bless.md", lesson);
    (dir.join("course"), file)
}

/// `lessonprobe bless --lesson 48 --course COURSE`, run in `dir`.
fn bless(dir: &Path, course: &Path) -> Test {
    lessonprobe()
        .current_dir(dir)
        .args(["bless", "--lesson", "48", "--course"])
        .arg(course)
}

/// Two exercises whose expected output went stale; the second records its process group in
/// `pid` and sleeps far past any test.
fn stale_lesson(pid: &Path) -> String {
    format!(
        "# Bless\n\n### Answer EX-48-01 [code]\n\nRun:\n\n```sh\necho new\n```\n\nExpected output:\n\n```text\nold\n```\n\n### Answer EX-48-02 [code]\n\nRun:\n\n```sh\necho $$ > {}; sleep 87; echo new\n```\n\nExpected output:\n\n```text\nold\n```\n",
        pid.display()
    )
}

#[test]
fn ctrl_c_during_bless_ends_it_with_130_and_leaves_no_process_or_scratch_folder() {
    let dir = Dir::new();
    let pid = dir.join("sleeper.pid");
    let lesson_text = stale_lesson(&pid);
    let (course, lesson) = course_with(&dir, "", &lesson_text);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut running = bless(dir.path(), &course)
        .args(["--jobs", "2"])
        .env("TMPDIR", &tmp)
        .spawn();
    wait_for(&pid, Duration::from_secs(30));
    let pgid: i32 = dir.read("sleeper.pid").trim().parse().unwrap();
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(30)).status(130);
    assert!(
        group_gone(pgid),
        "the sleeper's process group outlived bless"
    );
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        std::fs::read_to_string(&lesson).unwrap(),
        lesson_text,
        "an interrupted bless rewrites nothing"
    );
}

#[test]
fn bless_with_a_missing_interpreter_reports_the_preflight_error_and_rewrites_nothing() {
    let dir = Dir::new();
    let lesson_text = stale_lesson(&dir.join("never.pid")).replace("sleep 87", "true");
    let config = "python = \"no-such-python-3.99\"\n";
    let (course, lesson) = course_with(&dir, config, &lesson_text);
    let ran = bless(dir.path(), &course)
        .stdout_has("ERROR   environment: python")
        .stdout_has("no-such-python-3.99")
        .stdout_lacks("blessed 1")
        .within(Duration::from_secs(20))
        .failure();
    assert_eq!(
        ran.stdout_lines_starting("ERROR"),
        1,
        "one ERROR, the preflight's: {}",
        ran.stdout
    );
    assert_eq!(
        std::fs::read(&lesson).unwrap(),
        lesson_text.as_bytes(),
        "bless rewrote the lesson"
    );
}
