//! `ReplayConsumer` over an rdkafka consumer: manual assign and seek, synchronous commits of
//! explicit offsets for its own group, end offsets from the high watermark.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::broker::partition_count;
use super::{Broker, KafkaError};
use crate::replay::{ConsumerError, ReplayConsumer, ReplayRecord};

pub struct KafkaReplayConsumer {
    group: String,
    servers: String,
    consumer: BaseConsumer,
    /// For metadata and watermarks only.
    meta: BaseConsumer,
    timeout: Duration,
}

impl KafkaReplayConsumer {
    pub fn new(broker: &Broker, group: &str) -> Result<Self, KafkaError> {
        Ok(KafkaReplayConsumer {
            group: group.to_owned(),
            servers: broker.servers().to_owned(),
            consumer: broker.consumer(group, "error")?,
            meta: broker.consumer("lessonprobe-utility", "error")?,
            timeout: broker.op_timeout,
        })
    }

    /// A failed call of this consumer, with the broker it was talking to.
    fn error(&self, what: String, reason: impl std::fmt::Display) -> ConsumerError {
        ConsumerError::Kafka(KafkaError {
            servers: self.servers.clone(),
            what,
            reason: reason.to_string(),
        })
    }
}

impl ReplayConsumer for KafkaReplayConsumer {
    fn group_id(&self) -> &str {
        &self.group
    }

    fn end_offset(&mut self, topic: &str, partition: i32) -> Result<i64, ConsumerError> {
        // Asked on a client of its own: behind this consumer's outstanding fetch the broker's
        // answer could wait for the whole fetch wait.
        let partitions = partition_count(&self.meta, topic, self.timeout)
            .map_err(|e| self.error(format!("reading metadata of {topic}"), e))?;
        if partition >= partitions {
            return Err(ConsumerError::NoSuchPartition {
                topic: topic.to_owned(),
                partitions,
                partition,
            });
        }
        self.meta
            .fetch_watermarks(topic, partition, self.timeout)
            .map(|(_, high)| high)
            .map_err(|e| self.error(format!("reading watermarks of {topic}[{partition}]"), e))
    }

    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
        let what = || format!("assigning {topic}[{partition}] at {offset}");
        // The partition's leader must be known to this client when it is assigned: a fresh
        // client asks for it at once, and when no broker connection is up at that instant
        // librdkafka asks again only on its one-second topic scan (a whole second idle).
        self.consumer
            .fetch_metadata(Some(topic), self.timeout)
            .map_err(|e| self.error(what(), e))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
            .map_err(|e| self.error(what(), e))?;
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.error(what(), e))
    }

    fn poll(&mut self, timeout: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
        match self.consumer.poll(timeout) {
            None => Ok(None),
            Some(Err(e)) => Err(self.error("polling".into(), e)),
            Some(Ok(m)) => Ok(Some(ReplayRecord {
                topic: m.topic().to_owned(),
                partition: m.partition(),
                offset: m.offset(),
                timestamp: m.timestamp().to_millis(),
                payload: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            })),
        }
    }

    fn commit(
        &mut self,
        topic: &str,
        partition: i32,
        next_offset: i64,
    ) -> Result<(), ConsumerError> {
        let what = || format!("committing {topic}[{partition}]@{next_offset}");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Offset(next_offset))
            .map_err(|e| self.error(what(), e))?;
        self.consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| self.error(what(), e))
    }
}
