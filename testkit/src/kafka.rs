//! `lessonprobe broker` as a separate process, records a test produces to it, and what a broker
//! holds read back through a client of the test's own: committed offsets, watermarks, the offset
//! of a time.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const T: Duration = Duration::from_secs(10);

/// `lessonprobe broker ARGS` in a process of its own, killed when dropped.
pub struct BrokerProcess {
    pub child: Child,
    /// The bootstrap address, from the first line the broker prints.
    pub servers: String,
    /// What it said on stderr up to its ready line (the sample day's load report among it).
    pub report: Vec<String>,
}

impl BrokerProcess {
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
            child,
            servers,
            report,
        }
    }

    /// A broker whose `topic` holds a sample day of `events` events over `partitions`.
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

    /// A broker for topics a test fills itself with [`produce`]; its sample day is one record
    /// in a topic of its own.
    #[track_caller]
    pub fn for_own_records() -> BrokerProcess {
        BrokerProcess::sample_day("unused", 1, 1)
    }

    /// Sends SIGTERM and waits up to 10 s: the exit code, or `None` if it did not end.
    pub fn terminate(&mut self) -> Option<i32> {
        // SAFETY: kill only sends a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        while started.elapsed() < T {
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

/// Produces `records` (partition, payload) to `topic` in their order, record `i` keyed `k{i}`
/// and stamped `first_ms + i`, and waits until every one is acknowledged.
#[track_caller]
pub fn produce(servers: &str, topic: &str, first_ms: i64, records: &[(i32, Vec<u8>)]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for (i, (partition, payload)) in records.iter().enumerate() {
        let key = format!("k{i}");
        loop {
            let record = BaseRecord::to(topic)
                .partition(*partition)
                .key(&key)
                .payload(payload)
                .timestamp(first_ms + i as i64);
            match producer.send(record) {
                Ok(()) => break,
                Err((e, _)) if e.to_string().contains("Queue full") => {
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("produce to {topic}: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
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
    let answer = consumer.committed_offsets(tpl, T).unwrap();
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

/// First offset whose timestamp is at or after `ts`, found by reading the whole partition.
pub fn first_offset_at(servers: &str, topic: &str, partition: i32, ts: i64) -> Option<i64> {
    let consumer = reader(servers, "test-scan");
    let (low, high) = consumer.fetch_watermarks(topic, partition, T).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(low))
        .unwrap();
    consumer.assign(&tpl).unwrap();
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
