//! Remote selectors over SSH against the throwaway sshd that scripts/test.sh starts on
//! loopback; the "remote" side runs the freshly built lessonprobe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka;
use lessonprobe_testkit::process::{cmdline, gone_within, parent_of, processes_with};
use lessonprobe_testkit::ssh::{os_id, Ssh};
use lessonprobe_testkit::*;
use rdkafka::consumer::Consumer;

/// The freshly built binary, as the remote host's `run` command, reading `checkpoints`.
fn remote_run(checkpoints: &Path) -> String {
    format!(
        "{} --checkpoint {{checkpoint}} --select {{selector}} --junit {{report}} --checkpoints {}",
        bin().display(),
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

/// `lessonprobe remote` of lesson 30's `selector` in `dir`, on the hosts of `hosts`, with the
/// remote flag set; its report goes to `dir/remote.xml`.
fn remote_cmd(dir: &Path, hosts: &Path, selector: &str) -> Test {
    pending_remote(dir, hosts, selector).env("TICKETFLOW_REMOTE_TESTS", "1")
}

/// `remote_cmd` without the remote flag.
fn pending_remote(dir: &Path, hosts: &Path, selector: &str) -> Test {
    lessonprobe()
        .current_dir(dir)
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
        .arg(dir.join("remote.xml"))
}

fn case(dir: &Path) -> (String, String, String) {
    let xml = dir.join("remote.xml");
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let suite = &report.test_suites[0];
    assert_eq!(suite.test_cases.len(), 1, "{:?}", suite.test_cases);
    let c = &suite.test_cases[0];
    (
        verdict(c),
        c.classname.as_deref().unwrap_or("").to_owned(),
        message(c),
    )
}

/// The one case of the run in `dir` has `verdict` and a message that contains `says`.
#[track_caller]
fn assert_case(dir: &Path, verdict: &str, says: &str) {
    let (got, _, message) = case(dir);
    assert_eq!(got, verdict, "{message}");
    assert!(message.contains(says), "{message}");
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

#[test]
fn a_passing_selector_round_trips_as_pass_with_the_host_in_classname() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |_| {});
    remote_cmd(&dir, &hosts, "EX-30-01")
        .stdout_lacks("PRIVATE KEY")
        .success();
    let (verdict, classname, _) = case(&dir);
    assert_eq!(
        (verdict.as_str(), classname.as_str()),
        ("PASS", "lessonprobe.lesson30.remote.loopback")
    );
    assert_verified_facts(&dir);
    assert!(dir.join("teardown-ran").exists());
    let xml = std::fs::read_to_string(dir.join("remote.xml")).unwrap();
    assert!(!xml.contains("PRIVATE KEY"));
}

#[test]
fn a_failing_remote_probe_is_fail() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let manifests = copy_manifests(&dir);
    dir.edit(
        "checkpoints/30-replay-audit.toml",
        "expect = \"True False 1\"",
        "expect = \"True True 1\"",
    );
    let hosts = hosts_file(&dir, &s, |f| {
        set(f, "run", format!("\"{}\"", remote_run(&manifests)))
    });
    remote_cmd(&dir, &hosts, "EX-30-01").failure();
    assert_case(&dir, "FAIL", "output differs");
}

#[test]
fn an_unknown_host_key_is_error_before_any_authentication() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let known = dir.write("known_hosts", "[example.invalid]:22 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n");
    let message = refused_before_authentication(&dir, &s, &known, "nokey-unknown");
    assert!(
        message.contains("is not in") && message.contains("refusing to authenticate"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{}:{}", s.host, s.port)),
        "{message}"
    );
    assert!(!dir.join("teardown-ran").exists(), "nothing may run");
}

#[test]
fn a_changed_host_key_is_error_before_any_authentication() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let other_pub = std::fs::read_to_string(format!("{}.pub", s.other_key)).unwrap();
    let key: Vec<&str> = other_pub.split_whitespace().take(2).collect();
    let known = dir.write(
        "known_hosts",
        format!("[{}]:{} {} {}\n", s.host, s.port, key[0], key[1]),
    );
    let message = refused_before_authentication(&dir, &s, &known, "nokey-changed");
    assert!(message.contains("HOST KEY MISMATCH"), "{message}");
}

/// Runs EX-30-01 on the host as a user named `user_prefix` and this process's id, trusting
/// only the host keys in `known`; the case must be an error, the server must have seen no
/// authentication by that user, and the case's message is returned.
#[track_caller]
fn refused_before_authentication(dir: &Dir, s: &Ssh, known: &Path, user_prefix: &str) -> String {
    let user = format!("{user_prefix}-{}", std::process::id());
    let hosts = hosts_file(dir, s, |f| {
        set(f, "known_hosts", format!("\"{}\"", known.display()));
        set(f, "user", format!("\"{user}\""));
    });
    remote_cmd(dir, &hosts, "EX-30-01").failure();
    let (verdict, _, message) = case(dir);
    assert_eq!(verdict, "ERROR");
    assert!(!s.auth_attempted(&user), "an authentication was attempted");
    message
}

#[test]
fn a_wrong_client_key_is_error() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| {
        set(f, "identity", format!("\"{}\"", s.other_key))
    });
    remote_cmd(&dir, &hosts, "EX-30-01").failure();
    assert_case(
        &dir,
        "ERROR",
        &format!(
            "authentication as {} with key {} refused",
            s.user, s.other_key
        ),
    );
}

#[test]
fn a_remote_command_past_its_deadline_is_error_and_teardown_still_runs() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| set(f, "run", "\"sleep 37.25\"".into()));
    // At most the deadline + 5 s. The deadline counts from before connecting: it leaves
    // room for the handshake and the temp folder on a loaded machine, or the run would end
    // before anything started and there would be nothing to tear down.
    let ran = remote_cmd(&dir, &hosts, "EX-30-01")
        .args(["--timeout", "3s"])
        .within(Duration::from_secs(8))
        .failure();
    assert_case(&dir, "ERROR", "deadline of 3s exceeded");
    assert!(
        dir.join("teardown-ran").exists(),
        "teardown did not run: {}",
        ran.text()
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
    let s = Ssh::from_env()?;
    let silent = SilentListener::start();
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| {
        set(f, "port", silent.port.to_string());
        set(f, "connect_timeout", format!("\"{connect_timeout}\""));
    });
    let took = remote_cmd(&dir, &hosts, "EX-30-01")
        .args(args)
        .within(Duration::from_secs(30))
        .failure()
        .elapsed;
    let (verdict, _, message) = case(&dir);
    assert_eq!(verdict, "ERROR");
    assert!(
        message.contains("SSH handshake") && message.contains(&format!(":{}", silent.port)),
        "{message}"
    );
    assert_eq!(silent.connections(), 1);
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
    let Some(s) = Ssh::from_env() else { return };
    let watch = SilentListener::start();
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| set(f, "port", watch.port.to_string()));
    let marker = dir.join("pwned");
    for selector in [
        format!("EX-30-01; touch {}", marker.display()),
        format!("$(touch {})", marker.display()),
        "-k x".into(),
    ] {
        remote_cmd(&dir, &hosts, &selector)
            .stderr_has("--selector")
            .status(2);
    }
    // A manifest's selector is held to the same rule, and the error names its line.
    let manifests = copy_manifests(&dir);
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
        lessonprobe()
            .in_repo()
            .env("TICKETFLOW_REMOTE_TESTS", "1")
            .env("LESSONPROBE_HOSTS", &hosts)
            .args(["--lesson", "30", "--no-junit", "--checkpoints"])
            .arg(&manifests)
            .stderr_has(&place)
            .stderr_has(why)
            .status(2);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!marker.exists());
    assert_eq!(watch.connections(), 0, "something connected");
}

#[test]
fn without_the_flag_nothing_connects_and_remote_probes_are_pending() {
    let Some(s) = Ssh::from_env() else { return };
    let watch = SilentListener::start();
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| set(f, "port", watch.port.to_string()));
    lessonprobe()
        .in_repo()
        .env("LESSONPROBE_HOSTS", &hosts)
        .args(["--lesson", "30", "--select", "L30-10", "--junit"])
        .arg(dir.join("p.xml"))
        .success();
    let cases = verdicts(&parse_junit(&dir.join("p.xml")));
    assert_eq!(
        cases,
        vec![(
            "L30-10 remote-bounded-replay-preserves-live-offsets".to_owned(),
            "PENDING".to_owned()
        )]
    );
    pending_remote(&dir, &hosts, "EX-30-01").success();
    assert_eq!(case(&dir).0, "PENDING");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        watch.connections(),
        0,
        "something connected without TICKETFLOW_REMOTE_TESTS=1"
    );
    let mut held = std::net::TcpStream::connect(("127.0.0.1", watch.port)).unwrap();
    let _ = held.set_read_timeout(Some(Duration::from_millis(10)));
    let _ = held.read(&mut [0u8; 1]);
    // Its thread accepts when it is scheduled: on a loaded machine, later than the read.
    watch.wait_for_connection(Duration::from_secs(5));
    assert_eq!(watch.connections(), 1, "the listener records connections");
}

#[test]
fn with_the_flag_but_no_host_configured_the_remote_probe_is_error() {
    let dir = Dir::new();
    dir.lessonprobe()
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .env("HOME", &*dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .args(["--lesson", "30", "--select", "L30-10"])
        .stdout_has("ERROR")
        .stdout_has("no authorized host is configured")
        .failure();
}

#[test]
fn the_manifest_selector_runs_on_the_host_and_a_selector_that_matches_nothing_is_error() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |_| {});
    lessonprobe()
        .in_repo()
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .env("LESSONPROBE_HOSTS", &hosts)
        .args(["--lesson", "30", "--select", "L30-10", "--junit"])
        .arg(dir.join("m.xml"))
        .stdout_has("selector matched nothing on loopback")
        .failure();
    let report = parse_junit(&dir.join("m.xml"));
    assert_eq!(
        report.test_suites[0].test_cases[0].classname.as_deref(),
        Some("lessonprobe.lesson30.remote.loopback")
    );
    assert!(dir.join("teardown-ran").exists());
}

#[test]
fn a_host_with_another_os_is_error_carrying_the_verified_key_and_os() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| set(f, "os", "\"plan9\"".into()));
    remote_cmd(&dir, &hosts, "EX-30-01").failure();
    assert_case(
        &dir,
        "ERROR",
        &format!("expected OS \"plan9\", the host reports \"{}\"", os_id()),
    );
    // The key was verified before the OS was read: the error says what the host is.
    assert_verified_facts(&dir);
}

/// `hosts check` with the remote flag set, which must succeed; its stdout.
fn hosts_check(hosts: &Path) -> String {
    hosts_check_without_the_flag(hosts)
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .success()
        .stdout
}

fn hosts_check_without_the_flag(hosts: &Path) -> Test {
    lessonprobe()
        .in_repo()
        .args(["hosts", "check", "--hosts"])
        .arg(hosts)
}

#[test]
fn hosts_check_prints_the_fingerprint_os_and_commands_and_runs_nothing() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |_| {});
    let stdout = hosts_check(&hosts);
    let place = format!("[{}]:{}", s.host, s.port);
    let fingerprint = Test::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-F", &place, "-f", &s.known_hosts])
        .success()
        .stdout
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
    assert!(!dir.join("teardown-ran").exists(), "check must run nothing");

    // Without the flag, check refuses.
    hosts_check_without_the_flag(&hosts).status(2);
}

#[test]
fn a_report_without_test_cases_is_error_selector_matched_nothing() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let hosts = hosts_file(&dir, &s, |f| {
        set(
            f,
            "run",
            "\"echo '<testsuites></testsuites>' > {report}\"".into(),
        )
    });
    remote_cmd(&dir, &hosts, "tests/a.py::test_none").failure();
    let (verdict, classname, message) = case(&dir);
    assert_eq!(
        (verdict.as_str(), classname.as_str()),
        ("ERROR", "lessonprobe.lesson30.remote.loopback")
    );
    assert!(
        message.contains("selector matched nothing on loopback"),
        "{message}"
    );
    assert!(dir.join("teardown-ran").exists());
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

/// Nothing of the run in `dir` is left on the host: within 3 s no process runs `marker` (what
/// `what` ran), and the remote temp folder is gone.
#[track_caller]
fn assert_nothing_left(dir: &Path, marker: &str, what: &str) {
    let left = gone_within(marker, Duration::from_secs(3));
    assert!(left.is_empty(), "{what} survived: {left:?}");
    let folder = remote_temp_folder(dir);
    assert!(!folder.exists(), "{} was left behind", folder.display());
}

/// Writes a JUnit report for `run = "cp FILE {report}"`.
fn fixture_report(dir: &Dir, xml: &str) -> PathBuf {
    dir.write("fixture.xml", xml)
}

#[test]
fn a_dropped_connection_is_error_and_teardown_cleans_up_over_a_fresh_session() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let marker = format!("sleep 97.{}", std::process::id());
    let hosts = hosts_file(&dir, &s, |f| {
        set(f, "run", noting_the_report(&dir, &marker))
    });
    let running = remote_cmd(&dir, &hosts, "EX-30-01")
        .args(["--timeout", "60s"])
        .within(Duration::from_secs(45))
        .spawn();
    let run_marker = marker.clone();
    let killer = std::thread::spawn(move || {
        let marker = run_marker;
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
        Test::new("kill")
            .args(["-KILL", &sshd.to_string()])
            .success();
    });
    let ran = running.failure();
    killer.join().unwrap();
    assert_case(&dir, "ERROR", "running the selector");
    assert!(
        dir.join("teardown-ran").exists(),
        "teardown did not run: {}",
        ran.stderr
    );
    assert_nothing_left(&dir, &marker, "the remote run");
}

#[test]
fn a_hung_prepare_is_killed_at_the_deadline_and_teardown_runs() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let marker = format!("sleep 291.{}", std::process::id());
    let hosts = hosts_file(&dir, &s, |f| {
        f.push(("prepare".into(), format!("\"{marker}\"")));
        set(f, "run", noting_the_report(&dir, "true"));
    });
    remote_cmd(&dir, &hosts, "EX-30-01")
        .args(["--timeout", "6s"])
        .within(Duration::from_secs(11))
        .failure();
    assert_case(&dir, "ERROR", "the deadline of 6s exceeded while preparing");
    assert!(dir.join("teardown-ran").exists(), "teardown did not run");
    assert!(
        !dir.join("report-path").exists(),
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
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let marker = format!("sleep 293.{}", std::process::id());
    let fixture = fixture_report(
        &dir,
        r#"<testsuites><testsuite name="t"><testcase name="ok" time="0.5"/></testsuite></testsuites>"#,
    );
    let hosts = hosts_file(&dir, &s, |f| {
        set(
            f,
            "run",
            noting_the_report(&dir, &format!("cp {} {{report}}", fixture.display())),
        );
        set(f, "teardown", format!("\"{marker}\""));
        f.push(("teardown_timeout".into(), "\"2s\"".into()));
    });
    remote_cmd(&dir, &hosts, "EX-30-01")
        .within(Duration::from_secs(8))
        .stderr_has("teardown killed at the teardown timeout of 2s")
        .success();
    assert_nothing_left(&dir, &marker, "the teardown");
}

#[test]
fn remote_case_times_come_from_the_report_and_a_lone_unnamed_testsuite_is_read() {
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let fixture = fixture_report(
        &dir,
        r#"<?xml version="1.0"?>
<testsuite tests="2" failures="1" timestamp="2026-11-30T10:00:00.123456">
  <testcase classname="tests.t" name="test_slow" time="120.5"/>
  <testcase classname="tests.t" name="test_quick" time="0.25"><failure message="no">assert 1 == 2</failure></testcase>
</testsuite>"#,
    );
    let hosts = hosts_file(&dir, &s, |f| {
        set(f, "run", format!("\"cp {} {{report}}\"", fixture.display()))
    });
    remote_cmd(&dir, &hosts, "tests/t.py").failure();
    let xml = dir.join("remote.xml");
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
    let Some(s) = Ssh::from_env() else { return };
    let dir = Dir::new();
    let pwned = dir.join("pwned");
    let odd = format!("it's $HOME; `touch {}`", pwned.display());
    let fixture = fixture_report(
        &dir,
        r#"<testsuites><testsuite name="t"><testcase name="ok"/></testsuite></testsuites>"#,
    );
    let seen = |step: &str| dir.join(format!("{step}.env"));
    let hosts = hosts_file(&dir, &s, |f| {
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
    remote_cmd(&dir, &hosts, "EX-30-01").success();
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
    let dir = Dir::new();
    let hosts = dir.write(
        "hosts.toml",
        "[[host]]\nname = \"h\"\naddress = \"127.0.0.1\"\nuser = \"u\"\nagent = true\nknown_hosts = \"k\"\nenv = { \"KAFKA_PROFILE;id\" = \"x\" }\n",
    );
    dir.lessonprobe()
        .args(["hosts", "list", "--hosts"])
        .arg(&hosts)
        .stderr_has(format!("{}:7:", hosts.display()))
        .stderr_has("\"KAFKA_PROFILE;id\"")
        .status(2);
}

#[test]
fn a_pending_remote_case_names_its_selector_its_host_and_the_flag_as_set() {
    let watch = SilentListener::start();
    let dir = Dir::new();
    let hosts = dir.write(
        "hosts.toml",
        format!(
            "[[host]]\nname = \"ci-box\"\naddress = \"127.0.0.1\"\nport = {}\nuser = \"ci\"\nagent = true\nknown_hosts = \"/dev/null\"\n",
            watch.port
        ),
    );
    for (flag, says) in [
        (None, "TICKETFLOW_REMOTE_TESTS is not set"),
        (Some("0"), "TICKETFLOW_REMOTE_TESTS=0"),
        (Some("true"), "TICKETFLOW_REMOTE_TESTS=true"),
    ] {
        let expected = format!(
            "{says}; set it to 1 to run selector tests/x.py::test_y on ci-box (127.0.0.1:{})",
            watch.port
        );
        let mut run = pending_remote(&dir, &hosts, "tests/x.py::test_y");
        if let Some(value) = flag {
            run = run.env("TICKETFLOW_REMOTE_TESTS", value);
        }
        run.stdout_has(&expected).success();
        let (verdict, _, message) = case(&dir);
        assert_eq!(verdict, "PENDING", "{flag:?}");
        assert_eq!(message, format!("PENDING: {expected}"));
    }

    // No hosts file anywhere: the manifest's selector, on an authorized host to be named.
    lessonprobe()
        .in_repo()
        .env("TICKETFLOW_REMOTE_TESTS", "yes")
        .env("HOME", &*dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .args(["--lesson", "30", "--select", "L30-10", "--no-junit"])
        .stdout_has(
            "remote-bounded-replay-preserves-live-offsets: TICKETFLOW_REMOTE_TESTS=yes; set it to 1 \
             to run selector tests/integration/test_kafka_remote.py::\
             test_bounded_replay_preserves_live_offsets_and_business_effect_counts on an authorized host",
        )
        .success();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(watch.connections(), 0, "something connected");
}

/// 2026-09-23T00:00:00Z: where the course's acceptance test ends its replay of yesterday.
const TODAY_MS: i64 = 1_790_121_600_000;

/// The sample course as the remote host's checkout of it: a copy, so the profile its prepare
/// step writes and pytest's caches stay out of the repository.
fn course_checkout(dir: &Path) -> PathBuf {
    let checkout = dir.join("ticketflow-course");
    copy_dir(&repo().join("examples/ticketflow-course"), &checkout);
    checkout
}

/// A host that runs the course's own pytest (the default `run`) in the course project with the
/// test interpreter first on PATH, its prepare step `prepare` and `env` more variables.
fn course_host(
    dir: &Path,
    s: &Ssh,
    python: &str,
    prepare: Option<String>,
    env: &[(&str, &str)],
) -> PathBuf {
    let project = course_checkout(dir).join("project");
    let bin = Path::new(python)
        .parent()
        .expect("the interpreter's folder");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut vars = vec![format!("PATH = {path:?}")];
    vars.extend(env.iter().map(|(k, v)| format!("{k} = {v:?}")));
    hosts_file(dir, s, |f| {
        f.retain(|(k, _)| k != "run");
        set(f, "workdir", format!("{:?}", project.display().to_string()));
        set(
            f,
            "teardown",
            format!(
                "\"sh scripts/stop_kafka_profile.sh && touch {}\"",
                dir.join("teardown-ran").display()
            ),
        );
        if let Some(prepare) = prepare {
            f.push(("prepare".into(), format!("{prepare:?}")));
        }
        f.push(("env".into(), format!("{{ {} }}", vars.join(", "))));
    })
}

/// The course's prepare step pointing it at the broker `servers`.
fn prepare_for(servers: &str) -> Option<String> {
    Some(format!("sh scripts/prepare_kafka_profile.sh {servers}"))
}

/// `lessonprobe --lesson 30 --course examples/ticketflow-course` with the remote flag, on the
/// hosts of `hosts`, `select`ing probes if any; its report is `dir/NAME.xml`.
fn course_lesson_30(dir: &Path, hosts: &Path, python: &str, name: &str, select: &[&str]) -> Test {
    let mut run = lessonprobe()
        .in_repo()
        .env("TICKETFLOW_REMOTE_TESTS", "1")
        .args([
            "--lesson",
            "30",
            "--course",
            "examples/ticketflow-course",
            "--python",
            python,
        ])
        .args(["--timeout", "120s", "--hosts"])
        .arg(hosts)
        .arg("--junit")
        .arg(dir.join(format!("{name}.xml")));
    for pattern in select {
        run = run.args(["--select", pattern]);
    }
    run
}

/// The one L30-10 case of `dir/NAME.xml`: its verdict, message and output.
#[track_caller]
fn l30_10(dir: &Path, name: &str) -> (String, String, String) {
    let xml = dir.join(format!("{name}.xml"));
    validate_junit(&xml);
    let report = parse_junit(&xml);
    let cases: Vec<_> = report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .filter(|c| c.name.starts_with("L30-10 "))
        .collect();
    assert_eq!(cases.len(), 1, "{:?}", verdicts(&report));
    let c = cases[0];
    assert_eq!(
        c.classname.as_deref(),
        Some("lessonprobe.lesson30.remote.loopback")
    );
    let output = c.system_out.as_deref().unwrap_or("").to_owned();
    (verdict(c), message(c), output)
}

#[test]
fn the_course_acceptance_test_passes_on_apache_kafka_and_is_error_once_the_broker_is_gone() {
    let Some(s) = Ssh::from_env() else { return };
    let Some(python) = services::python() else {
        return;
    };
    on_apache_kafka(|_| {
        let broker = ApacheKafka::start(1);
        let dir = Dir::new();
        let hosts = course_host(&dir, &s, &python, prepare_for(&broker.servers), &[]);
        // The whole lesson, as a course's CI runs it: every local probe and the remote one.
        course_lesson_30(&dir, &hosts, &python, "up", &[]).success();
        let (verdict, message, output) = l30_10(&dir, "up");
        assert_eq!(verdict, "PASS", "{message}\n{output}");
        let cases = verdicts(&parse_junit(&dir.join("up.xml")));
        assert!(
            !cases
                .iter()
                .any(|(_, v)| v == "FAIL" || v == "ERROR" || v == "PENDING"),
            "{cases:?}"
        );
        assert!(dir.join("teardown-ran").exists(), "teardown did not run");
        assert!(
            !dir.join("ticketflow-course/project/.kafka-profile")
                .exists(),
            "teardown left the Kafka profile behind"
        );

        // The broker's own answers: the acceptance test's topic, its live group at the end
        // of every partition, its replay group at yesterday's stop, inside the partition.
        let consumer = kafka::reader(&broker.servers, "test-metadata");
        let metadata = consumer
            .fetch_metadata(None, Duration::from_secs(10))
            .unwrap();
        let topics: Vec<String> = metadata
            .topics()
            .iter()
            .map(|t| t.name().to_owned())
            .filter(|t| t.starts_with("ticketflow.audit.v1.acceptance-"))
            .collect();
        assert_eq!(topics.len(), 1, "{topics:?}");
        let topic = &topics[0];
        let run = &topic["ticketflow.audit.v1.acceptance-".len()..];
        let ends: Vec<i64> = kafka::watermarks(&broker.servers, topic)
            .iter()
            .map(|w| w.1)
            .collect();
        assert_eq!(ends.len(), 3, "partitions of {topic}");
        let live = kafka::committed(
            &broker.servers,
            &format!("ticketflow-audit-v1.acceptance-{run}"),
            topic,
            3,
        );
        assert_eq!(live, ends.iter().map(|&e| Some(e)).collect::<Vec<_>>());
        let replay = kafka::committed(
            &broker.servers,
            &format!("ticketflow-replay-20260922.acceptance-{run}"),
            topic,
            3,
        );
        for (p, (stop, end)) in replay.iter().zip(&ends).enumerate() {
            let day_after = kafka::first_offset_at(&broker.servers, topic, p as i32, TODAY_MS);
            assert_eq!(*stop, day_after, "replay group on partition {p}");
            assert!(
                stop.is_some_and(|s| s < *end),
                "partition {p}: {stop:?} < {end}"
            );
        }
        drop(metadata);
        drop(consumer);

        // The broker stopped: the prepare step finds nothing to point the course at.
        broker.stop();
        std::fs::remove_file(dir.join("teardown-ran")).unwrap();
        course_lesson_30(&dir, &hosts, &python, "down", &["L30-10"]).failure();
        let (verdict, message, output) = l30_10(&dir, "down");
        assert_eq!(verdict, "ERROR", "{message}\n{output}");
        assert!(
            message.contains("prepare exited with status 1"),
            "{message}"
        );
        assert!(
            output.contains(&format!("the broker at {} does not answer", broker.servers)),
            "{output}"
        );
        assert!(dir.join("teardown-ran").exists(), "teardown did not run");

        // Without a prepare step, the profile named in the environment: the test's own
        // fixture finds no broker, an error of the test, not a failure or a skip.
        let dir = Dir::new();
        let hosts = course_host(
            &dir,
            &s,
            &python,
            None,
            &[("TICKETFLOW_KAFKA_BOOTSTRAP", &broker.servers)],
        );
        course_lesson_30(&dir, &hosts, &python, "unprepared", &["L30-10"]).failure();
        let (verdict, message, output) = l30_10(&dir, "unprepared");
        assert_eq!(verdict, "ERROR", "{message}\n{output}");
        assert!(message.contains("does not answer"), "{message}");

        // No profile at all: the test is skipped, saying where a profile comes from; never PASS.
        let dir = Dir::new();
        let hosts = course_host(&dir, &s, &python, None, &[]);
        course_lesson_30(&dir, &hosts, &python, "none", &["L30-10"]).success();
        let (verdict, message, _) = l30_10(&dir, "none");
        assert_eq!(verdict, "SKIP", "{message}");
        assert!(
            message.contains("no Kafka profile on this host"),
            "{message}"
        );
    });
}
