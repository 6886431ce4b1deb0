//! A member of the replay group: subscribes to the topic with cooperative-sticky assignment and
//! tells its worker which partitions the group hands it or takes away. It reads no records (its
//! partitions stay paused); it commits the offsets its worker made durable in SQL, each commit
//! answered within the broker's operation timeout.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaResult;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

use super::commit::Committer;
use super::ReplayGroup;
use super::{Broker, KafkaError};

/// A change of this member's share of the topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    Assigned(Vec<i32>),
    /// Taken away (also when the group counted this member as gone).
    Revoked(Vec<i32>),
    Failed(String),
}

/// Collects the group's rebalances as they are served inside `poll`.
struct MemberContext {
    topic: String,
    events: Mutex<Vec<GroupEvent>>,
}

impl MemberContext {
    fn push(&self, event: GroupEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event);
        }
    }

    fn partitions(&self, tpl: &TopicPartitionList) -> Vec<i32> {
        tpl.elements_for_topic(&self.topic)
            .iter()
            .map(|e| e.partition())
            .collect()
    }
}

impl ClientContext for MemberContext {}

impl ConsumerContext for MemberContext {
    /// Takes what the group assigns at the end of the log and paused, so this member never
    /// fetches nor asks for committed offsets: the worker reads each partition from its SQL
    /// checkpoint with a reader of its own.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let outcome: KafkaResult<()> = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let assigned = self.partitions(tpl);
                let done = tpl.set_all_offsets(Offset::End).and_then(|()| {
                    if cooperative {
                        consumer.incremental_assign(tpl)
                    } else {
                        consumer.assign(tpl)
                    }
                });
                let done = done.and_then(|()| consumer.pause(tpl));
                self.push(GroupEvent::Assigned(assigned));
                done
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.push(GroupEvent::Revoked(self.partitions(tpl)));
                if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                }
            }
            other => {
                self.push(GroupEvent::Failed(format!("rebalance: {other:?}")));
                self.push(GroupEvent::Revoked(self.partitions(tpl)));
                consumer.unassign()
            }
        };
        if let Err(e) = outcome {
            self.push(GroupEvent::Failed(format!("rebalance: {e}")));
        }
    }
}

/// One member of the replay group on one topic.
pub struct GroupMember {
    /// Commits through the member's client on a thread of its own, so that a coordinator
    /// that stopped answering holds a commit at most `timeout` (librdkafka's synchronous commit
    /// waits for one for ever). Dropped before the client: a drop after an unanswered commit
    /// waits up to the session timeout for its answer, so the client can close.
    committer: Mutex<Committer>,
    consumer: Arc<BaseConsumer<MemberContext>>,
    topic: String,
    servers: String,
    timeout: Duration,
    /// Offsets made durable in SQL whose commit the group refused for now (a rebalance in
    /// progress): committed again later, forgotten when the partition goes.
    owed: Mutex<BTreeMap<i32, i64>>,
}

impl GroupMember {
    /// Joins `group` on `topic`. The session timeout is 6 s unless `-X session.timeout.ms`
    /// says otherwise: a member that dies is replaced after it.
    pub fn join(broker: &Broker, group: &ReplayGroup, topic: &str) -> Result<Self, KafkaError> {
        let mut config = broker.config();
        if config.get("session.timeout.ms").is_none() {
            config.set("session.timeout.ms", "6000");
        }
        config
            .set("group.id", group.as_str())
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "error")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "false");
        let context = MemberContext {
            topic: topic.to_owned(),
            events: Mutex::new(Vec::new()),
        };
        let consumer: Arc<BaseConsumer<MemberContext>> = config
            .create_with_context(context)
            .map(Arc::new)
            .map_err(|e| broker.error(format!("joining group {}", group.as_str()), e))?;
        super::broker::opened(
            consumer.client().native_ptr(),
            &format!("member of group {}", group.as_str()),
        );
        consumer
            .subscribe(&[topic])
            .map_err(|e| broker.error(format!("subscribing to {topic}"), e))?;
        // A commit left unanswered keeps the client from closing: a dropped member waits for
        // its answer at most a session timeout, past which the group has dropped the member
        // anyway, so that a coordinator back by then sees it leave rather than time out.
        let session = config
            .get("session.timeout.ms")
            .and_then(|ms| ms.parse().ok())
            .map_or(Duration::from_secs(6), Duration::from_millis);
        let committer = Committer::through(Arc::clone(&consumer), broker.op_timeout, session)
            .map_err(|e| broker.error(format!("joining group {}", group.as_str()), e))?;
        Ok(GroupMember {
            committer: Mutex::new(committer),
            consumer,
            topic: topic.to_owned(),
            servers: broker.servers().to_owned(),
            timeout: broker.op_timeout,
            owed: Mutex::new(BTreeMap::new()),
        })
    }

    fn error(&self, what: String, reason: impl std::fmt::Display) -> KafkaError {
        KafkaError {
            servers: self.servers.clone(),
            what,
            reason: reason.to_string(),
        }
    }

    /// Serves the group for up to `wait` and returns what changed. Revoked partitions' owed
    /// commits are forgotten: their next owner commits from the SQL checkpoint.
    pub fn poll(&self, wait: Duration) -> Vec<GroupEvent> {
        // Paused partitions deliver nothing; anything else is the group's own error.
        let error = match self.consumer.poll(wait) {
            Some(Err(e)) => Some(GroupEvent::Failed(e.to_string())),
            _ => None,
        };
        let mut events = match self.consumer.context().events.lock() {
            Ok(mut events) => std::mem::take(&mut *events),
            Err(_) => Vec::new(),
        };
        events.extend(error);
        if let Ok(mut owed) = self.owed.lock() {
            for event in &events {
                if let GroupEvent::Revoked(partitions) = event {
                    for p in partitions {
                        owed.remove(p);
                    }
                }
            }
        }
        events
    }

    /// Commits `offset` on `partition` for the group; when the group refuses it (a rebalance
    /// in progress, a generation gone), keeps it owed and says why.
    pub fn commit(&self, partition: i32, offset: i64) -> Result<(), KafkaError> {
        let what = || format!("committing {}[{partition}]@{offset}", self.topic);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, partition, Offset::Offset(offset))
            .map_err(|e| self.error(what(), e))?;
        let result = match self.committer.lock() {
            Ok(mut committer) => committer.commit(&tpl),
            Err(_) => Err("a previous commit panicked".to_owned()),
        };
        if let Ok(mut owed) = self.owed.lock() {
            match &result {
                Ok(()) => {
                    owed.remove(&partition);
                }
                Err(_) => {
                    owed.insert(partition, offset);
                }
            }
        }
        result.map_err(|e| self.error(what(), e))
    }

    /// Commits what is owed; `Ok` when nothing is owed any more.
    pub fn settle(&self) -> Result<(), KafkaError> {
        let owed: Vec<(i32, i64)> = match self.owed.lock() {
            Ok(owed) => owed.iter().map(|(p, o)| (*p, *o)).collect(),
            Err(_) => Vec::new(),
        };
        owed.into_iter()
            .try_for_each(|(partition, offset)| self.commit(partition, offset))
    }

    /// The group's committed offsets on `partitions` (`None` where it has none).
    pub fn committed(&self, partitions: &[i32]) -> Result<Vec<Option<i64>>, KafkaError> {
        let what = || format!("reading the committed offsets of {}", self.topic);
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(&self.topic, p);
        }
        let answer = self
            .consumer
            .committed_offsets(tpl, self.timeout)
            .map_err(|e| self.error(what(), e))?;
        let out = partitions
            .iter()
            .map(
                |&p| match answer.find_partition(&self.topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => Some(o),
                    _ => None,
                },
            )
            .collect();
        // The list goes before its consumer can (a consumer dropped first may hang).
        drop(answer);
        Ok(out)
    }
}
