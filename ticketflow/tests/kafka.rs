//! The Kafka adapters against the embedded mock cluster: partition checks and timestamp lookups
//! with the reading fallback.

use std::time::Duration;

use ticketflow::day::{self, DaySpec, YESTERDAY};
use ticketflow::kafka::{
    partition_window, time_windows, AutoLookup, Broker, BrokerLookup, KafkaReplayConsumer,
    OffsetLookup,
};
use ticketflow::replay::{
    run_bounded_replay, ConsumerError, PartitionRequest, ReplayErrorKind, ReplayLimits, ReplayPlan,
};
use ticketflow::store::SqliteAuditStore;

fn load_day(broker: &mut Broker, topic: &str, partitions: i32) -> Vec<day::DayRecord> {
    broker.create_topic(topic, partitions).unwrap();
    let records = day::generate(&DaySpec {
        events: 300,
        ..DaySpec::default()
    });
    broker.produce_day(topic, partitions, &records).unwrap();
    records
}

const LIMITS: ReplayLimits = ReplayLimits {
    deadline: Duration::from_secs(20),
    idle_timeout: Duration::from_secs(3),
};

#[test]
fn a_plan_for_a_partition_the_topic_lacks_is_a_clear_error() {
    let mut broker = Broker::embedded(1).unwrap();
    broker.create_topic("one-partition", 1).unwrap();
    let plan = ReplayPlan::new(PartitionRequest {
        live_group: "live",
        replay_group: "replay",
        topic: "one-partition",
        partition: 2,
        start: 0,
        stop: 10,
    })
    .unwrap();
    let mut consumer = KafkaReplayConsumer::new(&broker, &plan.group()).unwrap();
    let mut store = SqliteAuditStore::in_memory().unwrap();
    let err = run_bounded_replay(&plan, LIMITS, &mut consumer, &mut store).unwrap_err();
    assert!(
        matches!(
            err.kind,
            ReplayErrorKind::Consumer(ConsumerError::NoSuchPartition {
                partitions: 1,
                partition: 2,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("topic one-partition has 1 partitions; the plan needs partition 2"),
        "{err}"
    );
}

#[test]
fn the_mock_answers_end_to_timestamp_lookups_and_the_fallback_reads_the_right_offsets() {
    let mut broker = Broker::embedded(1).unwrap();
    let records = load_day(&mut broker, "lookup", 2);
    for p in 0..2 {
        let mine: Vec<&day::DayRecord> = records
            .iter()
            .filter(|r| day::partition_for(&r.key, 2) == p)
            .collect();
        let expected_start = mine
            .iter()
            .position(|r| r.timestamp_ms >= YESTERDAY.0)
            .map(|i| i as i64);
        let expected_stop = mine
            .iter()
            .position(|r| r.timestamp_ms >= YESTERDAY.1)
            .map(|i| i as i64);
        // The mock's own index says -1 for a time that has records after it.
        assert_eq!(
            BrokerLookup::new(&broker)
                .offsets_for_time("lookup", &[p], YESTERDAY.0)
                .unwrap(),
            vec![None]
        );
        let window = partition_window(
            &broker,
            &mut AutoLookup::new(&broker),
            "lookup",
            p,
            YESTERDAY.0,
            YESTERDAY.1,
        )
        .unwrap();
        assert_eq!(
            (window.since, window.until),
            (expected_start, expected_stop)
        );
        assert_eq!(
            window.range(),
            (expected_start.unwrap(), expected_stop.unwrap())
        );
        // After the last record there is no offset: None, not "the end".
        let later = day::FIRST_DAY_MS + 10 * day::DAY_MS;
        let windows = time_windows(
            &broker,
            &mut AutoLookup::new(&broker),
            "lookup",
            &[p],
            later,
            later + 1,
        )
        .unwrap();
        assert_eq!((windows[0].since, windows[0].until), (None, None));
    }
}
