//! Finding what a test needs outside itself: a service named by a `LESSONPROBE_TEST_*` variable
//! or a program on PATH. Missing in CI fails the test loudly; elsewhere it is skipped, saying why.

use std::process::Command;

/// Whether this is a CI run (`CI` set to anything but empty, `false` or `0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `Some(value)` of a variable naming a service; in CI a missing one fails the test loudly,
/// elsewhere the test is skipped with the reason on stderr.
#[track_caller]
pub fn service(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if in_ci() => panic!("{var} is not set: CI must provide {what} (see scripts/test.sh)"),
        _ => {
            eprintln!(
                "skipped: {var} is not set, so {what} is not available (run the tests through scripts/test.sh)"
            );
            None
        }
    }
}

/// Whether a program is on PATH; in CI a missing one fails loudly.
#[track_caller]
pub fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            !in_ci(),
            "{name} is not installed: scripts/test.sh must install it"
        );
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// The URL of the test PostgreSQL server (a role that may create schemas and databases).
#[track_caller]
pub fn postgres() -> Option<String> {
    service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server")
}

/// The CA that signed the test PostgreSQL server's certificate (the server speaks TLS too).
#[track_caller]
pub fn postgres_ca() -> Option<String> {
    service(
        "LESSONPROBE_TEST_PG_CA",
        "the CA of the test server's certificate",
    )
}

/// `pg_ctl` of the installed PostgreSQL, for a test that starts (and stops) a cluster of its own.
#[track_caller]
pub fn pg_ctl() -> Option<String> {
    service("LESSONPROBE_TEST_PG_CTL", "PostgreSQL server binaries")
}

/// An interpreter with SQLAlchemy, for the sample course's Python.
#[track_caller]
pub fn python() -> Option<String> {
    service(
        "LESSONPROBE_TEST_PYTHON",
        "a Python interpreter with SQLAlchemy (scripts/test.sh makes a virtual environment)",
    )
}

/// Whether Redis (`redis-server` and `redis-cli`, Debian's `redis-server`) is installed, for the
/// tests of a course's declared services; in CI a missing one fails loudly.
#[track_caller]
pub fn redis() -> bool {
    tool("redis-server") && tool("redis-cli")
}
