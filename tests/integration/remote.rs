//! Remote selectors over SSH against the throwaway sshd that scripts/test.sh starts on
//! loopback; the "remote" side runs the freshly built lessonprobe.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

struct Ssh {
    host: String,
    port: u16,
    user: String,
    key: String,
    other_key: String,
    known_hosts: String,
    log: Option<String>,
}

fn ssh() -> Option<Ssh> {
    let addr = service("LESSONPROBE_TEST_SSH_ADDR", "a throwaway sshd")?;
    let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
    let var = |v: &str| {
        std::env::var(v)
            .unwrap_or_else(|_| panic!("{v} must be set with LESSONPROBE_TEST_SSH_ADDR"))
    };
    Some(Ssh {
        host: host.to_owned(),
        port: port.parse().unwrap(),
        user: var("LESSONPROBE_TEST_SSH_USER"),
        key: var("LESSONPROBE_TEST_SSH_KEY"),
        other_key: var("LESSONPROBE_TEST_SSH_OTHER_KEY"),
        known_hosts: var("LESSONPROBE_TEST_SSH_KNOWN_HOSTS"),
        log: std::env::var("LESSONPROBE_TEST_SSH_LOG").ok(),
    })
}

fn os_id() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("ID="))
        .unwrap()
        .trim_matches('"')
        .to_owned()
}

/// The freshly built binary, as the remote host's `run` command, reading `checkpoints`.
fn remote_run(checkpoints: &Path) -> String {
    format!(
        "{} --checkpoint {{checkpoint}} --select {{selector}} --junit {{report}} --checkpoints {}",
        env!("CARGO_BIN_EXE_lessonprobe"),
        checkpoints.display()
    )
}

/// A hosts file for the test sshd; `edit` adjusts the fields (as TOML lines) before writing.
fn hosts_file(dir: &Path, s: &Ssh, edit: impl FnOnce(&mut Vec<(String, String)>)) -> PathBuf {
    let mut fields: Vec<(String, String)> = vec![
        ("name".into(), "\"loopback\"".into()),
        ("address".into(), format!("\"{}\"", s.host)),
        ("port".into(), s.port.to_string()),
        ("user".into(), format!("\"{}\"", s.user)),
        ("identity".into(), format!("\"{}\"", s.key)),
        ("known_hosts".into(), format!("\"{}\"", s.known_hosts)),
        ("os".into(), format!("\"{}\"", os_id())),
        ("workdir".into(), format!("\"{}\"", dir.display())),
        (
            "run".into(),
            format!("\"{}\"", remote_run(&repo().join("checkpoints"))),
        ),
        (
            "teardown".into(),
            format!("\"touch {}\"", dir.join("teardown-ran").display()),
        ),
        ("connect_timeout".into(), "\"5s\"".into()),
    ];
    edit(&mut fields);
    let mut text = String::from("[[host]]\n");
    for (k, v) in fields {
        text.push_str(&format!("{k} = {v}\n"));
    }
    let path = dir.join("hosts.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn set(fields: &mut [(String, String)], key: &str, value: String) {
    fields.iter_mut().find(|(k, _)| k == key).unwrap().1 = value;
}

fn remote_cmd(dir: &Path, hosts: &Path, selector: &str) -> std::process::Command {
    let mut cmd = lessonprobe(dir);
    cmd.env("TICKETFLOW_REMOTE_TESTS", "1")
        .args([
            "remote",
            "--checkpoint",
            "30",
            "--selector",
            selector,
            "--hosts",
        ])
        .arg(hosts)
        .arg("--junit")
        .arg(dir.join("remote.xml"));
    cmd
}

/// Counts connections, holding each open and silent.
struct Listener {
    port: u16,
    count: Arc<AtomicUsize>,
}

fn listener() -> Listener {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in l.incoming().flatten() {
            c.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    Listener { port, count }
}

fn case(dir: &Path) -> (String, String, String) {
    let xml = dir.join("remote.xml");
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let suite = &report.test_suites[0];
    assert_eq!(suite.test_cases.len(), 1, "{:?}", suite.test_cases);
    let c = &suite.test_cases[0];
    let (_, verdict) = verdicts(&report).remove(0);
    let message = match &c.status {
        quick_junit::TestCaseStatus::NonSuccess { message, .. }
        | quick_junit::TestCaseStatus::Skipped { message, .. } => {
            message.as_deref().unwrap_or("").to_owned()
        }
        _ => String::new(),
    };
    (
        verdict,
        c.classname.as_deref().unwrap_or("").to_owned(),
        message,
    )
}

/// The suite of `dir/remote.xml` carries the verified host key and the host's OS.
fn assert_verified_facts(dir: &Path) {
    let report = parse_junit(&dir.join("remote.xml"));
    let props: Vec<(String, String)> = report.test_suites[0]
        .properties
        .iter()
        .map(|p| (p.name.to_string(), p.value.to_string()))
        .collect();
    assert!(
        props
            .iter()
            .any(|(k, v)| k.ends_with(".host_key") && v.starts_with("SHA256:")),
        "{props:?}"
    );
    assert!(
        props
            .iter()
            .any(|(k, v)| k.ends_with(".os") && *v == os_id()),
        "{props:?}"
    );
}

/// Whether sshd logged an authentication attempt for `user`.
fn auth_attempted(s: &Ssh, user: &str) -> bool {
    std::thread::sleep(Duration::from_millis(300));
    let Some(log) = &s.log else { return false };
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(&format!("Invalid user {user}"))
}

#[test]
fn a_passing_selector_round_trips_as_pass_with_the_host_in_classname() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |_| {});
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (verdict, classname, _) = case(dir.path());
    assert_eq!(
        (verdict.as_str(), classname.as_str()),
        ("PASS", "lessonprobe.lesson30.remote.loopback")
    );
    assert_verified_facts(dir.path());
    assert!(dir.path().join("teardown-ran").exists());
    let xml = std::fs::read_to_string(dir.path().join("remote.xml")).unwrap();
    assert!(!xml.contains("PRIVATE KEY") && !stdout.contains("PRIVATE KEY"));
}

#[test]
fn a_failing_remote_probe_is_fail() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let manifests = copy_manifests(dir.path());
    let path = manifests.join("30-replay-audit.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("expect = \"True False 1\"", "expect = \"True True 1\""),
    )
    .unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "run", format!("\"{}\"", remote_run(&manifests)))
    });
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "FAIL", "{message}");
    assert!(message.contains("output differs"), "{message}");
}

#[test]
fn an_unknown_host_key_is_error_before_any_authentication() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let known = dir.path().join("known_hosts");
    std::fs::write(&known, "[example.invalid]:22 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n").unwrap();
    let user = format!("nokey-unknown-{}", std::process::id());
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "known_hosts", format!("\"{}\"", known.display()));
        set(f, "user", format!("\"{user}\""));
    });
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains("is not in") && message.contains("refusing to authenticate"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}:{}", s.host, s.port)),
        "{message}"
    );
    assert!(
        !auth_attempted(&s, &user),
        "an authentication was attempted"
    );
    assert!(!dir.path().join("teardown-ran").exists(), "nothing may run");
}

#[test]
fn a_changed_host_key_is_error_before_any_authentication() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let other_pub = std::fs::read_to_string(format!("{}.pub", s.other_key)).unwrap();
    let key: Vec<&str> = other_pub.split_whitespace().take(2).collect();
    let known = dir.path().join("known_hosts");
    std::fs::write(
        &known,
        format!("[{}]:{} {} {}\n", s.host, s.port, key[0], key[1]),
    )
    .unwrap();
    let user = format!("nokey-changed-{}", std::process::id());
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "known_hosts", format!("\"{}\"", known.display()));
        set(f, "user", format!("\"{user}\""));
    });
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(message.contains("HOST KEY MISMATCH"), "{message}");
    assert!(
        !auth_attempted(&s, &user),
        "an authentication was attempted"
    );
}

#[test]
fn a_wrong_client_key_is_error() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "identity", format!("\"{}\"", s.other_key))
    });
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains(&format!(
            "authentication as {} with key {} refused",
            s.user, s.other_key
        )),
        "{message}"
    );
}

#[test]
fn a_remote_command_past_its_deadline_is_error_and_teardown_still_runs() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| set(f, "run", "\"sleep 37.25\"".into()));
    let started = Instant::now();
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01")
        .args(["--timeout", "2s"])
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(7),
        "took {took:?}, more than the deadline + 5 s"
    );
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(message.contains("deadline of 2s exceeded"), "{message}");
    assert!(
        dir.path().join("teardown-ran").exists(),
        "teardown did not run"
    );
    let left = processes_with("sleep 37.25");
    assert!(
        left.is_empty(),
        "the remote command is still running: {left:?}"
    );
}

/// Runs a selector on a host that accepts connections and never speaks SSH, with the host's
/// `connect_timeout` and extra arguments; returns how long that took and the ERROR message.
fn against_a_silent_listener(connect_timeout: &str, args: &[&str]) -> Option<(Duration, String)> {
    let s = ssh()?;
    let silent = listener();
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "port", silent.port.to_string());
        set(f, "connect_timeout", format!("\"{connect_timeout}\""));
    });
    let started = Instant::now();
    let out = output_within(
        remote_cmd(dir.path(), &hosts, "EX-30-01").args(args),
        Duration::from_secs(30),
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains("SSH handshake") && message.contains(&format!(":{}", silent.port)),
        "{message}"
    );
    assert_eq!(silent.count.load(Ordering::SeqCst), 1);
    Some((took, message))
}

#[test]
fn a_listener_that_never_speaks_ssh_is_error_within_the_connect_deadline() {
    let Some((took, message)) = against_a_silent_listener("2s", &[]) else {
        return;
    };
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        message.contains("the connect timeout of 2s exceeded"),
        "{message}"
    );
}

#[test]
fn an_injection_attempt_in_a_selector_exits_2_and_nothing_runs_from_the_command_line_or_a_manifest()
{
    let Some(s) = ssh() else { return };
    let watch = listener();
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| set(f, "port", watch.port.to_string()));
    let marker = dir.path().join("pwned");
    let refused = |out: std::process::Output, selector: &str, says: &[&str]| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{selector}: {stderr}");
        assert!(
            says.iter().all(|w| stderr.contains(w)),
            "{selector}: {stderr}"
        );
    };
    for selector in [
        format!("EX-30-01; touch {}", marker.display()),
        format!("$(touch {})", marker.display()),
        "-k x".into(),
    ] {
        let out = remote_cmd(dir.path(), &hosts, &selector).output().unwrap();
        refused(out, &selector, &["--selector"]);
    }
    // A manifest's selector is held to the same rule, and the error names its line.
    let manifests = copy_manifests(dir.path());
    let path = manifests.join("30-replay-audit.toml");
    let original = std::fs::read_to_string(&path).unwrap();
    let line = original
        .lines()
        .position(|l| l.starts_with("selector = "))
        .expect("lesson 30 has a remote selector")
        + 1;
    let place = format!("{}:{line}:", path.display());
    for (selector, why) in [
        (
            format!("x;touch {}", marker.display()),
            "';' is not allowed",
        ),
        ("-k".to_owned(), "must not start with '-'"),
    ] {
        let text: String = original
            .lines()
            .map(|l| match l.starts_with("selector = ") {
                true => format!("selector = \"{selector}\"\n"),
                false => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&path, text).unwrap();
        let out = lessonprobe(&repo())
            .env("TICKETFLOW_REMOTE_TESTS", "1")
            .env("LESSONPROBE_HOSTS", &hosts)
            .args(["--lesson", "30", "--no-junit", "--checkpoints"])
            .arg(&manifests)
            .output()
            .unwrap();
        refused(out, &selector, &[&place, why]);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists());
    assert_eq!(watch.count.load(Ordering::SeqCst), 0, "something connected");
}

#[test]
fn without_the_flag_nothing_connects_and_remote_probes_are_pending() {
    let Some(s) = ssh() else { return };
    let watch = listener();
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| set(f, "port", watch.port.to_string()));
    let out = lessonprobe(&repo())
        .env("LESSONPROBE_HOSTS", &hosts)
        .args(["--lesson", "30", "--select", "L30-10", "--junit"])
        .arg(dir.path().join("p.xml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let cases = verdicts(&parse_junit(&dir.path().join("p.xml")));
    assert_eq!(
        cases,
        vec![(
            "L30-10 remote-bounded-replay-preserves-live-offsets".to_owned(),
            "PENDING".to_owned()
        )]
    );
    let mut cmd = remote_cmd(dir.path(), &hosts, "EX-30-01");
    cmd.env_remove("TICKETFLOW_REMOTE_TESTS");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(case(dir.path()).0, "PENDING");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        watch.count.load(Ordering::SeqCst),
        0,
        "something connected without TICKETFLOW_REMOTE_TESTS=1"
    );
    let mut held = std::net::TcpStream::connect(("127.0.0.1", watch.port)).unwrap();
    let _ = held.set_read_timeout(Some(Duration::from_millis(10)));
    let _ = held.read(&mut [0u8; 1]);
    assert_eq!(
        watch.count.load(Ordering::SeqCst),
        1,
        "the listener records connections"
    );
}

#[test]
fn with_the_flag_but_no_host_configured_the_remote_probe_is_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = lessonprobe(dir.path())
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .args(["--lesson", "30", "--select", "L30-10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("ERROR") && stdout.contains("no authorized host is configured"),
        "{stdout}"
    );
}

#[test]
fn the_manifest_selector_runs_on_the_host_and_a_selector_that_matches_nothing_is_error() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |_| {});
    let out = lessonprobe(&repo())
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .env("LESSONPROBE_HOSTS", &hosts)
        .args(["--lesson", "30", "--select", "L30-10", "--junit"])
        .arg(dir.path().join("m.xml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("selector matched nothing on loopback"),
        "{stdout}"
    );
    let report = parse_junit(&dir.path().join("m.xml"));
    assert_eq!(
        report.test_suites[0].test_cases[0].classname.as_deref(),
        Some("lessonprobe.lesson30.remote.loopback")
    );
    assert!(dir.path().join("teardown-ran").exists());
}

#[test]
fn a_host_with_another_os_is_error_carrying_the_verified_key_and_os() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| set(f, "os", "\"plan9\"".into()));
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains(&format!(
            "expected OS \"plan9\", the host reports \"{}\"",
            os_id()
        )),
        "{message}"
    );
    // The key was verified before the OS was read: the error says what the host is.
    assert_verified_facts(dir.path());
}

/// `hosts check` with the remote flag set, which must succeed; its stdout.
fn hosts_check(hosts: &Path) -> String {
    let out = lessonprobe(&repo())
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .args(["hosts", "check", "--hosts"])
        .arg(hosts)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn hosts_check_prints_the_fingerprint_os_and_commands_and_runs_nothing() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |_| {});
    let stdout = hosts_check(&hosts);
    let expected = std::process::Command::new("ssh-keygen")
        .args([
            "-l",
            "-E",
            "sha256",
            "-F",
            &format!("[{}]:{}", s.host, s.port),
            "-f",
            &s.known_hosts,
        ])
        .output()
        .unwrap();
    let fingerprint = String::from_utf8_lossy(&expected.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("SHA256:"))
        .unwrap()
        .to_owned();
    assert!(
        stdout.contains(&format!("host key  {fingerprint}")),
        "{stdout}\nexpected {fingerprint}"
    );
    assert!(
        stdout.contains(&format!("os        {}", os_id())),
        "{stdout}"
    );
    assert!(
        stdout.contains("run       ")
            && stdout.contains("'tests/integration/test_kafka_remote.py::"),
        "{stdout}"
    );
    assert!(
        !dir.path().join("teardown-ran").exists(),
        "check must run nothing"
    );

    let out = lessonprobe(&repo())
        .args(["hosts", "check", "--hosts"])
        .arg(&hosts)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "without the flag, check refuses"
    );
}

#[test]
fn a_report_without_test_cases_is_error_selector_matched_nothing() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(
            f,
            "run",
            "\"echo '<testsuites></testsuites>' > {report}\"".into(),
        )
    });
    let out = remote_cmd(dir.path(), &hosts, "tests/a.py::test_none")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (verdict, classname, message) = case(dir.path());
    assert_eq!(
        (verdict.as_str(), classname.as_str()),
        ("ERROR", "lessonprobe.lesson30.remote.loopback")
    );
    assert!(
        message.contains("selector matched nothing on loopback"),
        "{message}"
    );
    assert!(dir.path().join("teardown-ran").exists());
}

/// Runs `cmd` to its end, failing the test (and killing it) if that takes longer than `limit`.
fn output_within(cmd: &mut std::process::Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// Processes on this machine (the "remote" host too) whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some((pid, cmd))
        })
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn cmdline(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}

/// Waits up to `within` for every process with `needle` in its command line to be gone;
/// returns those still there.
fn gone_within(needle: &str, within: Duration) -> Vec<(u32, String)> {
    let started = Instant::now();
    loop {
        let left = processes_with(needle);
        if left.is_empty() || started.elapsed() > within {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `run` template that notes the remote temp folder (through `{report}`) in `dir/report-path`
/// and then runs `then`.
fn noting_the_report(dir: &Path, then: &str) -> String {
    format!(
        "\"echo {{report}} > {}; {then}\"",
        dir.join("report-path").display()
    )
}

/// The remote temp folder the run used, as `noting_the_report` recorded it.
fn remote_temp_folder(dir: &Path) -> PathBuf {
    let report =
        std::fs::read_to_string(dir.join("report-path")).expect("the run noted its report path");
    let folder = Path::new(report.trim()).parent().unwrap().to_owned();
    assert!(
        folder.to_string_lossy().starts_with("/tmp/lessonprobe."),
        "{}",
        folder.display()
    );
    folder
}

/// Writes a JUnit report for `run = "cp FILE {report}"`.
fn fixture_report(dir: &Path, xml: &str) -> PathBuf {
    let path = dir.join("fixture.xml");
    std::fs::write(&path, xml).unwrap();
    path
}

#[test]
fn a_dropped_connection_is_error_and_teardown_cleans_up_over_a_fresh_session() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 97.{}", std::process::id());
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "run", noting_the_report(dir.path(), &marker))
    });
    let mut cmd = remote_cmd(dir.path(), &hosts, "EX-30-01");
    cmd.args(["--timeout", "60s"]);
    let dir_path = dir.path().to_owned();
    let killer = std::thread::spawn(move || {
        // The sleeping run, then the sshd process serving its connection.
        let started = Instant::now();
        let sleeper = loop {
            let found = processes_with(&marker)
                .into_iter()
                .find(|(_, cmd)| cmd.trim_end() == marker);
            if let Some((pid, _)) = found {
                break pid;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the remote run never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut pid = sleeper;
        let sshd = loop {
            pid = parent_of(pid).expect("an sshd ancestor");
            let cmd = cmdline(pid);
            if cmd.starts_with("sshd: ") && cmd.contains("@notty") {
                break pid;
            }
            assert!(pid > 1, "no sshd ancestor of the run");
        };
        std::thread::sleep(Duration::from_secs(2));
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &sshd.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        (marker, dir_path)
    });
    let out = output_within(&mut cmd, Duration::from_secs(45));
    let (marker, dir_path) = killer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let (verdict, _, message) = case(&dir_path);
    assert_eq!(verdict, "ERROR");
    assert!(message.contains("running the selector"), "{message}");
    assert!(
        dir_path.join("teardown-ran").exists(),
        "teardown did not run: {stderr}"
    );
    let left = gone_within(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "the remote run survived: {left:?}");
    let folder = remote_temp_folder(&dir_path);
    assert!(!folder.exists(), "{} was left behind", folder.display());
}

#[test]
fn a_hung_prepare_is_killed_at_the_deadline_and_teardown_runs() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 291.{}", std::process::id());
    let hosts = hosts_file(dir.path(), &s, |f| {
        f.push(("prepare".into(), format!("\"{marker}\"")));
        set(f, "run", noting_the_report(dir.path(), "true"));
    });
    let started = Instant::now();
    let out = output_within(
        remote_cmd(dir.path(), &hosts, "EX-30-01").args(["--timeout", "6s"]),
        Duration::from_secs(20),
    );
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    assert!(took < Duration::from_secs(11), "took {took:?}");
    let (verdict, _, message) = case(dir.path());
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains("the deadline of 6s exceeded while preparing"),
        "{message}"
    );
    assert!(
        dir.path().join("teardown-ran").exists(),
        "teardown did not run"
    );
    assert!(
        !dir.path().join("report-path").exists(),
        "the run must not start after a failed prepare"
    );
    let left = gone_within(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "the prepare survived: {left:?}");
}

#[test]
fn the_deadline_bounds_connecting_too() {
    let Some((took, message)) = against_a_silent_listener("10s", &["--timeout", "2s"]) else {
        return;
    };
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(message.contains("the deadline of 2s exceeded"), "{message}");
}

#[test]
fn a_hung_teardown_is_killed_at_its_deadline_and_the_temp_folder_removed() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sleep 293.{}", std::process::id());
    let fixture = fixture_report(
        dir.path(),
        r#"<testsuites><testsuite name="t"><testcase name="ok" time="0.5"/></testsuite></testsuites>"#,
    );
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(
            f,
            "run",
            noting_the_report(dir.path(), &format!("cp {} {{report}}", fixture.display())),
        );
        set(f, "teardown", format!("\"{marker}\""));
        f.push(("teardown_timeout".into(), "\"2s\"".into()));
    });
    let started = Instant::now();
    let out = output_within(
        &mut remote_cmd(dir.path(), &hosts, "EX-30-01"),
        Duration::from_secs(20),
    );
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(
        stderr.contains("teardown killed at the teardown timeout of 2s"),
        "{stderr}"
    );
    let left = gone_within(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "the teardown survived: {left:?}");
    let folder = remote_temp_folder(dir.path());
    assert!(!folder.exists(), "{} was left behind", folder.display());
}

#[test]
fn remote_case_times_come_from_the_report_and_a_lone_unnamed_testsuite_is_read() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_report(
        dir.path(),
        r#"<?xml version="1.0"?>
<testsuite tests="2" failures="1" timestamp="2026-11-30T10:00:00.123456">
  <testcase classname="tests.t" name="test_slow" time="120.5"/>
  <testcase classname="tests.t" name="test_quick" time="0.25"><failure message="no">assert 1 == 2</failure></testcase>
</testsuite>"#,
    );
    let hosts = hosts_file(dir.path(), &s, |f| {
        set(f, "run", format!("\"cp {} {{report}}\"", fixture.display()))
    });
    let out = remote_cmd(dir.path(), &hosts, "tests/t.py")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let xml = dir.path().join("remote.xml");
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let cases: Vec<(String, Option<Duration>)> = report.test_suites[0]
        .test_cases
        .iter()
        .map(|c| (c.name.to_string(), c.time))
        .collect();
    assert_eq!(
        cases,
        vec![
            (
                "remote selector :: tests.t::test_slow".to_owned(),
                Some(Duration::from_millis(120_500))
            ),
            (
                "remote selector :: tests.t::test_quick".to_owned(),
                Some(Duration::from_millis(250))
            ),
        ]
    );
    let found: Vec<String> = verdicts(&report).into_iter().map(|(_, v)| v).collect();
    assert_eq!(found, ["PASS", "FAIL"]);
}

#[test]
fn host_environment_reaches_every_command_quoted_and_hosts_check_prints_it() {
    let Some(s) = ssh() else { return };
    let dir = tempfile::tempdir().unwrap();
    let pwned = dir.path().join("pwned");
    let odd = format!("it's $HOME; `touch {}`", pwned.display());
    let fixture = fixture_report(
        dir.path(),
        r#"<testsuites><testsuite name="t"><testcase name="ok"/></testsuite></testsuites>"#,
    );
    let seen = |step: &str| dir.path().join(format!("{step}.env"));
    let hosts = hosts_file(dir.path(), &s, |f| {
        f.push((
            "env".into(),
            format!("{{ KAFKA_PROFILE = \"replay\", ODD = {odd:?} }}"),
        ));
        f.push((
            "prepare".into(),
            format!("\"env > {}\"", seen("prepare").display()),
        ));
        set(
            f,
            "run",
            format!(
                "\"env > {}; cp {} {{report}}\"",
                seen("run").display(),
                fixture.display()
            ),
        );
        set(
            f,
            "teardown",
            format!("\"env > {}\"", seen("teardown").display()),
        );
    });
    let out = remote_cmd(dir.path(), &hosts, "EX-30-01").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for step in ["prepare", "run", "teardown"] {
        let env = std::fs::read_to_string(seen(step)).unwrap();
        assert!(
            env.lines().any(|l| l == "KAFKA_PROFILE=replay"),
            "{step}: {env}"
        );
        assert!(
            env.lines().any(|l| l == format!("ODD={odd}")),
            "{step}: {env}"
        );
    }
    assert!(!pwned.exists(), "a value was interpreted by the shell");

    let stdout = hosts_check(&hosts);
    assert!(
        stdout.contains("  env       KAFKA_PROFILE='replay' ODD='it'\\''s $HOME; `touch "),
        "{stdout}"
    );
}

#[test]
fn a_bad_environment_variable_name_in_the_hosts_file_exits_2_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "[[host]]\nname = \"h\"\naddress = \"127.0.0.1\"\nuser = \"u\"\nagent = true\nknown_hosts = \"k\"\nenv = { \"KAFKA_PROFILE;id\" = \"x\" }\n",
    )
    .unwrap();
    let out = lessonprobe(dir.path())
        .args(["hosts", "list", "--hosts"])
        .arg(&hosts)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:7:", hosts.display()))
            && stderr.contains("\"KAFKA_PROFILE;id\""),
        "{stderr}"
    );
}

#[test]
fn a_pending_remote_case_names_its_selector_its_host_and_the_flag_as_set() {
    let watch = listener();
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        format!(
            "[[host]]\nname = \"ci-box\"\naddress = \"127.0.0.1\"\nport = {}\nuser = \"ci\"\nagent = true\nknown_hosts = \"/dev/null\"\n",
            watch.port
        ),
    )
    .unwrap();
    for (flag, says) in [
        (None, "TICKETFLOW_REMOTE_TESTS is not set"),
        (Some("0"), "TICKETFLOW_REMOTE_TESTS=0"),
        (Some("true"), "TICKETFLOW_REMOTE_TESTS=true"),
    ] {
        let mut cmd = lessonprobe(dir.path());
        cmd.args([
            "remote",
            "--checkpoint",
            "30",
            "--selector",
            "tests/x.py::test_y",
            "--hosts",
        ])
        .arg(&hosts)
        .arg("--junit")
        .arg(dir.path().join("remote.xml"));
        if let Some(value) = flag {
            cmd.env("TICKETFLOW_REMOTE_TESTS", value);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{flag:?}: {stdout}");
        let expected = format!(
            "{says}; set it to 1 to run selector tests/x.py::test_y on ci-box (127.0.0.1:{})",
            watch.port
        );
        let (verdict, _, message) = case(dir.path());
        assert_eq!(verdict, "PENDING", "{flag:?}");
        assert_eq!(message, format!("PENDING: {expected}"));
        assert!(stdout.contains(&expected), "{stdout}");
    }

    // No hosts file anywhere: the manifest's selector, on an authorized host to be named.
    let out = lessonprobe(&repo())
        .env("TICKETFLOW_REMOTE_TESTS", "yes")
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .args(["--lesson", "30", "--select", "L30-10", "--no-junit"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "remote-bounded-replay-preserves-live-offsets: TICKETFLOW_REMOTE_TESTS=yes; set it to 1 \
             to run selector tests/integration/test_kafka_remote.py::\
             test_bounded_replay_preserves_live_offsets_and_business_effect_counts on an authorized host"
        ),
        "{stdout}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(watch.count.load(Ordering::SeqCst), 0, "something connected");
}
