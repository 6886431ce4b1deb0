//! The broker the day is loaded into, started for the run and stopped when it ends.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ticketflow::kafka::Broker;
use ticketflow::KafkaTarget;

use super::TOPIC;

/// Which broker the day is loaded into.
#[derive(Clone, Copy, PartialEq)]
pub enum BrokerKind {
    /// `lessonprobe broker`: librdkafka's mock cluster in a process of its own.
    Mock,
    /// A throwaway Apache Kafka started by `scripts/kafka.sh`.
    ApacheKafka,
}

impl BrokerKind {
    pub fn from_env() -> BrokerKind {
        super::choice(
            "LESSONPROBE_BENCH_BROKER",
            &[
                ("mock", BrokerKind::Mock),
                ("apache-kafka", BrokerKind::ApacheKafka),
            ],
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            BrokerKind::Mock => "mock",
            BrokerKind::ApacheKafka => "apache-kafka",
        }
    }
}

/// The running broker, stopped when dropped (a panic included).
pub enum BrokerGuard {
    Mock(Child),
    /// The directory `scripts/kafka.sh start` was given; removed after the stop.
    ApacheKafka(tempfile::TempDir),
}

impl Drop for BrokerGuard {
    fn drop(&mut self) {
        match self {
            BrokerGuard::Mock(child) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            BrokerGuard::ApacheKafka(dir) => {
                let stopped = Command::new("bash")
                    .arg(kafka_script())
                    .arg("stop")
                    .arg(dir.path())
                    .status();
                if !stopped.as_ref().is_ok_and(|s| s.success()) {
                    eprintln!(
                        "scripts/kafka.sh stop {} failed: {stopped:?}",
                        dir.path().display()
                    );
                }
            }
        }
    }
}

pub fn kafka_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kafka.sh")
}

/// Starts the broker and makes the topic: `lessonprobe broker` hosts it with a sample day of one
/// event; on Apache Kafka it is created through the admin API, empty.
pub fn start_broker(kind: BrokerKind, partitions: usize) -> (BrokerGuard, String) {
    match kind {
        BrokerKind::Mock => {
            let mut child = Command::new(env!("CARGO_BIN_EXE_lessonprobe"))
                .args([
                    "broker",
                    "--sample-day",
                    TOPIC,
                    "--events",
                    "1",
                    "--partitions",
                    &partitions.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start lessonprobe broker");
            let stdout = child.stdout.take().expect("stdout");
            let guard = BrokerGuard::Mock(child);
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("bootstrap line");
            (guard, line.trim().to_owned())
        }
        BrokerKind::ApacheKafka => {
            let dir = tempfile::Builder::new()
                .prefix("lessonprobe-bench-kafka.")
                .tempdir()
                .expect("tempdir");
            let path = dir.path().to_owned();
            // The guard first: a start that fails half way still gets its stop.
            let guard = BrokerGuard::ApacheKafka(dir);
            // Both of the JVM's compilers, as a broker in production runs (the test kit's
            // brokers start sooner with the first alone), unless the caller chose.
            let jit = std::env::var("LESSONPROBE_KAFKA_JIT").unwrap_or_else(|_| "full".into());
            let out = Command::new("bash")
                .arg(kafka_script())
                .arg("start")
                .arg(&path)
                .env("LESSONPROBE_KAFKA_JIT", jit)
                .stderr(Stdio::inherit())
                .output()
                .expect("run scripts/kafka.sh start");
            assert!(
                out.status.success(),
                "scripts/kafka.sh start {} failed",
                path.display()
            );
            let servers = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(!servers.is_empty(), "scripts/kafka.sh printed no servers");
            let target = KafkaTarget::Bootstrap {
                servers: servers.clone(),
                properties: Vec::new(),
            };
            let mut broker = Broker::for_target(&target, Duration::from_secs(10)).expect("broker");
            let have = broker
                .create_topic(TOPIC, partitions as i32)
                .expect("create the topic");
            assert_eq!(have, partitions as i32, "partitions of {TOPIC}");
            // The broker goes with its directory: nothing to delete.
            broker.keep_created_topics();
            (guard, servers)
        }
    }
}
