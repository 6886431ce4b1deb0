//! Kafka through `rdkafka`: the embedded mock cluster or a broker given by address, topics
//! named per run, listing and deleting topics and groups, producing keyed records, the replay consumer and its bounded commits, members
//! of the replay group and offset lookups.

mod admin;
mod broker;
mod commit;
mod group_member;
mod offsets;
mod replay_consumer;
mod scan;
mod target;

pub use admin::Deletion;
pub use broker::{
    check_topic_name, clients_opened, close_consumer, Broker, BrokerAddress, IdempotentProducer,
    KafkaError, ProducerLog, TopicNameError, TopicsLeft, CLOSED_ON_DROP,
};
pub use group_member::{GroupEvent, GroupMember};
pub use offsets::{
    committed_offsets, partition_window, time_windows, AutoLookup, BrokerLookup, OffsetLookup,
    TimeWindow,
};
pub use replay_consumer::{
    ConsumerError, GapReading, GroupError, KafkaReplayConsumer, ReplayConsumer, ReplayGroup,
    ReplayRecord,
};
pub use target::{
    is_secret_property, redact, KafkaTarget, KafkaTargetError, REPLAY_OWNED_PROPERTIES,
};
