//! The preflight before any probe: a course's declared requirements checked against the
//! interpreter (one ERROR naming what is missing and the fix, its code blocks NOT RUN, no
//! traceback), a broker and a PostgreSQL that do not answer reported once, the probes that need
//! nothing broken still run; `[environment]` mistakes refused with file:line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lessonprobe_testkit::net::free_port;
use lessonprobe_testkit::*;

/// A lesson whose one code block needs nothing but a shell.
const LESSON: &str = "# Echo

### Answer EX-41-01 [code]

Run:

```sh
echo hello
```

Expected output:

```text
hello
```
";

/// A course declaring `requirements` in `dir/course`.
fn course(dir: &Path, requirements: &str, python: Option<&str>) -> PathBuf {
    let course = dir.join("course");
    std::fs::create_dir_all(course.join("lessons")).unwrap();
    std::fs::create_dir_all(course.join("project")).unwrap();
    std::fs::write(course.join("lessons/41-echo.md"), LESSON).unwrap();
    std::fs::write(course.join("requirements.txt"), requirements).unwrap();
    let mut config = "[environment]\nrequirements = \"requirements.txt\"\n".to_owned();
    if let Some(p) = python {
        config.push_str(&format!("python = {p:?}\n"));
    }
    std::fs::write(course.join("lessonprobe.toml"), config).unwrap();
    course
}

/// A virtual environment without pip whose site-packages holds a hand-made distribution
/// `lessonprobe-tiny` at `version`: what importlib.metadata reads, nothing installed.
fn interpreter_with_tiny(dir: &Path, version: &str) -> PathBuf {
    let venv = dir.join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success(), "python3 -m venv");
    let lib = tiny_dist_info(&venv);
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("METADATA"),
        format!("Metadata-Version: 2.1\nName: lessonprobe-tiny\nVersion: {version}\n"),
    )
    .unwrap();
    venv.join("bin/python")
}

/// Where the venv at `venv` keeps the distribution `lessonprobe-tiny`'s metadata.
fn tiny_dist_info(venv: &Path) -> PathBuf {
    std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages/lessonprobe_tiny-0.dist-info")
}

/// The run printed exactly one ERROR line: what was missing is reported once, not per probe.
#[track_caller]
fn assert_one_error(ran: &Ran) {
    assert_eq!(ran.stdout_lines_starting("ERROR"), 1, "{}", ran.stdout);
}

/// The lesson of the course in `dir/course`, named as the student would: `--course course`.
fn run(dir: &Path, _course: &Path, python: &Path) -> Test {
    lessonprobe()
        .current_dir(dir)
        .args(["--course", "course"])
        .args(["--lesson", "41", "--junit", "r.xml", "--python"])
        .arg(python)
}

#[test]
fn a_missing_requirement_is_one_environment_error_and_the_code_blocks_are_not_run() {
    let dir = Dir::new();
    let course = course(dir.path(), "# needs\nlessonprobe-tiny>=1\n", None);
    let python = interpreter_with_tiny(dir.path(), "1.0");
    std::fs::remove_dir_all(tiny_dist_info(&dir.join("venv"))).unwrap();
    let ran = run(dir.path(), &course, &python)
        .stdout_has("ERROR   environment: ")
        .stdout_has(
            " lacks lessonprobe-tiny (course/requirements.txt:2) — run lessonprobe env, or pip install -r course/requirements.txt\n",
        )
        .stdout_has("NOT RUN [  0.000s] lesson 41 EX-41-01")
        .stdout_lacks("Traceback")
        .within(Duration::from_secs(10))
        .failure();
    assert_one_error(&ran);
    validate_junit(&dir.join("r.xml"));
    let report = parse_junit(&dir.join("r.xml"));
    let suite = &report.test_suites[0];
    assert_eq!(suite.name.as_str(), "environment");
    assert_eq!(suite.test_cases[0].name.as_str(), "environment: python");
    assert_eq!(verdict(&suite.test_cases[0]), "ERROR");
    assert_eq!(verdict(&report.test_suites[1].test_cases[0]), "NOT RUN");
}

#[test]
fn an_installed_requirement_at_an_allowed_version_lets_the_lesson_run() {
    let dir = Dir::new();
    let course = course(dir.path(), "lessonprobe-tiny>=1,<2\n", Some(">=3.8"));
    let python = interpreter_with_tiny(dir.path(), "1.4");
    run(dir.path(), &course, &python)
        .stdout_has("PASS ")
        .stdout_lacks("environment")
        .success();
    // Another version, or a Python the course does not accept: the fix is named.
    dir.write("course/requirements.txt", "lessonprobe-tiny>=2\n");
    run(dir.path(), &course, &python)
        .stdout_has("lessonprobe-tiny 1.4, not >=2 (course/requirements.txt:1)")
        .failure();
    dir.write(
        "course/lessonprobe.toml",
        "[environment]\nrequirements = \"requirements.txt\"\npython = \"<3\"\n",
    );
    run(dir.path(), &course, &python)
        .stdout_has("is not a Python the course accepts (<3 in lessonprobe.toml) — give --python a Python <3")
        .failure();
}

#[test]
fn environment_mistakes_are_refused_with_their_line() {
    let dir = Dir::new();
    let course = course(dir.path(), "ok\nbad>>=1\n", None);
    run(dir.path(), &course, Path::new("python3"))
        .stderr_has("course/requirements.txt:2:")
        .status(2);
    dir.write("course/requirements.txt", "ok\n");
    dir.write(
        "course/lessonprobe.toml",
        "[environment]\nrequirements = \"requirements.txt\"\npython = \"three\"\n",
    );
    run(dir.path(), &course, Path::new("python3"))
        .stderr_has("course/lessonprobe.toml:3:")
        .status(2);
    dir.write(
        "course/lessonprobe.toml",
        "[environment]\nrequirements = \"missing.txt\"\n",
    );
    run(dir.path(), &course, Path::new("python3"))
        .stderr_has("course/lessonprobe.toml:2:")
        .stderr_has("cannot read requirements file course/missing.txt")
        .status(2);
}

#[test]
fn a_broker_that_does_not_answer_is_one_error_quickly_and_the_sql_probes_still_run() {
    let port = free_port();
    let ran = lessonprobe()
        .in_repo()
        .args([
            "--lesson",
            "30",
            "--select",
            "L30-01",
            "--select",
            "L30-13",
            "--no-junit",
        ])
        .args(["--kafka", &format!("127.0.0.1:{port}")])
        .stdout_has(format!("ERROR   environment: kafka 127.0.0.1:{port}: "))
        .stdout_has("PASS    [")
        .stdout_has("NOT RUN [  0.000s] lesson 30 L30-13")
        .stdout_lacks("rdkafka")
        .stderr_lacks("rdkafka")
        .within(Duration::from_secs(4))
        .failure();
    assert_one_error(&ran);
}

#[test]
fn a_closed_postgres_port_is_one_error_not_one_per_probe() {
    let port = free_port();
    let ran = lessonprobe()
        .in_repo()
        .args(["--lesson", "30", "--no-junit", "--db", "sqlite"])
        .args(["--db", &format!("postgres://lp@127.0.0.1:{port}/lp")])
        .stdout_has(format!(
            "ERROR   environment: cannot connect to postgres 127.0.0.1:{port}/lp: "
        ))
        .stdout_has("NOT RUN [  0.000s] lesson 30 L30-01 sql-audit-probe [postgres]")
        .stdout_has("PASS    [")
        .within(Duration::from_secs(10))
        .failure();
    assert_one_error(&ran);
}

/// Writes a wheel of `lessonprobe-tiny` 1.0 (a module saying hello) into `dir`: a zip made by
/// hand, so pip installs it offline with no build tools.
fn tiny_wheel(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let script = r#"
import sys, zipfile, os
name, ver = "lessonprobe_tiny", "1.0"
info = f"{name}-{ver}.dist-info"
files = {
    "lessonprobe_tiny/__init__.py": "GREETING = 'hello from tiny'\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\nName: lessonprobe-tiny\nVersion: {ver}\n",
    f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
with zipfile.ZipFile(os.path.join(sys.argv[1], f"{name}-{ver}-py3-none-any.whl"), "w") as z:
    for p, t in files.items():
        z.writestr(p, t)
"#;
    let made = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .status()
        .unwrap();
    assert!(made.success());
}

const TINY_LESSON: &str = "# Tiny

### Answer EX-41-01 [code]

Save as `show.py`, run from `project/`:

```python
import lessonprobe_tiny
print(lessonprobe_tiny.GREETING)
```

Run:

```sh
python show.py
```

Expected output:

```text
hello from tiny
```
";

/// A course needing `lessonprobe-tiny` `pin`, found offline in its own `wheels/` folder.
fn tiny_course(dir: &Path, pin: &str) -> PathBuf {
    let course = course(
        dir,
        &format!("--no-index\n--find-links wheels\nlessonprobe-tiny{pin}\n"),
        None,
    );
    std::fs::write(course.join("lessons/41-echo.md"), TINY_LESSON).unwrap();
    tiny_wheel(&course.join("wheels"));
    course
}

fn in_cache(dir: &Dir, args: &[&str]) -> Test {
    lessonprobe()
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .args(args)
        .within(Duration::from_secs(300))
}

#[test]
fn env_makes_the_environment_once_in_the_cache_and_a_plain_run_uses_it() {
    let dir = Dir::new();
    let course = tiny_course(dir.path(), "==1.0");
    let first = in_cache(&dir, &["env", "--course", "course"])
        .stderr_has("lessonprobe: making the environment of course/requirements.txt in ")
        .stderr_has("environment ready")
        .success();
    let python = PathBuf::from(first.stdout.trim());
    assert!(
        python.starts_with(dir.join("cache/lessonprobe/envs")),
        "{python:?}"
    );
    assert!(python.exists());
    let second = in_cache(&dir, &["env", "--course", "course"])
        .stderr_lacks("making")
        .success();
    assert_eq!(
        second.stdout, first.stdout,
        "the same environment, untouched"
    );
    // Nothing half-made beside it, nothing written into the course.
    let envs: Vec<_> = std::fs::read_dir(dir.join("cache/lessonprobe/envs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(envs.len(), 1, "{envs:?}");
    assert!(!course.join(".venv").exists() && !course.join("env").exists());
    // A run without --python uses it, and says nothing of making it.
    in_cache(
        &dir,
        &["--course", "course", "--lesson", "41", "--no-junit"],
    )
    .stdout_has("PASS ")
    .stderr_lacks("making")
    .success();
    // An interpreter given is used as given, unprovisioned: the preflight names what it lacks.
    in_cache(
        &dir,
        &[
            "--course",
            "course",
            "--lesson",
            "41",
            "--no-junit",
            "--python",
            "python3",
        ],
    )
    .stdout_has("lacks lessonprobe-tiny (course/requirements.txt:3)")
    .failure();
}

#[test]
fn a_plain_run_makes_a_missing_environment_first_and_a_failed_install_keeps_nothing() {
    let dir = Dir::new();
    tiny_course(dir.path(), "==1.0");
    in_cache(
        &dir,
        &["--course", "course", "--lesson", "41", "--no-junit"],
    )
    .stderr_has("lessonprobe: making the environment of course/requirements.txt")
    .stdout_has("PASS ")
    .success();

    let dir = Dir::new();
    tiny_course(dir.path(), "==9.9");
    in_cache(&dir, &["env", "--course", "course"])
        .stderr_has("cannot make the course's environment: pip install failed")
        .stderr_has("lessonprobe-tiny==9.9")
        .stderr_has("nothing was kept")
        .status(4);
    let left: Vec<_> = std::fs::read_dir(dir.join("cache/lessonprobe/envs"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "no half-made environment: {left:?}");
}

#[test]
fn doctor_lists_every_check_with_its_fix_and_fails_when_one_fails() {
    let dir = Dir::new();
    course(dir.path(), "lessonprobe-tiny>=1\n", None);
    let python = interpreter_with_tiny(dir.path(), "1.0");
    let python = python.display().to_string();
    let port = free_port();
    let kafka = format!("127.0.0.1:{port}");
    let ran = lessonprobe()
        .current_dir(dir.path())
        .args([
            "doctor", "--course", "course", "--python", &python, "--format", "json",
        ])
        .args(["--kafka", &kafka])
        .within(Duration::from_secs(10))
        .failure();
    let rows = ran.json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["check"], "python");
    assert_eq!(rows[0]["result"], "ok");
    assert_eq!(rows[1]["check"], format!("kafka {kafka}"));
    assert_eq!(rows[1]["result"], "FAILED");
    assert!(rows[1]["fix"]
        .as_str()
        .unwrap()
        .contains("start the broker"));
    lessonprobe()
        .current_dir(dir.path())
        .args(["doctor", "--course", "course", "--python", &python])
        .stdout_has("python")
        .stdout_has("ok")
        .success();
    lessonprobe()
        .current_dir(dir.path())
        .args(["doctor", "--course", "course", "--python", "python3"])
        .stdout_has("FAILED")
        .stdout_has("lacks lessonprobe-tiny (course/requirements.txt:1)")
        .stdout_has("run lessonprobe env, or pip install -r course/requirements.txt")
        .failure();
}
