//! The sample course's lessons over services lessonprobe starts (34 and its Chinese twin 35:
//! Redis, PostgreSQL and the Kafka cluster, stopped and started between the steps): they PASS,
//! and a copy with the lesson's code broken FAILs at the step that shows it, naming its
//! FILE:LINE, with the steps after it not run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::services::python;
use lessonprobe_testkit::*;

/// What the lesson's steps need besides the interpreter: Redis and PostgreSQL's binaries.
fn services_installed() -> bool {
    services::redis() && services::pg_ctl().is_some()
}

/// A copy of the sample course in `dir/course`.
fn course_copy(dir: &Dir) -> PathBuf {
    let course = dir.join("course");
    copy_dir(&repo().join("examples/ticketflow-course"), &course);
    course
}

/// `lessonprobe --lesson LESSON` on the course copy.
fn run(dir: &Dir, python: &str, lesson: &str) -> Test {
    dir.lessonprobe()
        .args(["--course", "course", "--lesson", lesson, "--python", python])
        .args(["--no-junit", "--jobs", "4"])
        .within(Duration::from_secs(300))
}

/// The line of the opening fence of the expected-output block of exercise `id` in `text`.
fn expected_block(text: &str, id: &str) -> usize {
    let heading = line_of(text, &format!("### Answer {id} [code]"));
    let label = line_of_from(text, "Expected output:", heading);
    line_of_from(text, "```text", label)
}

/// Lesson `file` of the course copy: its path and text.
fn lesson(dir: &Dir, file: &str) -> (PathBuf, String) {
    let path = dir.join("course/lessons").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

#[test]
fn the_services_lessons_pass_in_english_and_chinese() {
    let Some(python) = python() else { return };
    if !services_installed() {
        return;
    }
    let dir = Dir::new();
    course_copy(&dir);
    for lesson in ["34", "35"] {
        let ran = run(&dir, &python, lesson).success();
        for step in 1..=5 {
            let id = format!("EX-{lesson}-0{step}");
            assert!(
                ran.stdout
                    .lines()
                    .any(|l| l.starts_with("PASS") && l.contains(&id)),
                "{id} did not pass:\n{}",
                ran.stdout
            );
        }
    }
    nothing_left(&dir);
}

/// Broken variants of the lesson's code, each with the step that must FAIL: `file` of the
/// project with `from` replaced by `to`.
const BROKEN: [(&str, &str, &str, &str); 2] = [
    // A notification sent on every delivery: the event redelivered after Redis came back is
    // notified twice.
    (
        "project/ticketflow/notifications.py",
        "return self._send_once(keys=[guard, self.sent_key], args=[event_id]) == 1",
        "return self.client.rpush(self.sent_key, event_id) > 0",
        "EX-34-03",
    ),
    // A database that does not answer taken for a duplicate: while PostgreSQL is down the
    // event is notified and its offset committed, though it was never stored.
    (
        "project/ticketflow/messaging/pipeline.py",
        "        Base.metadata.create_all(self.pipeline.engine)\n",
        "        try:\n            Base.metadata.create_all(self.pipeline.engine)\n        except Exception:\n            return \"duplicate\"\n",
        "EX-34-04",
    ),
];

#[test]
fn broken_lesson_code_fails_at_the_step_that_shows_it() {
    let Some(python) = python() else { return };
    if !services_installed() {
        return;
    }
    for (file, from, to, step) in BROKEN {
        let dir = Dir::new();
        let course = course_copy(&dir);
        edit(&course.join(file), from, to);
        let (path, text) = lesson(&dir, "34-services-down.md");
        let shown = Path::new("course/lessons/34-services-down.md");
        let at = expected_block(&text, step);
        let ran = run(&dir, &python, "34")
            .stdout_has(format!("--- expected {}:{at}\n", shown.display()))
            .failure();
        let failed: Vec<&str> = ran
            .stdout
            .lines()
            .filter(|l| l.starts_with("FAIL    ["))
            .collect();
        assert!(
            failed.len() == 1 && failed[0].contains(step),
            "{step} is not the one FAIL of {}:\n{}",
            path.display(),
            ran.stdout
        );
        let number: usize = step[step.len() - 2..].parse().unwrap();
        let not_run = ran
            .stdout
            .lines()
            .filter(|l| l.contains(": not run: EX-34-"));
        assert_eq!(not_run.count(), 5 - number, "{}", ran.stdout);
        nothing_left(&dir);
    }
}

/// `from` replaced by `to` in `file`, which must hold it.
#[track_caller]
fn edit(file: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{} lacks {from:?}", file.display());
    std::fs::write(file, text.replacen(from, to, 1)).unwrap();
}

/// Nothing the run started is left, as each service's log names it: no redis-server on its
/// port, no process in the PostgreSQL cluster's folder and no folder, no broker on its address.
#[track_caller]
fn nothing_left(dir: &Dir) {
    let log = |service: &str| dir.read(format!(".lessonprobe/services/{service}.log"));
    let after = |text: &str, marker: &str| {
        let start = text.find(marker).map(|i| i + marker.len());
        let rest = start.map_or("", |i| &text[i..]);
        let word = rest.split(|c: char| c.is_whitespace() || c == ';').next();
        word.unwrap_or("").trim_end_matches('.').to_owned()
    };
    let redis = after(&log("notifications"), "port=");
    assert!(!redis.is_empty(), "{}", log("notifications"));
    let left = process::gone_within(
        &format!("redis-server 127.0.0.1:{redis}"),
        Duration::from_secs(5),
    );
    assert!(left.is_empty(), "still running: {left:?}");
    let cluster = after(&log("audit_db"), "PostgreSQL cluster ");
    assert!(!cluster.is_empty(), "{}", log("audit_db"));
    let left = process::gone_within(&cluster, Duration::from_secs(5));
    assert!(left.is_empty(), "still running: {left:?}");
    assert!(!Path::new(&cluster).exists(), "{cluster} outlived the run");
    let broker = after(&log("bus"), " brokers at ");
    assert!(
        std::net::TcpStream::connect(&broker).is_err(),
        "the broker at {broker} outlived the run"
    );
}
