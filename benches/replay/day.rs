//! The day every part reads: generated, produced to the broker, and kept in the order a replay
//! applies it when (i) or (b) needs it.

use std::time::{Duration, Instant};

use ticketflow::day::{self, DaySpec};
use ticketflow::event::EventRecord;
use ticketflow::kafka::Broker;

use super::inserts::Row;
use super::{Settings, CHUNK_EVENTS, TOPIC};

/// The day as produced.
pub struct Day {
    /// Every event in the order a replay applies them (partition after partition, each in
    /// offset order); none when neither (i) nor (b) runs.
    pub rows: Vec<Row>,
    /// Records the broker holds in all partitions.
    pub total: i64,
    /// Payload bytes of an event, on average over the first thousand.
    pub average_bytes: usize,
    /// Time spent producing.
    pub produced: Duration,
}

impl Day {
    /// Generates and produces the day. Kept for (i) and (b), the day is generated at once.
    /// Otherwise it is generated in chunks of a million events (each with its own seed, so
    /// every event_id is distinct, and each spread over the same three days), produced and
    /// dropped one after the other: a day of 10,000,000 events held whole took 17.5 GB here.
    pub fn load(broker: &Broker, settings: &Settings) -> Day {
        let keep = !settings.skip("i") || !settings.skip("b");
        Day::load_on(broker, TOPIC, (settings.events, settings.partitions), keep)
    }

    /// Generates `n` events and produces them to `topic`'s `partitions`, kept in memory with
    /// `keep` (see [`load`](Self::load)).
    pub fn load_on(
        broker: &Broker,
        topic: &str,
        (n, partitions): (usize, usize),
        keep: bool,
    ) -> Day {
        let chunk = if keep { n } else { n.min(CHUNK_EVENTS) };
        let mut average_bytes = 0;
        let mut produced = Duration::ZERO;
        let mut records = Vec::new();
        let mut done = 0;
        for part in 0u64.. {
            if done >= n {
                break;
            }
            let size = chunk.min(n - done);
            records = day::generate(&DaySpec {
                events: size,
                tickets: 50_000,
                tenants: 20,
                redelivery_per_mille: 0,
                padding: 100,
                // Not the broker's sample day's seed: its one event would come back as a conflict.
                seed: 0xbe4c_4d4a + part,
                ..DaySpec::default()
            });
            if part == 0 {
                average_bytes = records
                    .iter()
                    .take(1000)
                    .map(|r| r.payload().len())
                    .sum::<usize>()
                    / records.len().clamp(1, 1000);
            }
            let started = Instant::now();
            broker
                .produce_day(topic, partitions as i32, &records)
                .expect("produce");
            produced += started.elapsed();
            done += size;
        }
        // The order a replay applies them: partition after partition, each in offset order.
        let mut next_offset = vec![0i64; partitions];
        let mut rows: Vec<Row> = records
            .into_iter()
            .take(if keep { usize::MAX } else { 0 })
            .map(|r| {
                let partition = day::partition_for(&r.key, partitions as i32);
                let raw = r.payload();
                let offset = next_offset[partition as usize];
                next_offset[partition as usize] += 1;
                Row {
                    event: EventRecord::decode(&raw).expect("a generated event decodes"),
                    raw,
                    partition,
                    offset,
                    timestamp: r.timestamp_ms,
                }
            })
            .collect();
        rows.sort_by_key(|r| (r.partition, r.offset));
        let total: i64 = (0..partitions as i32)
            .map(|p| broker.watermarks(topic, p).map(|(l, h)| h - l).unwrap_or(0))
            .sum();
        assert!(
            total as usize >= n,
            "the broker kept {total} of {n} records: spread them over more partitions"
        );
        Day {
            rows,
            total,
            average_bytes,
            produced,
        }
    }
}
