//! Probe isolation through the built binary: whatever a document probe writes to its scratch
//! copy (new, changed, deleted files, modes, links, a rewrite in place with its mtime put back,
//! a write through a hard link, folders made, removed or moved) reaches neither the next probe
//! that reuses the copy nor the course, in this run or the next (the copies are kept in the
//! user's cache between runs); on inotify (`watch`) and on the full comparison (`scan`) it
//! falls back to. A rerun copies only what changed in the course, a copy left half-reset or
//! written by another process is rebuilt, continued steps still see what their predecessor left,
//! shared folders are linked, and no temporary folder outlives a run.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::*;

/// The modes a reset finds changes with: inotify, and the comparison of every entry.
const MODES: &[&str] = &["watch", "scan"];

/// Lists every entry of the folder it runs in (type, mode, links, target) and every file's
/// bytes: the same text for two folders means the same tree.
const LISTING: &str = "find . -printf '%p %y %m %n %l\\n' | LC_ALL=C sort\nfind . -type f | LC_ALL=C sort | while read -r f; do echo \"== $f\"; cat \"$f\"; done\n";

/// Every entry under `dir` (not following links): type, permissions, link count, link target,
/// bytes.
fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let what = if meta.is_symlink() {
                format!(
                    "link {mode:o} -> {}",
                    std::fs::read_link(&path).unwrap().display()
                )
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                let bytes = std::fs::read(&path).unwrap();
                format!(
                    "file {mode:o} n{} {:?}",
                    meta.nlink(),
                    String::from_utf8_lossy(&bytes)
                )
            };
            all.insert(path.strip_prefix(dir).unwrap().to_owned(), what);
        }
    }
    all
}

/// A course whose project holds files at two depths, an executable, a symbolic link and an
/// empty folder.
fn course(dir: &Path, config: &str) -> PathBuf {
    let course = dir.join("course");
    let project = course.join("project");
    std::fs::create_dir_all(project.join("sub/deep")).unwrap();
    std::fs::create_dir_all(project.join("empty")).unwrap();
    std::fs::create_dir_all(course.join("lessons")).unwrap();
    std::fs::write(project.join("a.txt"), "pristine-a\n").unwrap();
    std::fs::write(project.join("sub/b.txt"), "pristine-b\n").unwrap();
    std::fs::write(project.join("sub/deep/c.txt"), "pristine-c\n").unwrap();
    std::fs::write(project.join("sub/tool.sh"), "echo tool\n").unwrap();
    std::fs::set_permissions(
        project.join("sub/tool.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("a.txt", project.join("link")).unwrap();
    std::fs::write(course.join("lessonprobe.toml"), config).unwrap();
    course
}

/// `lessonprobe --lesson N --no-junit --course COURSE`, run in `dir`, its working copies kept in
/// `dir/cache`, saying what bringing them up copied.
fn run_lesson(dir: &Dir, course: &Path, n: &str) -> Test {
    dir.lessonprobe()
        .args(["--lesson", n, "--no-junit", "--course"])
        .arg(course)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("RUST_LOG", "lessonprobe::lesson::isolation=debug")
}

/// The counts of files copied to bring working copies up to the course, as a run logged them.
fn copied(stderr: &str) -> Vec<usize> {
    stderr
        .lines()
        .filter_map(|l| l.split_once("brought up to the course, files copied: "))
        .map(|(_, n)| n.trim().parse().unwrap())
        .collect()
}

/// The entries a run refreshed in its working copies, as it logged them.
fn refreshed(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once(": refreshed "))
        .map(|(_, rel)| rel.trim().to_owned())
        .collect()
}

/// What `LISTING` prints in the pristine project.
fn pristine_listing(project: &Path) -> String {
    let out = std::process::Command::new("sh")
        .args(["-e", "-c", LISTING])
        .current_dir(project)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Lesson 41: the copy checked, `mutation` run, the copy checked again; each step notes the
/// folder it ran in.
fn lesson(mutation: &str, listing: &str) -> String {
    let check = format!(
        "Run:\n\n```sh\npwd >> \"$ISOLATION_LOG\"\n{LISTING}```\n\nExpected output:\n\n```text\n{listing}```\n"
    );
    format!(
        "# Isolation\n\n### Answer EX-41-01 [code]\n\n{check}\n### Answer EX-41-02 [code]\n\nRun:\n\n```sh\npwd >> \"$ISOLATION_LOG\"\n{mutation}\n```\n\n### Answer EX-41-03 [code]\n\n{check}"
    )
}

/// Runs `mutation` between two checks on one worker, twice, on every mode: every check passes
/// (the probe after it, and the next run's first, found the pristine copy again), all probes of
/// both runs ran in the same reused copy, the second run copied no file, and the course is as
/// it was.
fn leaves_no_trace(mutation: &str) {
    for mode in MODES {
        let dir = Dir::new();
        let course = course(&dir, "");
        let project = course.join("project");
        let listing = pristine_listing(&project);
        std::fs::write(
            course.join("lessons/41-isolation.md"),
            lesson(mutation, &listing),
        )
        .unwrap();
        let before = fingerprint(&course);
        let log = dir.join("folders.log");
        for run in 1..=2 {
            let ran = run_lesson(&dir, &course, "41")
                .args(["--jobs", "1"])
                .env("LESSONPROBE_ISOLATION", mode)
                .env("ISOLATION_LOG", &log)
                .within(Duration::from_secs(30))
                .stdout_has("3 passed, 0 failed, 0 errors")
                .success();
            if run == 2 {
                assert_eq!(copied(&ran.stderr), [0], "{mode}: {}", ran.stderr);
            }
        }
        let folders: Vec<String> = dir.read(&log).lines().map(str::to_owned).collect();
        assert_eq!(folders.len(), 6, "{mode}: {folders:?}");
        assert!(
            folders.iter().all(|f| f == &folders[0]),
            "{mode}: the probes did not share one reused copy: {folders:?}"
        );
        assert_eq!(fingerprint(&course), before, "{mode}: the course changed");
    }
}

#[test]
fn a_new_file() {
    leaves_no_trace("echo leaked > new.txt\necho leaked > sub/deep/new.txt");
}

#[test]
fn a_changed_file() {
    leaves_no_trace("echo leaked >> sub/deep/c.txt");
}

#[test]
fn a_deleted_file() {
    leaves_no_trace("rm a.txt sub/deep/c.txt");
}

#[test]
fn a_changed_mode() {
    leaves_no_trace("chmod 600 sub/tool.sh\nchmod 644 a.txt\nchmod 700 sub/deep\nchmod 1777 empty");
}

#[test]
fn a_symlink_created() {
    leaves_no_trace("ln -s ../b.txt sub/deep/newlink");
}

#[test]
fn a_symlink_changed() {
    leaves_no_trace("ln -sfn sub/b.txt link\ntest \"$(cat link)\" = pristine-b");
}

#[test]
fn a_file_rewritten_in_place_with_its_size_and_mtime_kept() {
    leaves_no_trace(
        "t=$(stat -c %y sub/b.txt)\nprintf 'PRISTINE-B\\n' | dd of=sub/b.txt conv=notrunc status=none\ntouch -d \"$t\" sub/b.txt\ntest \"$(stat -c %s%y sub/b.txt)\" = \"11$t\"\ngrep -q PRISTINE-B sub/b.txt",
    );
}

#[test]
fn a_file_written_through_a_hard_link_inside_the_copy() {
    leaves_no_trace("ln a.txt hard\necho leaked >> hard\ngrep -q leaked a.txt");
}

#[test]
fn a_file_written_through_a_hard_link_outside_the_copy() {
    // The copy's parent is the working copy: no watch of the copy's folders sees this path.
    leaves_no_trace(
        "ln sub/b.txt ../outside\necho leaked >> ../outside\nrm ../outside\ngrep -q leaked sub/b.txt",
    );
}

#[test]
fn a_new_directory() {
    leaves_no_trace("mkdir -p newdir/inner sub/deep/d2\necho leaked > newdir/inner/f");
}

#[test]
fn a_deleted_directory() {
    leaves_no_trace("rm -rf sub empty");
}

#[test]
fn a_moved_directory() {
    leaves_no_trace("mv sub moved\necho leaked >> moved/deep/c.txt");
}

#[test]
fn a_file_replaced_by_a_directory_and_a_directory_by_a_file() {
    leaves_no_trace("rm a.txt\nmkdir a.txt\necho x > a.txt/y\nrm -rf sub/deep\necho x > sub/deep");
}

#[test]
fn a_folder_made_unwritable() {
    leaves_no_trace("mkdir locked\necho x > locked/f\nchmod 0 locked sub/deep");
}

/// Writes lesson `n` of the one probe `check` into the course and returns a run of it on one
/// worker (which must pass), giving its log.
fn checker<'a>(
    dir: &'a Dir,
    course: &'a Path,
    n: &'a str,
    check: &str,
) -> impl Fn() -> String + 'a {
    let text = format!("# Check\n\n### Answer EX-{n}-01 [code]\n\nRun:\n\n{check}");
    std::fs::write(course.join(format!("lessons/{n}-check.md")), text).unwrap();
    move || {
        run_lesson(dir, course, n)
            .args(["--jobs", "1"])
            .within(Duration::from_secs(30))
            .stdout_has("1 passed, 0 failed")
            .success()
            .stderr
    }
}

/// The folder of the first worker's kept copy of the course's project.
fn first_slot(dir: &Dir) -> PathBuf {
    let folder = std::fs::read_dir(dir.join("cache/lessonprobe/copies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    folder.join("0")
}

/// A rerun brings the kept copy up to the course by what changed there: nothing changed,
/// nothing copied; one file changed, exactly that file; a file made, removed, a folder's mode
/// changed, exactly those.
#[test]
fn a_rerun_copies_only_what_changed_in_the_course() {
    let dir = Dir::new();
    let course = course(&dir, "");
    let project = course.join("project");
    let rerun = checker(
        &dir,
        &course,
        "46",
        "```sh\ncat a.txt sub/deep/c.txt\n```\n",
    );
    let first = rerun();
    assert_eq!(copied(&first), [4], "{first}");
    let stamps = || {
        let meta = std::fs::metadata(first_slot(&dir).join("stamps")).unwrap();
        (meta.ino(), meta.modified().unwrap())
    };
    let saved = stamps();
    let same = rerun();
    assert_eq!(
        (copied(&same), refreshed(&same)),
        (vec![0], vec![]),
        "{same}"
    );
    // A run that brought nothing up and reset nothing leaves the course's stamps as saved.
    assert_eq!(stamps(), saved);

    std::fs::write(project.join("sub/deep/c.txt"), "edited-c\n").unwrap();
    let one = rerun();
    assert_eq!(
        (copied(&one), refreshed(&one)),
        (vec![1], vec!["sub/deep/c.txt".to_owned()]),
        "{one}"
    );

    std::fs::write(project.join("sub/new.txt"), "new\n").unwrap();
    std::fs::remove_file(project.join("sub/b.txt")).unwrap();
    std::fs::set_permissions(
        project.join("empty"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let some = rerun();
    let mut said = refreshed(&some);
    said.sort();
    assert_eq!(
        (copied(&some), said),
        (
            vec![1],
            vec![
                "empty".to_owned(),
                "sub/b.txt".to_owned(),
                "sub/new.txt".to_owned()
            ]
        ),
        "{some}"
    );
    // The copy is the course's project as it now is.
    assert_eq!(
        fingerprint(&first_slot(&dir).join("tree/project")),
        fingerprint(&project)
    );
}

/// Asserts that the run of `log` rebuilt its copy of the course's project (4 files), saying
/// `why`.
fn rebuilt(log: &str, why: &str) {
    assert!(log.contains(why), "{log}");
    assert_eq!(copied(log), [4], "{log}");
}

/// A kept copy whose stamps cannot be trusted is rebuilt whole, never used: one left
/// half-reset by a run that died (its mark still there), one another process wrote into (at
/// its top level, or in a folder below it).
#[test]
fn a_copy_left_half_reset_or_written_by_another_process_is_rebuilt() {
    let dir = Dir::new();
    let course = course(&dir, "");
    let rerun = checker(
        &dir,
        &course,
        "47",
        "```sh\ncat a.txt; test ! -e stray; test ! -e sub/stray\n```\n\nExpected output:\n\n```text\npristine-a\n```\n",
    );
    rerun();
    let slot = first_slot(&dir);

    std::fs::write(slot.join("resetting"), "").unwrap();
    std::fs::write(slot.join("tree/project/a.txt"), "half-reset\n").unwrap();
    rebuilt(&rerun(), "was left half-reset: rebuilt");
    assert!(!slot.join("resetting").exists());

    std::fs::write(slot.join("tree/project/stray"), "").unwrap();
    let written = rerun();
    assert_eq!(copied(&written), [4], "{written}");
    assert_eq!(copied(&rerun()), [0]);

    std::fs::write(slot.join("tree/project/sub/stray"), "").unwrap();
    let below = rerun();
    assert_eq!(copied(&below), [4], "{below}");
    assert_eq!(copied(&rerun()), [0]);
}

/// A copy whose stamps were saved in the format before (JSON), or in a file cut short, is
/// rebuilt whole; the next run trusts it again.
#[test]
fn a_copy_with_stamps_of_the_format_before_is_rebuilt() {
    let dir = Dir::new();
    let course = course(&dir, "");
    let rerun = checker(&dir, &course, "50", "```sh\ncat a.txt\n```\n");
    rerun();
    let slot = first_slot(&dir);
    for file in ["stamps", "checked"] {
        std::fs::remove_file(slot.join(file)).unwrap();
    }
    let json = r#"{"device":1,"source":[],"copy":[["",{"kind":"Dir","ino":1,"mode":493,"size":0,"mtime":[1,0],"ctime":[1,0]}]]}"#;
    std::fs::write(slot.join("stamps.json"), json).unwrap();
    rebuilt(&rerun(), "has no stamps this version reads: rebuilt");
    assert!(!slot.join("stamps.json").exists());
    assert_eq!(copied(&rerun()), [0]);

    let stamps = std::fs::read(slot.join("stamps")).unwrap();
    std::fs::write(slot.join("stamps"), &stamps[..stamps.len() / 2]).unwrap();
    let cut = rerun();
    assert_eq!(copied(&cut), [4], "{cut}");
    assert_eq!(copied(&rerun()), [0]);
}

/// `lessonprobe clean --copies` lists the kept copies and with `--execute` removes them: the
/// next run copies the project again.
#[test]
fn clean_removes_the_kept_copies() {
    let dir = Dir::new();
    let course = course(&dir, "");
    let run = checker(&dir, &course, "48", "```sh\ncat a.txt\n```\n");
    assert_eq!(copied(&run()), [4]);
    let clean = |args: &[&str]| {
        dir.lessonprobe()
            .args(["clean", "--copies"])
            .args(args)
            .env("XDG_CACHE_HOME", dir.join("cache"))
    };
    clean(&[])
        .stdout_has("1 working copies (0 MB) kept in ")
        .stdout_has("run again with --execute to remove them")
        .success();
    clean(&["--execute"])
        .stdout_has("removed 1 working copies (0 MB) from ")
        .success();
    clean(&[])
        .stdout_has("no working copies kept in ")
        .success();
    assert_eq!(copied(&run()), [4]);
}

/// The kept copies stay under `LESSONPROBE_COPIES_MB`: when a run ends, the least recently used
/// copy no run holds is removed first.
#[test]
fn the_least_recently_used_copy_is_removed_past_the_cap() {
    let dir = Dir::new();
    let mut checks = Vec::new();
    for name in ["a", "b"] {
        let course = course(&dir.join(name), "");
        // 600 KB each: one fits a cap of 1 MB, two do not.
        std::fs::write(course.join("project/big.bin"), vec![b'x'; 600 * 1024]).unwrap();
        checks.push(course);
    }
    let run = |course: &Path| {
        let text = "# Check\n\n### Answer EX-49-01 [code]\n\nRun:\n\n```sh\ntest -s big.bin\n```\n";
        std::fs::write(course.join("lessons/49-check.md"), text).unwrap();
        let ran = run_lesson(&dir, course, "49")
            .env("LESSONPROBE_COPIES_MB", "1")
            .within(Duration::from_secs(30))
            .stdout_has("1 passed")
            .success();
        copied(&ran.stderr)
    };
    let (a, b) = (&checks[0], &checks[1]);
    assert_eq!(run(a), [5]);
    assert_eq!(run(a), [0], "a copy within the cap was not kept");
    assert_eq!(run(b), [5]);
    assert_eq!(run(b), [0], "the most recently used copy was removed");
    assert_eq!(
        run(a),
        [5],
        "the least recently used copy was kept past the cap"
    );
}

/// A continued step sees what its predecessor changed (made, changed, removed, a mode), a
/// fresh step after it does not, on every mode.
#[test]
fn continued_steps_see_what_their_predecessor_left() {
    let text = "# Steps\n\n### Answer EX-42-01 [code]\n\nRun:\n\n```sh\necho made > made.txt\necho more >> a.txt\nrm sub/b.txt\nchmod 700 sub/tool.sh\nmkdir -p new/dir\necho deep > new/dir/f\n```\n\n### Answer EX-42-02 [code]\n\nContinues: EX-42-01\n\nRun:\n\n```sh\ncat made.txt a.txt new/dir/f; test ! -e sub/b.txt; stat -c %a sub/tool.sh; echo again >> made.txt\n```\n\nExpected output:\n\n```text\nmade\npristine-a\nmore\ndeep\n700\n```\n\n### Answer EX-42-03 [code]\n\nContinues: EX-42-02\n\nRun:\n\n```sh\ncat made.txt\n```\n\nExpected output:\n\n```text\nmade\nagain\n```\n\n### Answer EX-42-04 [code]\n\nRun:\n\n```sh\ntest ! -e made.txt; test ! -e new; cat a.txt sub/b.txt; stat -c %a sub/tool.sh\n```\n\nExpected output:\n\n```text\npristine-a\npristine-b\n755\n```\n";
    for mode in MODES {
        for jobs in ["1", "2"] {
            let dir = Dir::new();
            let course = course(&dir, "");
            std::fs::write(course.join("lessons/42-steps.md"), text).unwrap();
            let before = fingerprint(&course);
            run_lesson(&dir, &course, "42")
                .args(["--jobs", jobs])
                .env("LESSONPROBE_ISOLATION", mode)
                .within(Duration::from_secs(30))
                .stdout_has("4 passed, 0 failed, 0 errors")
                .success();
            assert_eq!(fingerprint(&course), before, "{mode}: the course changed");
        }
    }
}

/// `shared` folders are linked into the copy (never copied), other virtual environments are
/// left out as before, and a shared path the course lacks is refused at its line.
#[test]
fn shared_folders_are_linked_and_must_exist() {
    let dir = Dir::new();
    let course = course(&dir, "shared = [\"project/.venv\"]\n");
    std::fs::create_dir_all(course.join("project/.venv/bin")).unwrap();
    std::fs::write(course.join("project/.venv/bin/marker"), "venv\n").unwrap();
    std::fs::create_dir_all(course.join("project/venv")).unwrap();
    let text = "# Shared\n\n### Answer EX-43-01 [code]\n\nRun:\n\n```sh\ntest -L .venv && cat .venv/bin/marker && test ! -e venv && readlink .venv\n```\n\nExpected output:\n\n```text\nvenv\n[..]/course/project/.venv\n```\n";
    std::fs::write(course.join("lessons/43-shared.md"), text).unwrap();
    run_lesson(&dir, &course, "43")
        .within(Duration::from_secs(30))
        .stdout_has("1 passed, 0 failed")
        .success();
    std::fs::write(
        course.join("lessonprobe.toml"),
        "shared = [\"project/.venv\", \"project/missing\"]\n",
    )
    .unwrap();
    run_lesson(&dir, &course, "43")
        .stderr_matches("lessonprobe: [..]lessonprobe.toml:1:[..]: shared \"project/missing\" does not exist in the course[..]\n")
        .status(2);
}

/// No temporary folder outlives a run: after a run of several workers, and after Ctrl-C and
/// SIGTERM in the middle of one; with working copies kept in the cache and with none kept
/// (`LESSONPROBE_COPIES_MB=0`, the copies themselves made in the temporary folder).
#[test]
fn no_temporary_folder_outlives_a_run() {
    for cap in ["0", "2048"] {
        no_temporary_folder_outlives_a_run_keeping(cap);
    }
}

fn no_temporary_folder_outlives_a_run_keeping(cap: &str) {
    let dir = Dir::new();
    let course = course(&dir, "");
    let mut text = String::from("# Many\n\n");
    for i in 1..=6 {
        text.push_str(&format!(
            "### Answer EX-44-{i:02} [code]\n\nRun:\n\n```sh\necho {i} > step.txt\n```\n\n"
        ));
    }
    text.push_str("### Answer EX-44-07 [code]\n\nContinues: EX-44-01\n\nRun:\n\n```sh\ncat step.txt\n```\n\nExpected output:\n\n```text\n1\n```\n");
    std::fs::write(course.join("lessons/44-many.md"), &text).unwrap();
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    run_lesson(&dir, &course, "44")
        .args(["--jobs", "3"])
        .env("TMPDIR", &tmp)
        .env("LESSONPROBE_COPIES_MB", cap)
        .within(Duration::from_secs(30))
        .stdout_has("7 passed")
        .success();
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "copies {cap} MB: left behind: {left:?}");

    let sleeper = text.replace(
        "echo 6 > step.txt",
        "echo 6 > step.txt; touch \"$TMPDIR/../started\"; sleep 60",
    );
    std::fs::write(course.join("lessons/44-many.md"), sleeper).unwrap();
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let started = dir.join("started");
        let _ = std::fs::remove_file(&started);
        let mut running = run_lesson(&dir, &course, "44")
            .args(["--jobs", "2"])
            .env("TMPDIR", &tmp)
            .env("LESSONPROBE_COPIES_MB", cap)
            .spawn();
        wait_for(&started, Duration::from_secs(30));
        running.signal(signal);
        running.within(Duration::from_secs(30)).status(code);
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(
            left.is_empty(),
            "copies {cap} MB: left behind after signal {signal}: {left:?}"
        );
    }
}

/// A mode, or a cap of the kept copies, the program does not understand is an ERROR that names
/// the variable.
#[test]
fn an_unknown_mode_is_an_error_naming_it() {
    let dir = Dir::new();
    let course = course(&dir, "");
    std::fs::write(
        course.join("lessons/45-x.md"),
        "# X\n\n### Answer EX-45-01 [code]\n\nRun:\n\n```sh\ntrue\n```\n",
    )
    .unwrap();
    run_lesson(&dir, &course, "45")
        .env("LESSONPROBE_ISOLATION", "reflink")
        .stdout_has("LESSONPROBE_ISOLATION=\"reflink\" is not a mode (write watch or scan)")
        .failure();
    run_lesson(&dir, &course, "45")
        .env("LESSONPROBE_COPIES_MB", "2G")
        .stdout_has("LESSONPROBE_COPIES_MB=\"2G\" is not a size in megabytes (write a whole number; 0 keeps no working copy between runs)")
        .failure();
    assert!(
        !dir.join("cache/lessonprobe/copies").exists(),
        "a working copy was kept under a cap that is not a number"
    );
}
