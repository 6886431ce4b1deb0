//! SIGTERM and Ctrl-C in the middle of a run, against a real PostgreSQL and real process
//! groups: nothing is left running, no schema of the run stays, the report is the interrupted
//! run's (never an earlier one's), and a rerun with the same id works.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// A command probe that records its process group and sleeps far past any test.
const SLEEPER: &str = r#"[[probe]]
id = "L30-SLEEP"
name = "sleeps"
claim = "a command that runs until it is stopped"
kind = "command"
argv = ["sh", "-c", "echo $$ > sleeper.pid; sleep 87"]
timeout = "120s"

"#;

/// The repository's manifests in `dir`, lesson 30 with the sleeper as its first probe, so it
/// runs beside the SQL probes rather than after them.
fn manifests_with_sleeper(dir: &Path) -> PathBuf {
    let manifests = copy_manifests(dir);
    let path = manifests.join("30-replay-audit.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let first = text.find("[[probe]]").unwrap();
    std::fs::write(
        &path,
        format!("{}{SLEEPER}{}", &text[..first], &text[first..]),
    )
    .unwrap();
    manifests
}

/// Schemas whose name carries the key of a case of run `run`.
fn schemas_of(url: &str, run: &str) -> Vec<String> {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let pattern = format!("lp\\_%\\_lp\\_{}\\_%", run.replace('-', "\\_"));
    client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1",
            &[&pattern],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn signal(child: &Child, signal: i32) {
    // SAFETY: kill only sends a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
}

/// The child's output once it exits, within `limit`.
fn finish(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("lessonprobe still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout: stdout.into_bytes(),
        stderr: stderr.into_bytes(),
    }
}

/// Waits until `file` exists, at most 60 s.
fn wait_for(file: &Path) {
    let started = Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
}

/// Whether no process of group `pgid` is left within 5 s.
fn group_gone(pgid: i32) -> bool {
    let started = Instant::now();
    loop {
        // SAFETY: signal 0 only checks that the group exists.
        let alive = unsafe { libc::kill(-pgid, 0) } == 0;
        if !alive {
            return true;
        }
        if started.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Interrupts lesson 30 on PostgreSQL with `sig` while the sleeper and the SQL probes run, and
/// checks what the run leaves: exit `code`, no process, no schema, an interrupted report; then
/// a rerun with the same id.
fn interrupted_by(sig: i32, name: &str, code: i32, run: &str) {
    let Some(url) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    manifests_with_sleeper(dir.path());
    let xml = dir.path().join("reports/l30.xml");
    std::fs::create_dir_all(xml.parent().unwrap()).unwrap();
    std::fs::write(&xml, "<stale/>").unwrap();
    let child = lessonprobe(dir.path())
        .args([
            "--lesson", "30", "--jobs", "2", "--db", &url, "--run-id", run,
        ])
        .arg("--junit")
        .arg(&xml)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    wait_for(&pid_file);
    let pgid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, sig);
    let out = finish(child, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stdout}{stderr}");

    assert!(
        group_gone(pgid),
        "the sleeper's process group outlived the run"
    );
    assert_eq!(schemas_of(&url, run), Vec::<String>::new(), "{stderr}");

    let closing = stdout.lines().last().unwrap_or_default();
    assert!(
        closing.contains(&format!("; interrupted ({name})")) && closing.contains("L30-SLEEP"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("INTERRUPTED ({name})")),
        "{stdout}"
    );
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let cases = verdicts(&report);
    assert!(
        cases.len() > 10,
        "every planned case is in the report: {cases:?}"
    );
    let messages: Vec<(String, String)> = report.test_suites[0]
        .test_cases
        .iter()
        .filter_map(|c| match &c.status {
            quick_junit::TestCaseStatus::NonSuccess { message, .. } => Some((
                c.name.to_string(),
                message.as_deref().unwrap_or("").to_owned(),
            )),
            _ => None,
        })
        .collect();
    assert!(
        messages.contains(&(
            "L30-SLEEP sleeps".to_owned(),
            format!("interrupted ({name}) while it ran")
        )),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .all(|(_, m)| m.starts_with(&format!("interrupted ({name})"))),
        "only interrupted cases fail: {messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|(_, m)| m.ends_with("before it started")),
        "some cases never started: {messages:?}"
    );

    let again = lessonprobe(dir.path())
        .args([
            "--lesson",
            "30",
            "--select",
            "EX-30-01",
            "--select",
            "L30-0*",
            "--select",
            "L30-1*",
            "--db",
            &url,
            "--run-id",
            run,
            "--no-junit",
        ])
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "a rerun with the same id: {}{}",
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(schemas_of(&url, run), Vec::<String>::new());
}

#[test]
fn sigterm_mid_run_stops_everything_and_writes_an_interrupted_report() {
    interrupted_by(libc::SIGTERM, "SIGTERM", 143, "it-term");
}

#[test]
fn ctrl_c_mid_run_stops_everything_and_writes_an_interrupted_report() {
    interrupted_by(libc::SIGINT, "SIGINT", 130, "it-int");
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    // A server that accepts connections and never answers holds a SQL probe in its connect,
    // so the first Ctrl-C has a probe to wait for.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = silent.accept() {
            let _ = tx.send(());
            std::thread::sleep(Duration::from_secs(120));
            drop(stream);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let child = lessonprobe(dir.path())
        .args(["--lesson", "30", "--select", "L30-01", "--no-junit", "--db"])
        .arg(format!("postgres://nobody@127.0.0.1:{port}/audit"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the probe connects to the silent server");
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, libc::SIGINT);
    let started = Instant::now();
    let out = finish(child, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?} after the second Ctrl-C",
        started.elapsed()
    );
    assert!(
        stderr.contains("interrupted again: exiting now"),
        "{stderr}"
    );
}
