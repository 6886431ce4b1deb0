//! The brokers a broker-facing test runs on: `lessonprobe broker` (librdkafka's mock cluster) in
//! a process of its own, or a throwaway Apache Kafka started through `scripts/kafka.sh`, chosen by
//! one switch ([`BrokerKind`], and [`on_each_broker!`](crate::on_each_broker) to run a test on
//! both). Also records a test produces, and what a broker holds read back through a client of the
//! test's own: committed offsets, watermarks, the offset of a time.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::ToBytes;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(10);

/// Which broker a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerKind {
    /// librdkafka's mock cluster, hosted by `lessonprobe broker`.
    MockCluster,
    /// Apache Kafka at the version `scripts/kafka/pom.xml` pins, one KRaft node of its own.
    ApacheKafka,
}

impl BrokerKind {
    /// A broker with no topics of the test's yet.
    #[track_caller]
    pub fn start(self) -> BrokerProcess {
        match self {
            BrokerKind::MockCluster => BrokerProcess::start(&[]),
            BrokerKind::ApacheKafka => BrokerProcess::apache(ApacheKafka::start(1)),
        }
    }

    /// A broker whose `topic` holds a sample day of `events` events over `partitions`.
    #[track_caller]
    pub fn sample_day(self, topic: &str, events: usize, partitions: i32) -> BrokerProcess {
        match self {
            BrokerKind::MockCluster => BrokerProcess::sample_day(topic, events, partitions),
            BrokerKind::ApacheKafka => {
                let mut broker = BrokerProcess::apache(ApacheKafka::start(1));
                broker.report = load_sample_day(&broker.servers, topic, events, partitions);
                broker
            }
        }
    }

    /// A broker for topics a test fills itself with [`produce`].
    #[track_caller]
    pub fn for_own_records(self) -> BrokerProcess {
        match self {
            BrokerKind::MockCluster => BrokerProcess::for_own_records(),
            BrokerKind::ApacheKafka => self.start(),
        }
    }

    /// Whether this broker can run here: the mock always; Apache Kafka when the test command
    /// fetched it (in CI its absence fails the test, elsewhere it is skipped, saying why).
    #[track_caller]
    pub fn available(self) -> bool {
        match self {
            BrokerKind::MockCluster => true,
            BrokerKind::ApacheKafka => apache_kafka_root().is_some(),
        }
    }
}

/// Runs each broker-facing test on both brokers, as `NAME::mock_cluster` and
/// `NAME::apache_kafka`; the body receives the [`BrokerKind`]:
///
/// ```ignore
/// on_each_broker! {
///     /// What it pins.
///     fn a_replay_reaches_every_stop(kind) {
///         let broker = kind.sample_day("t", 300, 3);
///         // …
///     }
/// }
/// ```
#[macro_export]
macro_rules! on_each_broker {
    ($( $(#[$attr:meta])* fn $name:ident($kind:ident) $body:block )*) => {$(
        $(#[$attr])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn on_broker($kind: $crate::kafka::BrokerKind) $body

            #[test]
            fn mock_cluster() {
                on_broker($crate::kafka::BrokerKind::MockCluster)
            }

            #[test]
            fn apache_kafka() {
                if $crate::kafka::BrokerKind::ApacheKafka.available() {
                    on_broker($crate::kafka::BrokerKind::ApacheKafka)
                }
            }
        }
    )*};
}

/// A test that only Apache Kafka can answer: runs `body` on it, or skips outside CI.
#[track_caller]
pub fn on_apache_kafka(body: impl FnOnce(BrokerKind)) {
    if BrokerKind::ApacheKafka.available() {
        body(BrokerKind::ApacheKafka)
    }
}

/// Where the test command keeps the test brokers' folders (`LESSONPROBE_TEST_KAFKA_ROOT`, set
/// once the pinned jars are fetched).
#[track_caller]
fn apache_kafka_root() -> Option<PathBuf> {
    crate::services::service(
        "LESSONPROBE_TEST_KAFKA_ROOT",
        "Apache Kafka (scripts/test.sh fetches it through Maven)",
    )
    .map(PathBuf::from)
}

/// A throwaway Apache Kafka of one test: `scripts/kafka.sh start` in a folder of its own under
/// the suite's Kafka root; every JVM of it killed (SIGKILL) and reaped when dropped.
pub struct ApacheKafka {
    dir: tempfile::TempDir,
    pub servers: String,
}

impl ApacheKafka {
    /// `brokers` nodes (node 1 also the controller), listening when this returns.
    #[track_caller]
    pub fn start(brokers: u32) -> ApacheKafka {
        ApacheKafka::start_with(brokers, &[])
    }

    /// [`start`](Self::start) with broker properties of the test's own (`key=value`), which
    /// override the script's (its `log.retention.ms=-1`, say).
    #[track_caller]
    pub fn start_with(brokers: u32, properties: &[&str]) -> ApacheKafka {
        let root = apache_kafka_root().expect("Apache Kafka is not available here");
        let dir = tempfile::Builder::new()
            .prefix("broker-")
            .tempdir_in(&root)
            .expect("a folder for the broker");
        let dir_arg = dir.path().display().to_string();
        let brokers = brokers.to_string();
        let servers = script_with(
            &["start", &dir_arg, "--brokers", &brokers],
            &properties.join(" "),
        );
        ApacheKafka { dir, servers }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The pids of the nodes that run, node 1 first.
    pub fn pids(&self) -> Vec<i32> {
        let mut files: Vec<_> = std::fs::read_dir(self.dir())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "pid"));
        files.sort();
        files
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok()?.trim().parse().ok())
            .collect()
    }

    /// `kill -9` of every node, as a crash would: the log stays on disk for [`restart`](Self::restart).
    pub fn kill(&self) {
        for pid in self.pids() {
            // SAFETY: kill only sends a signal to a process this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_gone(pid);
        }
    }

    /// `kill -9` of node `node` (1 is also the controller) alone.
    #[track_caller]
    pub fn kill_node(&self, node: u32) {
        let file = self.dir().join(format!("node-{node}.pid"));
        let pid: i32 = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()))
            .trim()
            .parse()
            .expect("a pid");
        // SAFETY: kill only sends a signal to a process this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_gone(pid);
    }

    /// Loads a sample day of `events` over `partitions` into `topic` (`lessonprobe broker
    /// --kafka`): what it said on stderr.
    #[track_caller]
    pub fn load_sample_day(&self, topic: &str, events: usize, partitions: i32) -> Vec<String> {
        load_sample_day(&self.servers, topic, events, partitions)
    }

    /// Starts the nodes again on the same ports with the same log.
    #[track_caller]
    pub fn restart(&self) {
        let servers = script(&["start", &self.dir().display().to_string()]);
        assert_eq!(servers, self.servers, "a restart keeps the ports");
    }

    /// Stops every node in order (SIGTERM, SIGKILL after 15 s).
    #[track_caller]
    pub fn stop(&self) {
        script(&["stop", &self.dir().display().to_string()]);
    }
}

impl Drop for ApacheKafka {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `scripts/kafka.sh ARGS`: its stdout's last line, or a panic with what it said.
#[track_caller]
fn script(args: &[&str]) -> String {
    script_with(args, "")
}

/// [`script`] with `LESSONPROBE_KAFKA_PROPERTIES` (for a folder's first start).
#[track_caller]
fn script_with(args: &[&str], properties: &str) -> String {
    let out = Command::new("bash")
        .arg(crate::repo().join("scripts/kafka.sh"))
        .args(args)
        .env("LESSONPROBE_KAFKA_PROPERTIES", properties)
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/kafka.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scripts/kafka.sh {args:?} failed: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// Waits (up to 10 s) until process `pid` is gone or a zombie.
fn wait_gone(pid: i32) {
    let started = Instant::now();
    while started.elapsed() < T {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        if !status
            .lines()
            .any(|l| l.starts_with("State:") && !l.contains('Z'))
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `lessonprobe broker --kafka SERVERS --sample-day TOPIC …`: what it said on stderr.
#[track_caller]
fn load_sample_day(servers: &str, topic: &str, events: usize, partitions: i32) -> Vec<String> {
    crate::lessonprobe()
        .args(["broker", "--kafka", servers, "--sample-day", topic])
        .args(["--events", &events.to_string()])
        .args(["--partitions", &partitions.to_string()])
        .success()
        .stderr
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A broker a test runs against, stopped when dropped.
pub struct BrokerProcess {
    /// The bootstrap address.
    pub servers: String,
    /// What it said on stderr up to its ready line (the sample day's load report among it).
    pub report: Vec<String>,
    running: Running,
}

enum Running {
    Mock(Child),
    Apache(ApacheKafka),
}

impl BrokerProcess {
    /// `lessonprobe broker ARGS` (the mock cluster) in a process of its own.
    #[track_caller]
    pub fn start(args: &[&str]) -> BrokerProcess {
        let mut child = Command::new(crate::bin())
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
            servers,
            report,
            running: Running::Mock(child),
        }
    }

    fn apache(kafka: ApacheKafka) -> BrokerProcess {
        BrokerProcess {
            servers: kafka.servers.clone(),
            report: Vec::new(),
            running: Running::Apache(kafka),
        }
    }

    /// `kafka`, reached through `servers` (a proxy whose address it advertises), with a sample
    /// day of `events` over `partitions` in `topic`, loaded through that address.
    #[track_caller]
    pub fn apache_kafka_via(
        kafka: ApacheKafka,
        servers: &str,
        topic: &str,
        events: usize,
        partitions: i32,
    ) -> BrokerProcess {
        BrokerProcess {
            servers: servers.to_owned(),
            report: load_sample_day(servers, topic, events, partitions),
            running: Running::Apache(kafka),
        }
    }

    /// A mock broker whose `topic` holds a sample day of `events` events over `partitions`.
    #[track_caller]
    pub fn sample_day(topic: &str, events: usize, partitions: i32) -> BrokerProcess {
        BrokerProcess::start(&[
            "--sample-day",
            topic,
            "--events",
            &events.to_string(),
            "--partitions",
            &partitions.to_string(),
        ])
    }

    /// A mock broker for topics a test fills itself with [`produce`]; its sample day is one
    /// record in a topic of its own.
    #[track_caller]
    pub fn for_own_records() -> BrokerProcess {
        BrokerProcess::sample_day("unused", 1, 1)
    }

    /// The Apache Kafka behind this broker, for a test that kills or restarts it.
    #[track_caller]
    pub fn apache_kafka(&self) -> &ApacheKafka {
        match &self.running {
            Running::Apache(kafka) => kafka,
            Running::Mock(_) => panic!("this test runs on the mock cluster, not Apache Kafka"),
        }
    }

    /// Stops the broker and waits up to 10 s (15 s for Apache Kafka): the mock's exit code, 0
    /// once Apache Kafka stopped, or `None` if it did not end.
    pub fn terminate(&mut self) -> Option<i32> {
        let child = match &mut self.running {
            Running::Mock(child) => child,
            Running::Apache(kafka) => {
                kafka.stop();
                return kafka.pids().is_empty().then_some(0);
            }
        };
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < T {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        if let Running::Mock(child) = &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Produces `records` (partition, payload) to `topic` in their order, record `i` keyed `k{i}`
/// and stamped `first_ms + i`, and waits until every one is acknowledged. Idempotent, so that a
/// retried request (a new topic's first often is) cannot land after the one sent next.
#[track_caller]
pub fn produce(servers: &str, topic: &str, first_ms: i64, records: &[(i32, Vec<u8>)]) {
    let producer = producer(
        servers,
        &[("linger.ms", "5"), ("enable.idempotence", "true")],
    );
    for (i, (partition, payload)) in records.iter().enumerate() {
        let key = format!("k{i}");
        let record = BaseRecord::to(topic)
            .partition(*partition)
            .key(&key)
            .payload(payload)
            .timestamp(first_ms + i as i64);
        send_when_room(&producer, record);
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// A producer to `servers` with the librdkafka `settings` given.
#[track_caller]
pub fn producer(servers: &str, settings: &[(&str, &str)]) -> BaseProducer {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", servers);
    for (key, value) in settings {
        config.set(*key, *value);
    }
    config.create().unwrap()
}

/// Queues `record` on `producer`, serving the producer while its queue is full; any other
/// refusal fails the test.
#[track_caller]
pub fn send_when_room<K, P>(producer: &BaseProducer, mut record: BaseRecord<'_, K, P>)
where
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(10));
            }
            Err((e, back)) => panic!("produce to {}: {e}", back.topic),
        }
    }
}

/// A consumer of `group` that commits nothing by itself and is never subscribed.
pub fn reader(servers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap()
}

/// The committed offset of `group` on partitions `0..partitions` (`None` where it has none).
pub fn committed(servers: &str, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    let consumer = reader(servers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    // A fresh Apache Kafka makes its offsets topic at the first group request and meanwhile
    // answers that it is no coordinator: asked again until it is one (the mock is one at once).
    let started = Instant::now();
    let answer = loop {
        match consumer.committed_offsets(tpl.clone(), T) {
            Err(e)
                if started.elapsed() < T
                    && matches!(
                        e.rdkafka_error_code(),
                        Some(
                            RDKafkaErrorCode::NotCoordinator
                                | RDKafkaErrorCode::CoordinatorNotAvailable
                                | RDKafkaErrorCode::CoordinatorLoadInProgress
                        )
                    ) =>
            {
                std::thread::sleep(Duration::from_millis(100))
            }
            answer => break answer.unwrap(),
        }
    };
    let out = (0..partitions)
        .map(
            |p| match answer.find_partition(topic, p).unwrap().offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            },
        )
        .collect();
    // The list must go before its consumer (a consumer dropped first can hang in librdkafka).
    drop(answer);
    out
}

/// Commits `offsets[p]` for `group` on each partition `p`, as a running service would.
pub fn commit(servers: &str, group: &str, topic: &str, offsets: &[i64]) {
    let consumer = reader(servers, group);
    let mut tpl = TopicPartitionList::new();
    for (p, &o) in offsets.iter().enumerate() {
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(o))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

pub fn partitions_of(servers: &str, topic: &str) -> i32 {
    let consumer = reader(servers, "test-metadata");
    let md = consumer.fetch_metadata(Some(topic), T).unwrap();
    md.topics()[0].partitions().len() as i32
}

/// `(low, high)` of every partition.
pub fn watermarks(servers: &str, topic: &str) -> Vec<(i64, i64)> {
    let consumer = reader(servers, "test-watermarks");
    (0..partitions_of(servers, topic))
        .map(|p| consumer.fetch_watermarks(topic, p, T).unwrap())
        .collect()
}

/// Assigns `consumer` the one partition `topic[partition]`, to be read from `offset` on.
#[track_caller]
pub fn assign_at(consumer: &BaseConsumer, topic: &str, partition: i32, offset: Offset) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, offset).unwrap();
    consumer.assign(&tpl).unwrap();
}

/// First offset whose timestamp is at or after `ts`, found by reading the whole partition.
pub fn first_offset_at(servers: &str, topic: &str, partition: i32, ts: i64) -> Option<i64> {
    let consumer = reader(servers, "test-scan");
    let (low, high) = consumer.fetch_watermarks(topic, partition, T).unwrap();
    assign_at(&consumer, topic, partition, Offset::Offset(low));
    let mut next = low;
    while next < high {
        let m = consumer.poll(T).expect("a record").unwrap();
        if m.timestamp().to_millis().unwrap() >= ts {
            return Some(m.offset());
        }
        next = m.offset() + 1;
    }
    None
}

/// Creates `topic` with `partitions` partitions.
pub fn create_topic(servers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .unwrap();
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let answer = futures_executor::block_on(admin.create_topics([&new], &options)).unwrap();
    assert!(
        answer.iter().all(Result::is_ok),
        "creating {topic}: {answer:?}"
    );
}

/// Deletes the records of `topic[partition]` below `before` (Kafka's DeleteRecords, which
/// moves the log start as retention does), and checks the broker's answer.
pub fn delete_records(servers: &str, topic: &str, partition: i32, before: i64) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(before))
        .unwrap();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let answer = futures_executor::block_on(admin.delete_records(&tpl, &options))
        .unwrap_or_else(|e| panic!("DeleteRecords {topic}[{partition}] below {before}: {e}"));
    let element = answer.find_partition(topic, partition).unwrap();
    assert!(
        element.error().is_ok(),
        "DeleteRecords: {:?}",
        element.error()
    );
    assert_eq!(
        element.offset(),
        Offset::Offset(before),
        "the new log start"
    );
}
