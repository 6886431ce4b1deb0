//! Helpers shared by the integration tests: the built binary, the repository's manifests, and
//! services that must exist in CI.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `lessonprobe`, run in `cwd`, with the environment cleared of our own variables.
pub fn lessonprobe(cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lessonprobe"));
    cmd.current_dir(cwd);
    for var in [
        "LESSONPROBE_CHECKPOINTS",
        "LESSONPROBE_DB",
        "LESSONPROBE_REPLAY_DB",
        "LESSONPROBE_KAFKA",
        "LESSONPROBE_HOSTS",
        "TICKETFLOW_REMOTE_TESTS",
        "LESSONPROBE_RUN_ID",
        "LESSONPROBE_COURSE",
        "LESSONPROBE_PYTHON",
        "NO_COLOR",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Whether the process whose pid is in `pid_file` is gone (or a zombie) within 5 s: a SIGKILL
/// takes effect when the process is next scheduled, which on a loaded machine is not at once.
pub fn process_gone(pid_file: &Path) -> bool {
    let pid = std::fs::read_to_string(pid_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", pid_file.display()));
    let started = Instant::now();
    loop {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
        let running = status
            .lines()
            .any(|l| l.starts_with("State:") && !l.contains('Z'));
        if !running {
            return true;
        }
        if started.elapsed() > Duration::from_secs(5) {
            eprintln!("process {} still running: {status}", pid.trim());
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The built `lessonprobe` with `args`, run in `cwd` under a pseudo-terminal (`script`), as a
/// user at a terminal runs it, with `envs` set and `NO_COLOR` unless `no_color`: what the
/// terminal showed (stdout and stderr together).
pub fn on_a_terminal(cwd: &Path, args: &str, envs: &[(&str, &str)], no_color: bool) -> String {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_lessonprobe"));
    let mut script = Command::new("script");
    script
        .current_dir(cwd)
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .env_remove("LESSONPROBE_CHECKPOINTS")
        .envs(envs.iter().copied());
    if no_color {
        script.env("NO_COLOR", "1");
    }
    let out = script.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `Some(value)` of a variable naming a service; in CI a missing one fails the test loudly,
/// elsewhere the test is skipped with the reason on stderr.
pub fn service(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if in_ci() => panic!("{var} is not set: CI must provide {what} (see .ci/run)"),
        _ => {
            eprintln!("skipped: {var} is not set, so {what} is not available (run the tests through .ci/run)");
            None
        }
    }
}

/// Whether a program is on PATH; in CI a missing one fails loudly.
pub fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(!in_ci(), "{name} is not installed: .ci/run must install it");
        eprintln!("skipped: {name} is not installed");
    }
    found
}

/// Validates a JUnit file against the schema with xmllint; panics with xmllint's words if invalid.
pub fn validate_junit(path: &Path) {
    validate_against(path, "junit-10.xsd");
}

/// Validates a JUnit file against `tests/schemas/SCHEMA` with xmllint.
pub fn validate_against(path: &Path, schema: &str) {
    if !tool("xmllint") {
        return;
    }
    let out = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(repo().join("tests/schemas").join(schema))
        .arg(path)
        .output()
        .expect("run xmllint");
    assert!(
        out.status.success(),
        "{} is not valid JUnit: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn parse_junit(path: &Path) -> quick_junit::Report {
    let xml =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    quick_junit::Report::deserialize_from_str(&xml)
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

/// `(name, verdict)` of every test case, the verdict read from the XML element.
pub fn verdicts(report: &quick_junit::Report) -> Vec<(String, String)> {
    use quick_junit::{NonSuccessKind, TestCaseStatus};
    let mut out = Vec::new();
    for suite in &report.test_suites {
        for case in &suite.test_cases {
            let verdict = match &case.status {
                TestCaseStatus::Success { .. } => "PASS".to_owned(),
                TestCaseStatus::NonSuccess {
                    kind: NonSuccessKind::Failure,
                    ..
                } => "FAIL".to_owned(),
                TestCaseStatus::NonSuccess {
                    kind: NonSuccessKind::Error,
                    ..
                } => "ERROR".to_owned(),
                TestCaseStatus::Skipped { message, .. } => message
                    .as_deref()
                    .unwrap_or("")
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_owned(),
            };
            out.push((case.name.to_string(), verdict));
        }
    }
    out
}

/// Copies the repository's manifests into `dir/checkpoints` for a test to alter.
pub fn copy_manifests(dir: &Path) -> PathBuf {
    let to = dir.join("checkpoints");
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(repo().join("checkpoints")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    to
}

/// A cluster of this test's own, so stopping it disturbs no other test.
pub struct OwnCluster {
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    runas: Option<String>,
    pub port: u16,
}

impl OwnCluster {
    pub fn start(pg_ctl: &str) -> OwnCluster {
        let pg_ctl = PathBuf::from(pg_ctl);
        let initdb = pg_ctl.with_file_name("initdb");
        let runas = std::env::var("LESSONPROBE_TEST_PG_RUNAS")
            .ok()
            .filter(|s| !s.is_empty());
        let dir = tempfile::tempdir().unwrap();
        if let Some(user) = &runas {
            assert!(Command::new("chown")
                .arg(user)
                .arg(dir.path())
                .status()
                .unwrap()
                .success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let data = dir.path().join("data");
        let user = runas
            .clone()
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".into()));
        let c = OwnCluster {
            dir,
            pg_ctl,
            runas,
            port,
        };
        c.run(
            &initdb,
            &["-D", data.to_str().unwrap(), "-U", &user, "--auth=trust"],
        );
        let opts = format!("-k {} -p {port} -h 127.0.0.1", c.dir.path().display());
        c.run(
            &c.pg_ctl,
            &[
                "-D",
                data.to_str().unwrap(),
                "-w",
                "-l",
                c.dir.path().join("log").to_str().unwrap(),
                "-o",
                &opts,
                "start",
            ],
        );
        c
    }

    fn run(&self, program: &Path, args: &[&str]) {
        let mut cmd = match &self.runas {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        };
        let out = cmd.args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn url(&self) -> String {
        let user = self
            .runas
            .clone()
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".into()));
        format!("postgres://{user}@127.0.0.1:{}/postgres", self.port)
    }

    pub fn stop(&self) {
        let data = self.dir.path().join("data");
        self.run(
            &self.pg_ctl,
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
    }
}

impl OwnCluster {
    /// Starts the stopped cluster again on the same port.
    pub fn restart(&self) {
        let data = self.dir.path().join("data");
        let opts = format!(
            "-k {} -p {} -h 127.0.0.1",
            self.dir.path().display(),
            self.port
        );
        self.run(
            &self.pg_ctl,
            &[
                "-D",
                data.to_str().unwrap(),
                "-w",
                "-l",
                self.dir.path().join("log").to_str().unwrap(),
                "-o",
                &opts,
                "start",
            ],
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let mut cmd = match &self.runas {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&self.pg_ctl);
                c
            }
            None => Command::new(&self.pg_ctl),
        };
        let _ = cmd
            .args(["-D", data.to_str().unwrap(), "-m", "immediate", "stop"])
            .output();
    }
}

/// `lessonprobe broker`, stopped with SIGTERM when dropped.
pub struct BrokerProcess {
    pub child: Child,
    pub servers: String,
    /// What it said on stderr up to its ready line (the sample day's load report among it).
    pub report: Vec<String>,
}

impl BrokerProcess {
    pub fn start(args: &[&str]) -> BrokerProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
            .arg("broker")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lessonprobe broker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read the bootstrap line");
        let servers = line.trim().to_owned();
        assert!(servers.starts_with("127.0.0.1:"), "first line: {servers:?}");
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut report = Vec::new();
        for line in stderr.by_ref() {
            let line = line.expect("read the broker's stderr");
            let ready = line.ends_with("Ctrl-C or SIGTERM stops it");
            report.push(line);
            if ready {
                break;
            }
        }
        // The rest is drained, so the broker never blocks on a full pipe.
        std::thread::spawn(move || stderr.for_each(drop));
        BrokerProcess {
            child,
            servers,
            report,
        }
    }

    pub fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn reader(servers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

pub fn committed(servers: &str, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let consumer = reader(servers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let answer = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    let out = (0..partitions)
        .map(
            |p| match answer.find_partition(topic, p).unwrap().offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            },
        )
        .collect();
    drop(answer);
    out
}

pub fn partitions_of(servers: &str, topic: &str) -> i32 {
    let consumer = reader(servers, "test-metadata");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    md.topics()[0].partitions().len() as i32
}

/// First offset whose timestamp is at or after `ts`, found by reading the whole partition.
pub fn first_offset_at(servers: &str, topic: &str, partition: i32, ts: i64) -> Option<i64> {
    let consumer = reader(servers, "test-scan");
    let (low, high) = consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(low))
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut next = low;
    while next < high {
        let m = consumer
            .poll(Duration::from_secs(10))
            .expect("a record")
            .unwrap();
        if m.timestamp().to_millis().unwrap() >= ts {
            return Some(m.offset());
        }
        next = m.offset() + 1;
    }
    None
}

/// Commits `offsets[p]` for `group` on each partition `p`, as a running service would.
pub fn commit(servers: &str, group: &str, topic: &str, offsets: &[i64]) {
    let consumer = reader(servers, group);
    let mut tpl = TopicPartitionList::new();
    for (p, &o) in offsets.iter().enumerate() {
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(o))
            .unwrap();
    }
    consumer
        .commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        .unwrap();
}

/// `(low, high)` of every partition.
pub fn watermarks(servers: &str, topic: &str) -> Vec<(i64, i64)> {
    let consumer = reader(servers, "test-watermarks");
    (0..partitions_of(servers, topic))
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap()
        })
        .collect()
}
