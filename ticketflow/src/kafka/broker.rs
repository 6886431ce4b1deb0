//! A Kafka-protocol broker for the system, its tools and tests: started in process (librdkafka's
//! mock cluster) or reached by bootstrap address, with topic creation and clean-up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

use super::KafkaTarget;
use crate::day::{partition_for, DayRecord};

/// A broker operation that failed, with the address it was talking to.
#[derive(Debug, thiserror::Error)]
#[error("kafka {servers}: {what}: {reason}")]
pub struct KafkaError {
    pub servers: String,
    pub what: String,
    pub reason: String,
}

/// librdkafka's words (and the committer's) for a broker away for a while: its transport
/// failed or is down, a request or the coordinator's answer timed out, the group coordinator
/// or a partition's leader is not there yet (a broker starting again loads them).
const OUTAGE_WORDS: [&str; 12] = [
    "transport failure",
    "all broker connections are down",
    "timed out",
    "coordinator not available",
    "coordinator load in progress",
    "not coordinator",
    "waiting for coordinator",
    "leader not available",
    "not leader",
    "connection refused",
    "connection reset",
    "no answer from the group's coordinator",
];

impl KafkaError {
    /// Whether the client's answer was that a partition is unknown or has no leader: what it
    /// says from stale metadata as well as of a partition that does not exist.
    fn is_leaderless(&self) -> bool {
        let reason = self.reason.to_ascii_lowercase();
        [
            "unknown partition",
            "unknown topic or partition",
            "leader not available",
        ]
        .iter()
        .any(|w| reason.contains(w))
    }

    /// Whether the broker is away for a while rather than refusing the request, so that the
    /// same work, begun again once it is back, may succeed.
    pub fn is_outage(&self) -> bool {
        let reason = self.reason.to_ascii_lowercase();
        OUTAGE_WORDS.iter().any(|w| reason.contains(w))
    }
}

/// A name Kafka refuses as a topic: it must be 1 to 249 characters of `[a-zA-Z0-9._-]`, and
/// not `.` or `..`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicNameError {
    #[error("a topic name must not be empty")]
    Empty,
    #[error("topic name {name:?} has {len} characters; Kafka allows at most 249")]
    TooLong { name: String, len: usize },
    #[error(
        "topic name {name:?} holds {found:?}; Kafka allows only letters, digits, '.', '_' and '-'"
    )]
    Character { name: String, found: char },
    #[error("{name:?} cannot be a topic name")]
    Dots { name: String },
}

/// Checks `name` against Kafka's rule for topic names, so a bad one is refused before any
/// broker sees it (the mock cluster would accept it, and clients then fail obscurely).
pub fn check_topic_name(name: &str) -> Result<(), TopicNameError> {
    let len = name.chars().count();
    if len == 0 {
        return Err(TopicNameError::Empty);
    }
    if len > 249 {
        return Err(TopicNameError::TooLong {
            name: name.to_owned(),
            len,
        });
    }
    if let Some(found) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(TopicNameError::Character {
            name: name.to_owned(),
            found,
        });
    }
    if name == "." || name == ".." {
        return Err(TopicNameError::Dots {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Topics this handle created on a broker and could not delete, each with the reason.
#[derive(Debug, thiserror::Error)]
#[error("kafka {servers}: topics left behind: {}", describe_left(.left))]
pub struct TopicsLeft {
    pub servers: String,
    /// `(topic, why it is still there)`.
    pub left: Vec<(String, String)>,
}

fn describe_left(left: &[(String, String)]) -> String {
    left.iter()
        .map(|(topic, why)| format!("{topic} ({why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether this process has seen a broker that does not answer CreateTopics (the mock cluster
/// in another process): later topics are auto-created without waiting again, and deleting
/// them is not attempted (it would wait just as long, for nothing).
static NO_ADMIN_API: AtomicBool = AtomicBool::new(false);

/// How long an admin request may take before the broker counts as not answering it.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Broker {
    servers: String,
    properties: Vec<(String, String)>,
    mock: Option<MockCluster<'static, rdkafka::producer::DefaultProducerContext>>,
    /// Topics this handle created on a broker it does not host, deleted when it is dropped.
    created: Vec<String>,
    /// Bound on every single broker call.
    pub op_timeout: Duration,
    /// The clients this handle shares with every handle made from it by
    /// [`same_address`](Self::same_address) or [`address`](Self::address).
    shared: Shared,
}

/// A slot for the lookup client, made on first use.
type Slot = Arc<Mutex<Option<BaseConsumer>>>;

/// The clients one broker's handles share, one per role: the lookup client (metadata,
/// watermarks, ListOffsets; it never fetches, so its answers never wait behind a fetch), and one
/// client per consumer group whose offsets are read or committed (a group's offsets are asked
/// and committed by a member of it).
#[derive(Clone, Default)]
struct Shared {
    utility: Slot,
    groups: Arc<Mutex<HashMap<String, Arc<BaseConsumer>>>>,
}

/// Kafka clients this process has opened (each one its connections and threads).
static CLIENTS_OPENED: AtomicUsize = AtomicUsize::new(0);

/// How many Kafka clients this process has opened so far.
pub fn clients_opened() -> usize {
    CLIENTS_OPENED.load(Ordering::Relaxed)
}

/// Counts a client just made and says so at debug level with librdkafka's own name for it
/// (`rdkafka#consumer-N`, numbered by librdkafka across the process), so that a test can check
/// the count against librdkafka's numbering.
pub(crate) fn opened(native: *mut rdkafka::bindings::rd_kafka_t, role: &str) {
    let n = CLIENTS_OPENED.fetch_add(1, Ordering::Relaxed) + 1;
    // SAFETY: `native` is a live client; rd_kafka_name returns its NUL-terminated name, owned
    // by the client, read here before the client can go.
    let name = unsafe { std::ffi::CStr::from_ptr(rdkafka::bindings::rd_kafka_name(native)) };
    tracing::debug!(
        target: "ticketflow::kafka::clients",
        "kafka client opened: {} ({role}), {n} in this process",
        name.to_string_lossy()
    );
}

/// A broker's address, properties and shared clients, to be sent to threads: each makes its
/// [`Broker`] handle with [`broker`](Self::broker), sharing the lookup and group clients.
#[derive(Clone)]
pub struct BrokerAddress {
    servers: String,
    properties: Vec<(String, String)>,
    op_timeout: Duration,
    shared: Shared,
}

impl BrokerAddress {
    /// A handle on this address that owns nothing, its calls bounded by `timeout` (at most
    /// the original handle's bound).
    pub fn broker(&self, timeout: Duration) -> Broker {
        Broker {
            servers: self.servers.clone(),
            properties: self.properties.clone(),
            mock: None,
            created: Vec::new(),
            op_timeout: self.op_timeout.min(timeout),
            shared: self.shared.clone(),
        }
    }
}

impl Broker {
    /// The embedded mock cluster with `brokers` brokers.
    pub fn embedded(brokers: i32) -> Result<Broker, KafkaError> {
        let mock = MockCluster::new(brokers).map_err(|e| KafkaError {
            servers: "embedded".into(),
            what: "starting the mock cluster".into(),
            reason: e.to_string(),
        })?;
        Ok(Broker {
            servers: mock.bootstrap_servers(),
            properties: Vec::new(),
            mock: Some(mock),
            created: Vec::new(),
            op_timeout: Duration::from_secs(10),
            shared: Shared::default(),
        })
    }

    /// Starts or reaches the broker a probe was given; every call bounded by `timeout`.
    pub fn for_target(target: &KafkaTarget, timeout: Duration) -> Result<Broker, KafkaError> {
        let mut broker = match target {
            KafkaTarget::Embedded => Broker::embedded(3)?,
            KafkaTarget::Bootstrap {
                servers,
                properties,
            } => Broker {
                servers: servers.clone(),
                properties: properties.clone(),
                mock: None,
                created: Vec::new(),
                op_timeout: Duration::from_secs(10),
                shared: Shared::default(),
            },
        };
        broker.op_timeout = timeout.min(Duration::from_secs(10));
        if !broker.is_embedded() {
            broker.check_reachable()?;
        }
        Ok(broker)
    }

    /// Fails, naming the address, when no broker answers a metadata request in time.
    fn check_reachable(&self) -> Result<(), KafkaError> {
        self.with_utility(|c| {
            c.fetch_metadata(None, self.op_timeout)
                .map(drop)
                .map_err(|e| {
                    self.error("connecting", format!("{e} (is a broker listening there?)"))
                })
        })
    }

    /// Whether the broker of `target` answers a metadata request within `timeout`, for a run's
    /// preflight: asked by a client of its own whose librdkafka logs and errors go nowhere (the
    /// answer says what failed). The embedded broker always answers.
    pub fn answers(target: &KafkaTarget, timeout: Duration) -> Result<(), KafkaError> {
        let KafkaTarget::Bootstrap {
            servers,
            properties,
        } = target
        else {
            return Ok(());
        };
        let broker = Broker {
            servers: servers.clone(),
            properties: properties.clone(),
            mock: None,
            created: Vec::new(),
            op_timeout: timeout,
            shared: Shared::default(),
        };
        let consumer: BaseConsumer<Quiet> = broker
            .config()
            .set("group.id", "lessonprobe-preflight")
            .create_with_context(Quiet)
            .map_err(|e| broker.error("connecting", e))?;
        consumer
            .fetch_metadata(None, timeout)
            .map(drop)
            .map_err(|e| broker.error("asking for metadata", format!("{e}")))
    }

    /// What to do when [`Broker::answers`] fails, said to a user whose option naming a broker
    /// is `option`.
    pub fn unanswered_fix(option: &str) -> String {
        format!(
            "start the broker, or give {option} the address of one that is up (without {option} \
             the probes use the embedded broker)"
        )
    }

    /// A handle on the same address and properties that owns nothing (no mock cluster, no
    /// topics to delete), sharing this one's clients: for clients made later by something that
    /// outlives a borrow.
    pub(crate) fn same_address(&self) -> Broker {
        Broker {
            servers: self.servers.clone(),
            properties: self.properties.clone(),
            mock: None,
            created: Vec::new(),
            op_timeout: self.op_timeout,
            shared: self.shared.clone(),
        }
    }

    /// This handle's address and shared clients, for threads (see [`BrokerAddress`]).
    pub fn address(&self) -> BrokerAddress {
        BrokerAddress {
            servers: self.servers.clone(),
            properties: self.properties.clone(),
            op_timeout: self.op_timeout,
            shared: self.shared.clone(),
        }
    }

    /// The client of consumer group `group` (made on first use, shared by every handle of this
    /// broker): it reads and commits the group's offsets, and never subscribes or fetches.
    pub(crate) fn group_client(&self, group: &str) -> Result<Arc<BaseConsumer>, KafkaError> {
        let mut groups = self
            .shared
            .groups
            .lock()
            .map_err(|_| self.error("group clients", "a previous call panicked"))?;
        if let Some(client) = groups.get(group) {
            return Ok(Arc::clone(client));
        }
        let client = Arc::new(self.consumer(group, "earliest")?);
        groups.insert(group.to_owned(), Arc::clone(&client));
        Ok(client)
    }

    pub fn servers(&self) -> &str {
        &self.servers
    }

    pub fn is_embedded(&self) -> bool {
        self.mock.is_some()
    }

    pub fn error(&self, what: impl Into<String>, reason: impl std::fmt::Display) -> KafkaError {
        KafkaError {
            servers: self.servers.clone(),
            what: what.into(),
            // librdkafka's configuration errors echo the value: never a secret's.
            reason: super::target::redact(&self.properties, &reason.to_string()),
        }
    }

    /// Client settings shared by every client of this broker: the address, the user's
    /// properties, short timeouts so an unreachable broker fails instead of hanging, a short
    /// wait before a new connection. The socket
    /// timeout stays a second above the longest fetch wait (librdkafka warns otherwise), however
    /// little time a run has left: the run's own clock bounds each call.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.servers)
            .set(
                "socket.timeout.ms",
                (self.op_timeout.as_millis().max(1000) + 1000).to_string(),
            )
            .set(
                "socket.connection.setup.timeout.ms",
                self.op_timeout.as_millis().max(1000).to_string(),
            )
            // librdkafka opens no new broker connection within half of this after the last
            // one (100 ms by default): a fresh client's first request after its bootstrap
            // metadata waited 50 ms for it. Failed reconnects still back off exponentially.
            .set("reconnect.backoff.ms", "10")
            // Every broker connected from the start: a consumer's group coordinator is then
            // up by the time the group learns who it is. Connected on demand, the group waited
            // in librdkafka's main loop (which sleeps up to a second between timers) for the
            // coordinator's connection: a commit or a committed-offsets read stalled about a
            // second in some runs.
            .set("enable.sparse.connections", "false");
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        config
    }

    /// Runs `f` with the utility consumer (group `lessonprobe-utility`, never committing).
    pub(crate) fn with_utility<T>(
        &self,
        f: impl FnOnce(&BaseConsumer) -> Result<T, KafkaError>,
    ) -> Result<T, KafkaError> {
        let mut slot = self
            .shared
            .utility
            .lock()
            .map_err(|_| self.error("utility consumer", "a previous call panicked"))?;
        if slot.is_none() {
            // Its reads are single records: waiting long for more would only slow lookups.
            *slot = Some(self.consumer_waiting("lessonprobe-utility", "earliest", 5)?);
        }
        match slot.as_ref() {
            Some(consumer) => f(consumer),
            None => Err(self.error("utility consumer", "not created")),
        }
    }

    /// A consumer of `group` that commits only when told to (auto-commit off, whatever -X says)
    /// and sees committed transactions only.
    pub fn consumer(&self, group: &str, reset: &str) -> Result<BaseConsumer, KafkaError> {
        self.consumer_waiting(group, reset, 50)
    }

    /// [`consumer`](Self::consumer) with its own fetch wait: a broker with nothing new to send
    /// answers a fetch after this long (the mock cluster holds every fetch for it).
    pub(crate) fn consumer_waiting(
        &self,
        group: &str,
        reset: &str,
        fetch_wait_ms: u32,
    ) -> Result<BaseConsumer, KafkaError> {
        self.reader(group, reset, fetch_wait_ms, Isolation::ReadCommitted)
    }

    /// A consumer that only reads (assign and poll) with the given isolation: for scans and
    /// for re-reading what a read_committed consumer skipped.
    pub(crate) fn reader(
        &self,
        group: &str,
        reset: &str,
        fetch_wait_ms: u32,
        isolation: Isolation,
    ) -> Result<BaseConsumer, KafkaError> {
        let mut config = self.config();
        // Tuning the user's -X may override: a short fetch wait keeps reads quick on brokers
        // (the mock cluster among them) that hold every fetch for the whole wait.
        config
            .set("session.timeout.ms", "6000")
            .set("fetch.wait.max.ms", fetch_wait_ms.to_string())
            // A partition whose prefetched records exceed the local queue's thresholds is not
            // fetched again for this long: librdkafka's default of a second idled a scan that
            // drains its queue in a fraction of that (planning a day took a second longer in
            // most runs). Checking again each millisecond costs next to nothing.
            .set("fetch.queue.backoff.ms", "1")
            // Prefetched records held at most: librdkafka's 64 MiB default let a scan of a
            // day on 200 partitions hold 50 MiB more at its peak, and reading got no faster.
            .set("queued.max.messages.kbytes", "8192")
            // A replay reads one partition at a time: a fetch of up to 4 MiB brings a batch of
            // 10,000 records in one answer where librdkafka's 1 MiB took three (consume-only
            // of a day on 100 partitions of Apache Kafka: 490k to 640k records/s).
            .set("max.partition.fetch.bytes", "4194304")
            .set("enable.partition.eof", "false");
        for (k, v) in &self.properties {
            config.set(k, v);
        }
        // What the lesson's ordering rule depends on is not negotiable.
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", reset)
            .set("isolation.level", isolation.as_str());
        let consumer: BaseConsumer = config
            .create()
            .map_err(|e| self.error(format!("creating a consumer for group {group}"), e))?;
        opened(
            consumer.client().native_ptr(),
            &format!(
                "consumer of group {group}, {}, fetch wait {fetch_wait_ms} ms",
                isolation.as_str()
            ),
        );
        // The group looks for its coordinator as the client starts. If no broker is connected
        // yet, the next look waits for librdkafka's main loop, which sleeps up to a second
        // between its timers: a commit or an assignment at stored offsets then took a second
        // longer. A metadata answer means a broker is up, and the group's next operation
        // finds its coordinator at once. One topic, the groups' own, not the whole cluster's
        // list. Bounded and not an error here: a cluster that does not answer fails the
        // operation that needs it, within that operation's own limit.
        let _ = consumer.fetch_metadata(
            Some("__consumer_offsets"),
            self.op_timeout.min(Duration::from_secs(1)),
        );
        Ok(consumer)
    }

    /// An idempotent producer (see [`producer_lingering`](Self::producer_lingering)) that
    /// sends within 5 ms.
    pub fn producer(&self) -> Result<IdempotentProducer, KafkaError> {
        self.producer_lingering(5, self.op_timeout, ProducerLog)
    }

    /// A producer that waits up to `linger_ms` to fill a batch and gives a record up after
    /// `patience` without an acknowledgement, telling `context` of each delivery. Idempotent:
    /// a partition's records land in the order they were sent, also when a request is retried
    /// while the next is in flight (a new topic's first request on Apache Kafka often is),
    /// which a producer with librdkafka's defaults may write after the next one.
    fn producer_lingering<C: ProducerContext>(
        &self,
        linger_ms: u32,
        patience: Duration,
        context: C,
    ) -> Result<BaseProducer<C>, KafkaError> {
        let mut config = self.config();
        config
            .set("linger.ms", linger_ms.to_string())
            .set(
                "message.timeout.ms",
                patience.as_millis().max(1000).to_string(),
            )
            .set("enable.idempotence", "true");
        let producer: BaseProducer<C> = config
            .create_with_context(context)
            .map_err(|e| self.error("creating a producer", e))?;
        opened(producer.client().native_ptr(), "producer");
        Ok(producer)
    }

    /// Creates `topic` with at least `partitions` partitions and returns how many it has. On a
    /// broker this handle does not host, the topic must not exist yet: it is this handle's to
    /// delete when dropped, and it keeps its records whatever their age (`retention.ms=-1`).
    pub fn create_topic(&mut self, topic: &str, partitions: i32) -> Result<i32, KafkaError> {
        check_topic_name(topic).map_err(|e| self.error("creating a topic", e))?;
        if let Some(mock) = &self.mock {
            mock.create_topic(topic, partitions, 1)
                .map_err(|e| self.error(format!("creating topic {topic}"), e))?;
            return Ok(partitions);
        }
        if !NO_ADMIN_API.load(Ordering::Relaxed) {
            match self.create_with_admin(topic, partitions) {
                Ok(()) => {
                    self.created.push(topic.to_owned());
                    return self.wait_for_topic(topic);
                }
                Err(AdminFailure::TimedOut) if self.partitions(topic)? > 0 => {
                    // The broker created it after the client stopped waiting (a busy Apache
                    // Kafka): the topic is the one this request asked for.
                    self.created.push(topic.to_owned());
                    return self.wait_for_topic(topic);
                }
                Err(AdminFailure::TimedOut) => NO_ADMIN_API.store(true, Ordering::Relaxed),
                Err(AdminFailure::Other(e)) => return Err(e),
            }
        }
        // A broker without the admin API (librdkafka's mock cluster in another process)
        // creates topics on a producer's metadata request, with its default partition count.
        if self.partitions(topic)? > 0 {
            return Err(self.error(
                format!("creating topic {topic}"),
                "it already exists; this run only uses topics it creates",
            ));
        }
        let producer = self.producer()?;
        producer
            .client()
            .fetch_metadata(Some(topic), self.op_timeout)
            .map_err(|e| self.error(format!("auto-creating topic {topic}"), e))?;
        drop(producer);
        self.created.push(topic.to_owned());
        let have = self.wait_for_topic(topic)?;
        if have < partitions {
            return Err(self.error(
                format!("creating topic {topic}"),
                format!("it has {have} partitions; {partitions} are needed"),
            ));
        }
        Ok(have)
    }

    /// Hands the topics this handle created over to the caller: they are no longer deleted
    /// when it is dropped.
    pub fn keep_created_topics(&mut self) {
        self.created.clear();
    }

    /// The topics this handle created on a broker it does not host and has not deleted yet.
    pub fn created_topics(&self) -> &[String] {
        &self.created
    }

    /// Deletes the topics this handle created. Those the broker did not delete (it refused,
    /// did not answer, or has no admin API at all) are returned with the reason; they are not
    /// tried again.
    pub fn delete_created_topics(&mut self) -> Result<(), TopicsLeft> {
        let created = std::mem::take(&mut self.created);
        if created.is_empty() {
            return Ok(());
        }
        let left = |why: &str| TopicsLeft {
            servers: self.servers.clone(),
            left: created
                .iter()
                .map(|t| (t.clone(), why.to_owned()))
                .collect(),
        };
        if NO_ADMIN_API.load(Ordering::Relaxed) {
            return Err(left(
                "the broker does not answer admin requests (CreateTopics went unanswered); delete it with the broker's own tools",
            ));
        }
        let names: Vec<&str> = created.iter().map(String::as_str).collect();
        let failed: Vec<(String, String)> =
            match self.delete_topics(&names, self.op_timeout.min(ADMIN_TIMEOUT)) {
                Ok(answers) => answers
                    .into_iter()
                    .filter_map(|(topic, refused)| Some((topic, refused?)))
                    .collect(),
                Err(e) => return Err(left(&format!("{}: {}", e.what, e.reason))),
            };
        if failed.is_empty() {
            Ok(())
        } else {
            Err(TopicsLeft {
                servers: self.servers.clone(),
                left: failed,
            })
        }
    }

    fn create_with_admin(&self, topic: &str, partitions: i32) -> Result<(), AdminFailure> {
        let admin = self.admin().map_err(AdminFailure::Other)?;
        let options = AdminOptions::new().request_timeout(Some(self.op_timeout.min(ADMIN_TIMEOUT)));
        // -1: the broker's default replication factor (Kafka 2.4 and later). The records these
        // topics are loaded with carry dated timestamps (the sample days of 2026-09-21 to 23):
        // under a broker's time retention (7 days by default, judged by record timestamp) they
        // would be deleted while a probe reads them, so the topic keeps its records until it is
        // deleted.
        let new =
            NewTopic::new(topic, partitions, TopicReplication::Fixed(-1)).set("retention.ms", "-1");
        let result = futures_executor::block_on(admin.create_topics([&new], &options));
        match result {
            Ok(results) => match results.into_iter().next() {
                Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => {
                    Err(AdminFailure::Other(self.error(
                        format!("creating topic {topic}"),
                        "it already exists; this run only uses topics it creates",
                    )))
                }
                Some(Err((_, code))) => Err(AdminFailure::Other(
                    self.error(format!("creating topic {topic}"), code),
                )),
                _ => Ok(()),
            },
            // No answer in time: a broker without the admin API, or one too busy to answer
            // before the topic was created.
            Err(rdkafka::error::KafkaError::AdminOp(RDKafkaErrorCode::OperationTimedOut))
            | Err(rdkafka::error::KafkaError::AdminOp(RDKafkaErrorCode::UnsupportedFeature)) => {
                Err(AdminFailure::TimedOut)
            }
            Err(e) => Err(AdminFailure::Other(
                self.error(format!("creating topic {topic}"), e),
            )),
        }
    }

    /// Waits until the topic's metadata shows its partitions, each with a leader; returns their
    /// number. A fresh topic on a cluster of several brokers may be told first without them.
    fn wait_for_topic(&self, topic: &str) -> Result<i32, KafkaError> {
        let started = Instant::now();
        loop {
            let seen = self.with_utility(|c| {
                TopicSeen::ask(c, topic, self.op_timeout)
                    .map_err(|e| self.error(format!("reading metadata of {topic}"), e))
            })?;
            match seen {
                Some(seen) if seen.partitions > 0 && seen.leaderless.is_empty() => {
                    return Ok(seen.partitions)
                }
                _ if started.elapsed() > self.op_timeout => {
                    let why = match seen {
                        Some(seen) if seen.partitions > 0 => {
                            format!("partitions {:?} have no leader", seen.leaderless)
                        }
                        _ => "it has no partitions".to_owned(),
                    };
                    return Err(self.error(format!("waiting for topic {topic}"), why));
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The number of partitions of `topic` (0 when it does not exist).
    pub fn partitions(&self, topic: &str) -> Result<i32, KafkaError> {
        self.with_utility(|c| {
            partition_count(c, topic, self.op_timeout)
                .map_err(|e| self.error(format!("reading metadata of {topic}"), e))
        })
    }

    /// Produces `(partition, key, payload, timestamp)` records and waits until all are acked.
    pub fn produce<'a>(
        &self,
        topic: &str,
        records: impl IntoIterator<Item = (i32, &'a str, &'a [u8], i64)>,
    ) -> Result<u64, KafkaError> {
        // Records go out in batches of up to a megabyte per partition, as a busy producer's
        // do (the flush at the end sends what lingers): with 5 ms of linger, a load spread over
        // a thousand partitions made a message set of each record, and the mock cluster, which
        // walks a partition's message sets from the first on every fetch, then read a 10M-event
        // day in quadratic time.
        // A bulk load waits for a busy broker as long as its flush does; a record given up is
        // reported, not counted as sent.
        let patience = self.op_timeout.max(Duration::from_secs(60));
        let producer = self.producer_lingering(200, patience, Deliveries::default())?;
        // The leaders known before the first send, as for consumers: otherwise a fresh client
        // may hold its records until librdkafka's one-second topic scan.
        producer
            .client()
            .fetch_metadata(Some(topic), self.op_timeout)
            .map_err(|e| self.error(format!("reading metadata of {topic}"), e))?;
        let mut sent = 0u64;
        for (partition, key, payload, ts) in records {
            let mut record = BaseRecord::to(topic)
                .partition(partition)
                .key(key)
                .payload(payload)
                .timestamp(ts);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((
                        rdkafka::error::KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                        back,
                    )) => {
                        record = back;
                        producer.poll(Duration::from_millis(10));
                    }
                    Err((e, _)) => {
                        return Err(self.error(format!("producing to {topic}[{partition}]"), e))
                    }
                }
            }
            sent += 1;
        }
        producer
            .flush(patience + Duration::from_secs(5))
            .map_err(|e| self.error(format!("flushing records to {topic}"), e))?;
        let context = producer.context();
        let failed = context.failed.load(Ordering::Relaxed);
        if failed > 0 {
            let first = context
                .first
                .lock()
                .ok()
                .and_then(|f| f.clone())
                .unwrap_or_default();
            return Err(self.error(
                format!("producing to {topic}"),
                format!("{failed} of {sent} records were not acknowledged (first: {first})"),
            ));
        }
        Ok(sent)
    }

    /// Produces a generated day into `topic`, each record to the partition of its key among
    /// `partitions`, with its own timestamp. Returns how many were acknowledged.
    pub fn produce_day(
        &self,
        topic: &str,
        partitions: i32,
        records: &[DayRecord],
    ) -> Result<u64, KafkaError> {
        let payloads: Vec<Vec<u8>> = records.iter().map(DayRecord::payload).collect();
        self.produce(
            topic,
            records.iter().zip(&payloads).map(|(r, p)| {
                (
                    partition_for(&r.key, partitions),
                    r.key.as_str(),
                    p.as_slice(),
                    r.timestamp_ms,
                )
            }),
        )
    }

    /// `(low, high)` watermarks of one partition (see [`asking_leaders`](Self::asking_leaders)).
    pub fn watermarks(&self, topic: &str, partition: i32) -> Result<(i64, i64), KafkaError> {
        self.asking_leaders(topic, &[partition], |c| {
            c.fetch_watermarks(topic, partition, self.op_timeout)
                .map_err(|e| self.error(format!("reading watermarks of {topic}[{partition}]"), e))
        })
    }

    /// Runs `ask` on the lookup client about `partitions` of `topic`. That client answers from
    /// the metadata it was last told, and a partition told without a leader (an election under
    /// way, a topic just created) stays so for it: when the answer is that a partition is
    /// unknown or has no leader, the broker is asked for the topic afresh, and `ask` repeated
    /// while one of them has no leader or, on a topic this handle created, is not known yet,
    /// until `op_timeout`. Still without a leader then, the error says so (an outage); a
    /// partition the topic does not have is the answer.
    pub(crate) fn asking_leaders<T>(
        &self,
        topic: &str,
        partitions: &[i32],
        ask: impl Fn(&BaseConsumer) -> Result<T, KafkaError>,
    ) -> Result<T, KafkaError> {
        let started = Instant::now();
        let mut asked_again = false;
        loop {
            let refused = match self.with_utility(&ask) {
                Err(e) if e.is_leaderless() => e,
                answer => return answer,
            };
            let seen = self.with_utility(|c| {
                TopicSeen::ask(c, topic, self.op_timeout)
                    .map_err(|e| self.error(refused.what.clone(), e))
            })?;
            let count = seen.as_ref().map_or(0, |s| s.partitions);
            let known = partitions.iter().all(|&p| p < count);
            let leaderless: Vec<i32> = seen
                .map(|s| s.leaderless)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| partitions.contains(p))
                .collect();
            let expected = known || self.created.iter().any(|t| t == topic);
            if started.elapsed() >= self.op_timeout || !expected {
                if leaderless.is_empty() {
                    return Err(refused);
                }
                return Err(self.error(
                    refused.what,
                    format!(
                        "the broker names no leader for {topic}{leaderless:?} after {:.1} s (Broker: Leader not available)",
                        started.elapsed().as_secs_f64()
                    ),
                ));
            }
            if asked_again || !leaderless.is_empty() || !known {
                std::thread::sleep(Duration::from_millis(50));
            }
            asked_again = true;
        }
    }
}

/// What the broker says of a topic's partitions when asked afresh: how many, and which have
/// no leader.
struct TopicSeen {
    partitions: i32,
    leaderless: Vec<i32>,
}

impl TopicSeen {
    /// Asks the broker for `topic`'s metadata (which also refreshes what `consumer` knows of
    /// it); `None` when the topic does not exist.
    fn ask(
        consumer: &BaseConsumer,
        topic: &str,
        timeout: Duration,
    ) -> Result<Option<TopicSeen>, rdkafka::error::KafkaError> {
        let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map(|t| TopicSeen {
                partitions: t.partitions().len() as i32,
                leaderless: t
                    .partitions()
                    .iter()
                    .filter(|p| p.leader() < 0)
                    .map(|p| p.id())
                    .collect(),
            }))
    }
}

/// Counts the records a producer could not deliver and keeps the first reason: librdkafka
/// reports a record given up (its message timeout passed, or the broker refused it) only to
/// the producer's delivery callback.
#[derive(Default)]
struct Deliveries {
    failed: AtomicU64,
    first: std::sync::Mutex<Option<String>>,
}

impl ClientContext for Deliveries {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        pass_on(level, fac, log_message);
    }
}

/// The context of the product's producers: librdkafka's lines passed on as every client's
/// are, but for the transient ones (see [`pass_on`]).
pub struct ProducerLog;

/// A producer of this crate's: idempotent, its transient lines kept out of the warnings.
pub type IdempotentProducer = BaseProducer<ProducerLog>;

impl ClientContext for ProducerLog {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        pass_on(level, fac, log_message);
    }
}

impl ProducerContext for ProducerLog {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &DeliveryResult<'_>, _: ()) {}
}

/// What an idempotent producer says while it waits for its producer id and librdkafka retries
/// by itself (the coordinator of a fresh Apache Kafka still loading, or not elected yet): not
/// a warning for the program's output, since the records wait and land once the id comes.
const TRANSIENT: [&str; 2] = ["Coordinator load in progress", "Coordinator not available"];

/// Passes a librdkafka line on as rdkafka's own context does, at its level; a transient line
/// (see [`TRANSIENT`]) at debug level.
fn pass_on(level: RDKafkaLogLevel, fac: &str, message: &str) {
    use RDKafkaLogLevel::*;
    if TRANSIENT.iter().any(|t| message.contains(t)) {
        tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
        return;
    }
    match level {
        Emerg | Alert | Critical | Error => {
            tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}")
        }
        Warning => tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Notice | Info => tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}"),
        Debug => tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}"),
    }
}

/// A client context that logs nothing: its caller reports the one failure that matters.
struct Quiet;

impl ClientContext for Quiet {
    fn log(&self, _: rdkafka::config::RDKafkaLogLevel, _: &str, _: &str) {}

    fn error(&self, _: rdkafka::error::KafkaError, _: &str) {}
}

impl rdkafka::consumer::ConsumerContext for Quiet {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut first) = self.first.lock() {
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

/// Which records a consumer is handed: only those of committed transactions (what every
/// consumer of this crate uses), or also those of aborted ones (re-reads that explain a jump).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    ReadCommitted,
    ReadUncommitted,
}

impl Isolation {
    fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

enum AdminFailure {
    TimedOut,
    Other(KafkaError),
}

pub(crate) fn partition_count(
    consumer: &BaseConsumer,
    topic: &str,
    timeout: Duration,
) -> Result<i32, rdkafka::error::KafkaError> {
    Ok(TopicSeen::ask(consumer, topic, timeout)?.map_or(0, |seen| seen.partitions))
}

/// Closes a consumer of a group ahead of its drop. rdkafka's drop closes it too, but serves
/// the close in 100 ms polls that its end does not cut short: every consumer dropped cost
/// 100 ms. Served here in 1 ms steps (bounded by `timeout`), the close takes what it takes;
/// the drop then finds the consumer closed and only says so (see `CLOSED_ON_DROP`).
pub fn close_consumer(consumer: &BaseConsumer, timeout: Duration) {
    if consumer.close_queue().is_err() {
        return; // not a group consumer, or closed already: the drop has nothing to wait for
    }
    let until = Instant::now() + timeout;
    while !consumer.closed() && Instant::now() < until {
        // Whatever was still fetched is dropped with the consumer.
        let _ = consumer.poll(Duration::from_millis(1));
    }
}

/// What rdkafka logs (at error level) when it drops a consumer [`close_consumer`] closed
/// already: no failure, filtered out of log output.
pub const CLOSED_ON_DROP: &str =
    "Failed to close consumer queue on drop: Consumer queue close error: BrokerDestroy";

impl Drop for Broker {
    fn drop(&mut self) {
        // Clients go before the mock cluster does, or they log failed reconnects; shared ones
        // with the last handle that shares them.
        if Arc::strong_count(&self.shared.utility) == 1 {
            if let Ok(mut utility) = self.shared.utility.lock() {
                if let Some(consumer) = utility.take() {
                    close_consumer(&consumer, self.op_timeout);
                }
            }
        }
        if Arc::strong_count(&self.shared.groups) == 1 {
            if let Ok(mut groups) = self.shared.groups.lock() {
                for (_, client) in groups.drain() {
                    // One still held elsewhere (a commit left waiting on its thread) is left to
                    // the process's end rather than waited for.
                    if let Ok(client) = Arc::try_unwrap(client) {
                        close_consumer(&client, self.op_timeout);
                    }
                }
            }
        }
        // What could not be deleted is said where the user sees it, naming each topic.
        if let Err(left) = self.delete_created_topics() {
            tracing::warn!("{left}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(reason: &str) -> KafkaError {
        KafkaError {
            servers: "127.0.0.1:9092".into(),
            what: "fetching".into(),
            reason: reason.into(),
        }
    }

    #[test]
    fn a_broker_away_for_a_while_is_an_outage() {
        for reason in [
            "Message consumption error: BrokerTransportFailure (Local: Broker transport failure)",
            "Local: All broker connections are down",
            "Meta data fetch error: OperationTimedOut (Local: Timed out)",
            "CoordinatorNotAvailable (Broker: Coordinator not available)",
            "CoordinatorLoadInProgress (Broker: Coordinator load in progress)",
            "NotCoordinator (Broker: Not coordinator)",
            "LeaderNotAvailable (Broker: Leader not available)",
            "no answer from the group's coordinator within 10 s",
            "an earlier commit got no answer from the group's coordinator within 10 s",
        ] {
            assert!(failed(reason).is_outage(), "{reason}");
        }
    }

    #[test]
    fn a_refusal_by_the_broker_is_no_outage() {
        for reason in [
            "UnknownTopicOrPartition (Broker: Unknown topic or partition)",
            "GroupAuthorizationFailed (Broker: Group authorization failed)",
            "OffsetOutOfRange (Broker: Offset out of range)",
            "InvalidConfig: bootstrap.servers",
        ] {
            assert!(!failed(reason).is_outage(), "{reason}");
        }
    }

    #[test]
    fn topic_names_follow_kafkas_rule() {
        for good in [
            "ticketflow.audit.v1",
            "a",
            "A-b_c.9",
            "...",
            &"x".repeat(249),
        ] {
            assert_eq!(check_topic_name(good), Ok(()), "{good}");
        }
        assert_eq!(check_topic_name(""), Err(TopicNameError::Empty));
        assert!(matches!(
            check_topic_name(&"x".repeat(250)),
            Err(TopicNameError::TooLong { len: 250, .. })
        ));
        assert_eq!(
            check_topic_name("bad topic name!"),
            Err(TopicNameError::Character {
                name: "bad topic name!".into(),
                found: ' '
            })
        );
        assert!(matches!(
            check_topic_name("tópico"),
            Err(TopicNameError::Character { found: 'ó', .. })
        ));
        for dots in [".", ".."] {
            assert!(matches!(
                check_topic_name(dots),
                Err(TopicNameError::Dots { .. })
            ));
        }
    }

    #[test]
    fn close_consumer_leaves_a_group_consumer_closed_for_its_drop() {
        let mut broker = Broker::embedded(1).unwrap();
        broker.create_topic("closing", 1).unwrap();
        let consumer = broker.consumer("closing-group", "earliest").unwrap();
        let mut tpl = rdkafka::TopicPartitionList::new();
        tpl.add_partition_offset("closing", 0, rdkafka::Offset::Beginning)
            .unwrap();
        consumer.assign(&tpl).unwrap();
        assert!(!consumer.closed());
        close_consumer(&consumer, broker.op_timeout);
        assert!(consumer.closed(), "the drop would close it again, waiting");
        // Closing twice is harmless: there is nothing left to close.
        close_consumer(&consumer, broker.op_timeout);
        assert!(consumer.closed());
    }

    #[test]
    fn records_the_broker_refuses_are_an_error_not_a_count() {
        let mut broker = Broker::embedded(1).unwrap();
        broker.create_topic("refused", 1).unwrap();
        let records: Vec<(i32, &str, &[u8], i64)> =
            (0..10).map(|i| (0, "k", b"{}".as_slice(), i)).collect();
        assert_eq!(broker.produce("refused", records.clone()).unwrap(), 10);
        // The broker answers every Produce request with an error librdkafka does not retry.
        let mock = broker.mock.as_ref().unwrap();
        mock.request_errors(
            rdkafka::types::RDKafkaApiKey::Produce,
            &[rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 50],
        );
        let err = broker.produce("refused", records).unwrap_err().to_string();
        assert!(err.contains("were not acknowledged"), "{err}");
        assert!(err.contains("of 10 records"), "{err}");
        mock.clear_request_errors(rdkafka::types::RDKafkaApiKey::Produce);
        assert_eq!(
            broker.watermarks("refused", 0).unwrap(),
            (0, 10),
            "only the first ten were written"
        );
    }

    /// The embedded cluster of three brokers with `topic`, `counts[p]` records in partition `p`.
    fn three_brokers_holding(topic: &str, counts: &[i64]) -> Broker {
        let mut broker = Broker::embedded(3).unwrap();
        broker.create_topic(topic, counts.len() as i32).unwrap();
        let records = counts
            .iter()
            .zip(0..)
            .flat_map(|(&n, p)| (0..n).map(move |ts| (p, "k", b"{}".as_slice(), ts)));
        assert_eq!(
            broker.produce(topic, records).unwrap(),
            counts.iter().sum::<i64>() as u64
        );
        broker
    }

    /// The lookup client keeps the metadata it was last told: a partition it saw without a
    /// leader (an election under way, or a topic just created) stayed so for it, and every
    /// watermark read until the deadline failed with "Unknown partition" without asking the
    /// broker again.
    #[test]
    fn a_partition_last_seen_without_a_leader_is_looked_up_again() {
        let broker = three_brokers_holding("electing", &[5, 0]);
        let mock = broker.mock.as_ref().unwrap();
        mock.partition_leader("electing", 0, None).unwrap();
        assert_eq!(broker.partitions("electing").unwrap(), 2);
        mock.partition_leader("electing", 0, Some(2)).unwrap();
        // Asked by a handle that did not create the topic, as a replay asks an operator's.
        let mut other = broker.same_address();
        other.op_timeout = Duration::from_secs(5);
        assert_eq!(other.watermarks("electing", 0).unwrap(), (0, 5));
    }

    /// The replay's plan reads every partition's watermarks in one ListOffsets request each:
    /// asked again as a single partition's are.
    #[test]
    fn the_plans_offset_lookups_ask_again_for_a_partition_last_seen_without_a_leader() {
        let broker = three_brokers_holding("planned", &[4, 3]);
        let mock = broker.mock.as_ref().unwrap();
        for p in [0, 1] {
            mock.partition_leader("planned", p, None).unwrap();
        }
        assert_eq!(broker.partitions("planned").unwrap(), 2);
        for p in [0, 1] {
            mock.partition_leader("planned", p, Some(3 - p)).unwrap();
        }
        let mut other = broker.same_address();
        other.op_timeout = Duration::from_secs(5);
        assert_eq!(
            super::super::offsets::watermarks(&other, "planned", &[0, 1]).unwrap(),
            vec![(0, 4), (0, 3)]
        );
    }

    /// A partition that stays without a leader past the deadline is an outage (a replay waits
    /// for the broker and resumes), named as such, not an unknown partition.
    #[test]
    fn a_partition_without_a_leader_past_the_deadline_is_an_outage() {
        let broker = three_brokers_holding("leaderless", &[0, 0]);
        broker
            .mock
            .as_ref()
            .unwrap()
            .partition_leader("leaderless", 1, None)
            .unwrap();
        let mut other = broker.same_address();
        other.op_timeout = Duration::from_millis(500);
        let err = other.watermarks("leaderless", 1).unwrap_err();
        assert!(err.is_outage(), "{err}");
        assert!(err.to_string().contains("leaderless[1]"), "{err}");
        // A partition the topic does not have is the answer at once, not an outage.
        let err = other.watermarks("leaderless", 7).unwrap_err();
        assert!(!err.is_outage(), "{err}");
    }

    #[test]
    fn the_embedded_cluster_refuses_a_bad_topic_name_before_creating_it() {
        let mut broker = Broker::embedded(1).unwrap();
        let err = broker.create_topic("bad topic name!", 1).unwrap_err();
        assert!(err.to_string().contains("\"bad topic name!\""), "{err}");
        assert_eq!(broker.partitions("bad topic name!").unwrap(), 0);
    }
}
