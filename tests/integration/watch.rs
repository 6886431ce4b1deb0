//! `--watch` through the built binary: a change reruns the selection exactly once, the probes
//! that failed first; a change during a run stops its probes and starts the next run; a change
//! to the course's project reaches the next run; what git ignores and the run's own reports
//! start nothing; Ctrl-C ends the loop with no process and no temporary folder left.

use std::path::Path;
use std::time::Duration;

use lessonprobe_testkit::process::group_gone;
use lessonprobe_testkit::*;

/// Lesson 94: a probe that passes, then one that fails until `fixed` exists; each notes its
/// run in `$WATCH_LOG`, outside the watched folder.
fn two() -> String {
    Manifest::lesson(94, "watch")
        .probe(Probe::script("W-B", r#"echo B >> "$WATCH_LOG""#).name("passes"))
        .probe(
            Probe::script("W-A", r#"echo A >> "$WATCH_LOG"; test -f fixed"#)
                .name("fails-until-fixed"),
        )
        .to_string()
}

/// Lesson 95: a probe that notes its process group in `$WATCH_LOG` and sleeps past any test.
fn sleeper() -> String {
    Manifest::lesson(95, "watch")
        .probe(
            Probe::script("W-SLEEP", r#"echo $$ >> "$WATCH_LOG"; exec sleep 97"#)
                .name("sleeps")
                .timeout("120s"),
        )
        .to_string()
}

/// How long a step of a test may take on a loaded machine.
const STEP: Duration = Duration::from_secs(60);

/// How long nothing must happen for a test to conclude that nothing will: well past the quiet
/// time the changes are debounced with.
const SETTLE: Duration = Duration::from_secs(3);

fn waits(stderr: &str) -> usize {
    stderr.matches("waiting for a change").count()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The verdicts of a JUnit report, in its order.
fn report_verdicts(path: &Path) -> Vec<String> {
    verdicts(&parse_junit(path))
        .into_iter()
        .map(|(_, verdict)| verdict)
        .collect()
}

/// Every entry of the folder the run's temporary files went to.
fn left_in(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A watch of `lesson` in `dir`, its probes' notes in `outside/watch.log`, its temporary
/// files in `outside/tmp`, its kept working copies in `outside/cache`, saying what bringing
/// them up copied.
fn watch(dir: &Dir, outside: &Dir, lesson: &str) -> Running {
    std::fs::create_dir_all(outside.join("tmp")).unwrap();
    dir.lessonprobe()
        .args(["--lesson", lesson, "--jobs", "1", "--watch"])
        .env("WATCH_LOG", outside.join("watch.log"))
        .env("TMPDIR", outside.join("tmp"))
        .env("XDG_CACHE_HOME", outside.join("cache"))
        .env("RUST_LOG", "lessonprobe::lesson::isolation=debug")
        .spawn()
}

#[test]
fn a_change_reruns_once_the_failed_probe_first_and_ctrl_c_leaves_nothing() {
    let (dir, outside) = (Dir::new(), Dir::new());
    dir.write("checkpoints/94-watch.toml", two());
    std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
    let log = outside.join("watch.log");
    let mut running = watch(&dir, &outside, "94");
    running.wait_for_stderr("the first run", STEP, |e| waits(e) == 1);
    assert_eq!(lines(&log), ["B", "A"]);
    assert!(
        dir.join("reports/lesson-94.xml").exists(),
        "the first run wrote no JUnit report"
    );

    // What git ignores, editors' swap files and the run's own reports start nothing.
    dir.write("build/out.bin", "x");
    dir.write(".fixed.swp", "x");
    dir.write("reports/lesson-94.xml", "<testsuites/>");
    std::thread::sleep(SETTLE);
    assert_eq!(
        waits(&running.stderr_so_far()),
        1,
        "an ignored change reran"
    );

    dir.write("fixed", "");
    running.wait_for_stderr("the rerun", STEP, |e| waits(e) == 2);
    std::thread::sleep(SETTLE);
    let stderr = running.stderr_so_far();
    assert_eq!(
        waits(&stderr),
        2,
        "one change, more than one rerun:\n{stderr}"
    );
    assert!(
        stderr.contains("run 2, after a change to fixed"),
        "the rerun does not say why:\n{stderr}"
    );
    // The probe that failed ran first, and now passes.
    assert_eq!(lines(&log), ["B", "A", "A", "B"]);
    assert_eq!(
        report_verdicts(&dir.join("reports/lesson-94.xml")),
        ["PASS", "PASS"]
    );

    running.signal(libc::SIGINT);
    let ran = running.within(Duration::from_secs(30)).status(130);
    assert!(ran.stdout.contains("2 passed, 0 failed"), "{}", ran.stdout);
    assert_eq!(left_in(&outside.join("tmp")), Vec::<String>::new());
}

#[test]
fn a_change_during_a_run_stops_its_probes_and_starts_the_next_run() {
    let (dir, outside) = (Dir::new(), Dir::new());
    dir.write("checkpoints/95-watch.toml", sleeper());
    let log = outside.join("watch.log");
    let mut running = watch(&dir, &outside, "95");
    running.wait_for_stderr("the sleeper", STEP, |_| lines(&log).len() == 1);
    let first: i32 = lines(&log)[0].parse().unwrap();

    dir.write("notes.txt", "edited");
    running.wait_for_stderr("the restarted sleeper", STEP, |_| lines(&log).len() == 2);
    assert!(
        group_gone(first),
        "the first run's probe outlived its restart"
    );
    let second: i32 = lines(&log)[1].parse().unwrap();
    let stderr = running.stderr_so_far();
    assert!(
        stderr.contains("run 2, after a change to notes.txt"),
        "{stderr}"
    );

    running.signal(libc::SIGINT);
    let ran = running.within(Duration::from_secs(30)).status(130);
    assert!(
        ran.stdout.contains("RESTARTING: a watched file changed"),
        "{}",
        ran.stdout
    );
    assert!(group_gone(second), "the probe outlived Ctrl-C");
    assert_eq!(
        waits(&ran.stderr),
        0,
        "a run ran to its end:\n{}",
        ran.stderr
    );
    assert_eq!(left_in(&outside.join("tmp")), Vec::<String>::new());
}

#[test]
fn a_change_to_the_courses_project_reaches_the_next_run() {
    let (dir, outside) = (Dir::new(), Dir::new());
    dir.write("lessonprobe.toml", "");
    dir.write("project/data.txt", "first\n");
    dir.write(
        "lessons/96-data.md",
        "# Data\n\n### Answer EX-96-01 [code]\n\nRun:\n\n```sh\ncat data.txt\n```\n\nExpected output:\n\n```text\nfirst\n```\n",
    );
    let mut running = watch(&dir, &outside, "96");
    running.wait_for_stderr("the first run", STEP, |e| waits(e) == 1);
    assert_eq!(
        report_verdicts(&dir.join("reports/lesson-96.xml")),
        ["PASS"]
    );

    dir.write("project/data.txt", "second\n");
    running.wait_for_stderr("the rerun", STEP, |e| waits(e) == 2);
    // The copy the watch kept was brought up to the change, that file alone: the probe saw the
    // new content.
    assert_eq!(
        report_verdicts(&dir.join("reports/lesson-96.xml")),
        ["FAIL"]
    );
    let stderr = running.stderr_so_far();
    let copied: Vec<&str> = stderr
        .lines()
        .filter_map(|l| Some(l.split_once("files copied: ")?.1))
        .collect();
    assert_eq!(copied, ["1", "1"], "{stderr}");
    assert_eq!(stderr.matches(": refreshed ").count(), 1, "{stderr}");
    assert!(stderr.contains(": refreshed data.txt\n"), "{stderr}");

    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(30)).status(130);
    assert_eq!(left_in(&outside.join("tmp")), Vec::<String>::new());
}

/// A watch whose temporary folder is inside the watched course (as CI jobs and dev containers
/// often set `TMPDIR`) never reacts to its own working copies, nor to what its probes write
/// there: one rerun per edit. The probe outlasts the quiet time, so its working copy would be
/// told as a change while it runs.
#[test]
fn a_watch_with_its_temporary_folder_inside_the_course_reruns_once_per_edit() {
    let dir = Dir::new();
    dir.write("lessonprobe.toml", "");
    dir.write("project/data.txt", "first\n");
    dir.write(
        "lessons/96-data.md",
        "# Data\n\n### Answer EX-96-01 [code]\n\nRun:\n\n```sh\ncat data.txt; mktemp; sleep 1\n```\n\nExpected output:\n\n```text\nfirst\n[..]\n```\n",
    );
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut running = dir
        .lessonprobe()
        .args(["--lesson", "96", "--jobs", "1", "--watch"])
        .env("TMPDIR", &tmp)
        .spawn();
    let reran = |e: &str| e.contains("run 2");
    running.wait_for_stderr("the first run", STEP, |e| waits(e) == 1 || reran(e));
    std::thread::sleep(SETTLE);
    let stderr = running.stderr_so_far();
    assert!(
        !reran(&stderr) && waits(&stderr) == 1,
        "the watch reacted to its own files:\n{stderr}"
    );

    dir.write("project/data.txt", "second\n");
    running.wait_for_stderr("the rerun", STEP, |e| waits(e) == 2);
    std::thread::sleep(SETTLE);
    let stderr = running.stderr_so_far();
    assert_eq!(
        (
            waits(&stderr),
            stderr.matches("lessonprobe --watch: run ").count()
        ),
        (2, 2),
        "one edit, not one rerun:\n{stderr}"
    );
    assert!(
        stderr.contains("run 2, after a change to project/data.txt\n"),
        "{stderr}"
    );
    assert_eq!(
        report_verdicts(&dir.join("reports/lesson-96.xml")),
        ["FAIL"]
    );
    running.signal(libc::SIGINT);
    running.within(Duration::from_secs(30)).status(130);
}

#[test]
fn a_broken_manifest_is_said_and_the_watch_goes_on() {
    let (dir, outside) = (Dir::new(), Dir::new());
    dir.write("checkpoints/94-watch.toml", two());
    dir.write("fixed", "");
    let mut running = watch(&dir, &outside, "94");
    running.wait_for_stderr("the first run", STEP, |e| waits(e) == 1);
    dir.write("checkpoints/94-watch.toml", "[checkpoint\n");
    running.wait_for_stderr("the error", STEP, |e| waits(e) == 2);
    let stderr = running.stderr_so_far();
    assert!(
        stderr.contains("94-watch.toml:1"),
        "the error does not name the file and line:\n{stderr}"
    );
    dir.write("checkpoints/94-watch.toml", two());
    running.wait_for_stderr("the mended run", STEP, |e| waits(e) == 3);
    let ran = {
        running.signal(libc::SIGINT);
        running.within(Duration::from_secs(30)).status(130)
    };
    assert_eq!(
        ran.stdout.matches("2 passed, 0 failed").count(),
        2,
        "{}",
        ran.stdout
    );
}

#[test]
fn watch_is_refused_with_a_fixed_revision_and_by_doc() {
    lessonprobe()
        .args(["--watch", "--rev", "HEAD"])
        .stderr_has("--watch")
        .status(2);
    let dir = Dir::new();
    dir.write("README.md", "# x\n");
    dir.lessonprobe()
        .args(["doc", "README.md", "--watch"])
        .stderr_has("lessonprobe doc takes no --watch")
        .status(2);
}

/// A folder named on the command line that does not exist is refused before anything is
/// watched (a watch of the rest would wait for ever on a mistyped `--course`).
#[test]
fn a_given_folder_that_does_not_exist_ends_the_watch_as_it_ends_a_run() {
    let dir = Dir::new();
    for (flag, said, status) in [
        ("--course", "course folder typo does not exist", 2),
        ("--checkpoints", "typo: cannot read checkpoint folder", 3),
    ] {
        dir.lessonprobe()
            .args([flag, "typo"])
            .stderr_has(said)
            .status(status);
        dir.lessonprobe()
            .args(["--watch", flag, "typo"])
            .within(STEP)
            .stderr_has(said)
            .status(status);
    }
}
