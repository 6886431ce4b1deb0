//! Transactional topics as a Kafka broker lays them out: the records come from a transactional
//! rdkafka producer, and after each commit or abort one control marker is appended to the
//! partition, occupying one offset. On Apache Kafka the transaction coordinator writes the
//! markers itself. librdkafka's mock cluster implements the transaction protocol but writes no
//! markers (its EndTxn handler appends nothing), so there the test plays the coordinator's part
//! and writes them with a raw Produce request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use lessonprobe_testkit::kafka::{producer, send_when_room, BrokerKind};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::ClientConfig;

/// One transaction of a partition: its records' `(timestamp, payload)` and how it ends.
pub struct Txn {
    pub records: Vec<(i64, Vec<u8>)>,
    pub commit: bool,
}

/// Writes `txns` to `topic[partition]` in order, each followed by its marker (the coordinator's
/// on Apache Kafka, the test's own on the mock). Returns the offsets of the markers. Nothing
/// else may write to the partition meanwhile.
pub fn write(
    kind: BrokerKind,
    servers: &str,
    topic: &str,
    partition: i32,
    txns: &[Txn],
) -> Vec<i64> {
    let producer = producer(
        servers,
        &[
            ("transactional.id", &format!("test-{topic}-{partition}")),
            ("linger.ms", "1"),
        ],
    );
    let t = Duration::from_secs(10);
    producer.init_transactions(t).unwrap();
    // Known once the first records created the topic.
    let mut leader = None;
    let mut markers = Vec::new();
    for txn in txns {
        producer.begin_transaction().unwrap();
        for (ts, payload) in &txn.records {
            let key = format!("tenant-a:ticket-{partition}");
            let record = BaseRecord::to(topic)
                .partition(partition)
                .key(&key)
                .payload(payload)
                .timestamp(*ts);
            send_when_room(&producer, record);
        }
        producer.flush(t).unwrap();
        if txn.commit {
            producer.commit_transaction(t).unwrap();
        } else {
            producer.abort_transaction(t).unwrap();
        }
        markers.push(match kind {
            BrokerKind::ApacheKafka => coordinators_marker(servers, topic, partition),
            BrokerKind::MockCluster => {
                let leader = leader.get_or_insert_with(|| leader_of(servers, topic, partition));
                append_marker(leader, topic, partition, txn.commit)
            }
        });
    }
    markers
}

/// Waits until Apache Kafka's coordinator has written the marker of the transaction just ended
/// on `topic[partition]` (the commit's answer may come before it), and returns its offset: the
/// last offset once the last stable offset, which stays at the transaction's first record
/// while it is open, has caught up with the high watermark.
pub fn coordinators_marker(servers: &str, topic: &str, partition: i32) -> i64 {
    let client = |isolation: &str| -> BaseConsumer {
        ClientConfig::new()
            .set("bootstrap.servers", servers)
            .set("group.id", "test-markers")
            .set("isolation.level", isolation)
            .create()
            .unwrap()
    };
    let (stable, all) = (client("read_committed"), client("read_uncommitted"));
    let t = Duration::from_secs(10);
    let started = Instant::now();
    loop {
        let (_, lso) = stable.fetch_watermarks(topic, partition, t).unwrap();
        let (_, high) = all.fetch_watermarks(topic, partition, t).unwrap();
        if lso == high {
            return high - 1;
        }
        assert!(
            started.elapsed() < t,
            "no marker on {topic}[{partition}]: last stable offset {lso}, high watermark {high}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Appends one control batch (a COMMIT or ABORT marker) to `topic[partition]` on its leader
/// (`host:port`); returns the offset it took.
fn append_marker(leader: &str, topic: &str, partition: i32, commit: bool) -> i64 {
    let mut stream = TcpStream::connect(leader).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let batch = control_batch(commit);
    let mut body = Vec::new();
    body.extend_from_slice(&0i16.to_be_bytes()); // Produce
    body.extend_from_slice(&3i16.to_be_bytes()); // version 3
    body.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    put_str(&mut body, "lessonprobe-test-coordinator");
    body.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
    body.extend_from_slice(&1i16.to_be_bytes()); // acks
    body.extend_from_slice(&10_000i32.to_be_bytes());
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    put_str(&mut body, topic);
    body.extend_from_slice(&1i32.to_be_bytes()); // one partition
    body.extend_from_slice(&partition.to_be_bytes());
    body.extend_from_slice(&(batch.len() as i32).to_be_bytes());
    body.extend_from_slice(&batch);
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .unwrap();
    stream.write_all(&body).unwrap();
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).unwrap();
    let mut resp = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut resp).unwrap();
    // correlation id, #topics, topic name, #partitions, partition, error code, base offset
    let mut at = 4 + 4;
    let name_len = i16::from_be_bytes([resp[at], resp[at + 1]]) as usize;
    at += 2 + name_len + 4 + 4;
    let error = i16::from_be_bytes([resp[at], resp[at + 1]]);
    assert_eq!(error, 0, "appending a marker to {topic}[{partition}]");
    at += 2;
    i64::from_be_bytes(resp[at..at + 8].try_into().unwrap())
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as i16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// A v2 record batch with the transactional and control attributes and one control record:
/// key (version 0, type 1 = COMMIT / 0 = ABORT), value (version 0, coordinator epoch 0).
fn control_batch(commit: bool) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut record = vec![0u8]; // attributes
    record.push(0); // timestamp delta (zigzag varint 0)
    record.push(0); // offset delta
    record.push(8); // key length 4
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&i16::from(commit).to_be_bytes());
    record.push(12); // value length 6
    record.extend_from_slice(&0i16.to_be_bytes());
    record.extend_from_slice(&0i32.to_be_bytes());
    record.push(0); // no headers
    let mut tail = Vec::new(); // from attributes on: what the CRC covers
    tail.extend_from_slice(&0x30i16.to_be_bytes()); // transactional | control
    tail.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
    tail.extend_from_slice(&now.to_be_bytes());
    tail.extend_from_slice(&now.to_be_bytes());
    tail.extend_from_slice(&4242i64.to_be_bytes()); // producer id
    tail.extend_from_slice(&0i16.to_be_bytes()); // producer epoch
    tail.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    tail.extend_from_slice(&1i32.to_be_bytes()); // one record
    tail.push((record.len() * 2) as u8); // zigzag varint length
    tail.extend_from_slice(&record);
    let mut batch = Vec::new();
    batch.extend_from_slice(&0i64.to_be_bytes()); // base offset (the broker sets it)
    batch.extend_from_slice(&((4 + 1 + 4 + tail.len()) as i32).to_be_bytes());
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc32c(&tail).to_be_bytes());
    batch.extend_from_slice(&tail);
    batch
}

/// CRC-32C (Castagnoli), bit by bit: the batches here are a few dozen bytes.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `host:port` of the partition's leader.
fn leader_of(servers: &str, topic: &str, partition: i32) -> String {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let leader = md.topics()[0]
        .partitions()
        .iter()
        .find(|p| p.id() == partition)
        .unwrap()
        .leader();
    let broker = md.brokers().iter().find(|b| b.id() == leader).unwrap();
    format!("{}:{}", broker.host(), broker.port())
}

#[test]
fn crc32c_of_the_standard_check_string() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}
