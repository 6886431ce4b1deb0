//! Kafka through `rdkafka`: the embedded mock cluster or a broker given by address, topics
//! named per run, producing keyed records, the replay consumer and offset lookups.

mod broker;
mod offsets;
mod replay_consumer;
mod scan;
mod target;

pub use broker::{Broker, KafkaError};
pub use offsets::{
    committed_offsets, partition_window, time_windows, AutoLookup, BrokerLookup, OffsetLookup,
    TimeWindow,
};
pub use replay_consumer::KafkaReplayConsumer;
pub use target::{KafkaTarget, KafkaTargetError, REPLAY_OWNED_PROPERTIES};
