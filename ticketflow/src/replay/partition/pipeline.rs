//! One partition's bounded replay with its writing on a thread of its own: while a batch is
//! made durable, the next one is read and decoded — and once the range is read (with that
//! batch or the one before it), the first batch of the partition that comes next, so a run of
//! many partitions keeps the database busy from one partition to the next. A batch is handed
//! to the writer only after the one before it is durable and its offsets committed: a batch
//! that fails (or stops the run) is the last one written.

use std::sync::mpsc::sync_channel;

use super::apply::{self, BatchWriter};
use super::read::{Gathered, Parked, Reader};
use super::{
    ReplayConsumer, ReplayError, ReplayErrorKind, ReplayLimits, ReplayOptions, ReplayPlan,
    ReplaySummary, BATCH_BYTES, BATCH_RECORDS,
};
use crate::event::{DecodeError, EventRecord};

/// A batch as read, each record decoded.
type Read = (Gathered, Vec<Result<EventRecord, DecodeError>>);

/// A partition whose reading began before its replay did: its reader, parked, and its first
/// batch — or why it could not begin.
pub(crate) struct ReadAhead {
    partition: i32,
    start: i64,
    limits: ReplayLimits,
    begun: Result<(Parked, Option<Result<Read, ReplayError>>), ReplayError>,
}

impl ReadAhead {
    /// Whether this is the beginning of `plan`'s range.
    fn is_for(&self, plan: &ReplayPlan) -> bool {
        self.partition == plan.partition && self.start == plan.start
    }
}

/// How a partition's reading begins.
pub(crate) enum Start {
    /// Opened now, within these limits.
    Open(ReplayLimits),
    /// Begun while the previous partition was written.
    Ahead(Box<ReadAhead>),
}

/// The partition to begin reading once this one's range is read, and its limits, asked for
/// at the moment it is opened.
pub(crate) type Then<'p> = (&'p ReplayPlan, &'p dyn Fn() -> ReplayLimits);

fn batch_limits(options: ReplayOptions) -> (usize, usize) {
    // A batch in memory stays small however large the transaction (`batch`) is.
    (
        options.batch.min(BATCH_RECORDS),
        options.batch_bytes.min(BATCH_BYTES),
    )
}

fn read_batch(
    reader: &mut Reader<'_>,
    options: ReplayOptions,
    committed: i64,
) -> Result<Read, ReplayError> {
    let (max, max_bytes) = batch_limits(options);
    reader
        .next_batch(max, max_bytes, committed)
        .map(|gathered| {
            let decoded = apply::decode(&gathered);
            (gathered, decoded)
        })
}

/// Checks the limits, opens `plan`'s reader and reads its first batch (if its range is not
/// empty), then parks the reader.
fn begin(
    plan: &ReplayPlan,
    limits: ReplayLimits,
    options: ReplayOptions,
    consumer: &mut dyn ReplayConsumer,
) -> ReadAhead {
    let begun = (|| {
        if limits.deadline.is_zero() || limits.idle_timeout.is_zero() || options.batch == 0 {
            return Err(ReplayError {
                topic: plan.topic.clone(),
                partition: plan.partition,
                committed: None,
                kind: ReplayErrorKind::BadLimits {
                    deadline: limits.deadline,
                    idle_timeout: limits.idle_timeout,
                    batch: options.batch,
                },
            });
        }
        let mut reader = Reader::open(plan, limits, consumer)?;
        let first = (plan.start < plan.stop).then(|| read_batch(&mut reader, options, plan.start));
        Ok((reader.park(), first))
    })();
    ReadAhead {
        partition: plan.partition,
        start: plan.start,
        limits,
        begun,
    }
}

/// Once `plan`'s range is read: the records after it counted as late (with a skew), and the
/// reading of the partition `then` names begun.
fn range_read(
    plan: &ReplayPlan,
    reader: &mut Reader<'_>,
    options: ReplayOptions,
    then: Option<Then<'_>>,
    summary: &mut ReplaySummary,
) -> Option<ReadAhead> {
    if let (Some(skew), Some(window)) = (options.skew, plan.window()) {
        summary.late = reader.late_records(window, skew);
    }
    then.map(|(next_plan, limits)| begin(next_plan, limits(), options, reader.consumer()))
}

/// Replays `plan` (see [`super::run_bounded_replay_with`]); with `then`, also begins that
/// partition's reading once this range is read, and returns it when this replay succeeded.
pub(crate) fn run(
    plan: &ReplayPlan,
    start: Start,
    then: Option<Then<'_>>,
    options: ReplayOptions,
    consumer: &mut dyn ReplayConsumer,
    writer: &mut dyn BatchWriter,
    progress: &mut dyn FnMut(&ReplaySummary),
) -> (Result<ReplaySummary, ReplayError>, Option<ReadAhead>) {
    let begun = match start {
        Start::Ahead(ahead) if ahead.is_for(plan) => *ahead,
        // Begun for another range, it is of no use: this one opens as it would have.
        Start::Ahead(ahead) => begin(plan, ahead.limits, options, consumer),
        Start::Open(limits) => begin(plan, limits, options, consumer),
    };
    let (parked, first) = match begun.begun {
        Ok(begun) => begun,
        Err(e) => return (Err(e), None),
    };
    let mut reader = Reader::resume(plan, consumer, parked);
    let mut summary = ReplaySummary {
        final_offset: plan.start,
        ..ReplaySummary::default()
    };
    let mut next_partition = None;
    let fail = |committed: i64, kind: ReplayErrorKind| ReplayError {
        topic: plan.topic.clone(),
        partition: plan.partition,
        committed: Some(committed),
        kind,
    };
    let result = std::thread::scope(|scope| {
        let (to_writer, batches) = sync_channel(0);
        let (written_tx, written) = sync_channel(1);
        scope.spawn(move || {
            for (committed, gathered, decoded) in batches {
                let result =
                    apply::write_batch(plan, options, &gathered, decoded, committed, writer);
                if written_tx.send((gathered, result)).is_err() {
                    return;
                }
            }
        });
        let mut ahead = first;
        let mut handed_on = false;
        while let Some(read) = ahead.take() {
            let committed = summary.final_offset;
            // A read that failed behind a batch in flight counts from what that batch made
            // durable.
            let (gathered, decoded) = read.map_err(|e| ReplayError {
                committed: Some(committed),
                ..e
            })?;
            let more = gathered.stopped_on.is_none() && gathered.next < plan.stop;
            let read_all = gathered.stopped_on.is_none() && gathered.next >= plan.stop;
            let next = gathered.next;
            if to_writer.send((committed, gathered, decoded)).is_err() {
                break;
            }
            if more {
                let read = read_batch(&mut reader, options, committed);
                // The range read to its end with this batch: the next partition's reading
                // begins now, while the batch sent is written, not after it — a short last
                // batch would leave the database little to do meanwhile.
                if matches!(&read, Ok((g, _)) if g.stopped_on.is_none() && g.next >= plan.stop) {
                    next_partition = range_read(plan, &mut reader, options, then, &mut summary);
                    handed_on = true;
                }
                ahead = Some(read);
            } else if read_all && !handed_on {
                next_partition = range_read(plan, &mut reader, options, then, &mut summary);
                handed_on = true;
            }
            let Ok((gathered, result)) = written.recv() else {
                break;
            };
            let applied = result?;
            if let Some(applied) = &applied {
                apply::commit_durable(plan, applied, reader.consumer())?;
            }
            if let Some(applied) = applied.as_ref().filter(|a| a.next > committed) {
                summary.add(applied, &gathered);
                progress(&summary);
            }
            // A record that stopped the batch (or could not be decoded) ends the run there,
            // after what came before it became durable.
            let stopped = applied.and_then(|a| a.stopped_on).or(gathered.stopped_on);
            if let Some(kind) = stopped {
                return Err(fail(summary.final_offset, kind));
            }
            // Only a stop cuts a batch short: the batch read ahead begins where this one ended.
            debug_assert!(summary.final_offset == next || next <= committed);
        }
        Ok(())
    });
    match result {
        Ok(()) => (Ok(summary), next_partition),
        Err(e) => (Err(e), None),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::event::AuditEvent;
    use crate::replay::partition::{test_plan, ConsumerError, ReplayRecord};
    use crate::store::{Batch, Counters, StoreError, WriteError};

    /// Partitions of audit events, read one partition at a time as the Kafka consumer does;
    /// logs every record delivered, and every commit with how many records were delivered
    /// by then.
    struct Topic {
        partitions: HashMap<i32, i64>,
        at: Option<(i32, i64)>,
        delivered: Vec<(i32, i64)>,
        commits: Vec<(i32, i64)>,
        delivered_at_commit: Vec<usize>,
    }

    impl Topic {
        fn new(sizes: &[(i32, i64)]) -> Self {
            Topic {
                partitions: sizes.iter().copied().collect(),
                at: None,
                delivered: Vec::new(),
                commits: Vec::new(),
                delivered_at_commit: Vec::new(),
            }
        }
    }

    impl ReplayConsumer for Topic {
        fn group_id(&self) -> &str {
            "replay"
        }
        fn end_offset(&mut self, _: &str, partition: i32) -> Result<i64, ConsumerError> {
            Ok(self.partitions[&partition])
        }
        fn seek(&mut self, _: &str, partition: i32, offset: i64) -> Result<(), ConsumerError> {
            self.at = Some((partition, offset));
            Ok(())
        }
        fn poll(&mut self, _: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
            let Some((partition, offset)) = self.at else {
                return Ok(None);
            };
            if offset >= self.partitions[&partition] {
                return Ok(None);
            }
            self.at = Some((partition, offset + 1));
            self.delivered.push((partition, offset));
            Ok(Some(ReplayRecord {
                topic: "t".into(),
                partition,
                offset,
                timestamp: Some(offset),
                key: None,
                payload: AuditEvent::sample_with_id(&format!("e{partition}-{offset}")).to_json(),
            }))
        }
        fn commit(&mut self, _: &str, partition: i32, next: i64) -> Result<(), ConsumerError> {
            self.commits.push((partition, next));
            self.delivered_at_commit.push(self.delivered.len());
            Ok(())
        }
    }

    /// Keeps `(partition, first, next, records)` of each batch it is given; fails the
    /// `fail_at`-th one (counting from 1).
    struct Log {
        batches: Vec<(i32, i64, i64, usize)>,
        fail_at: Option<usize>,
    }

    impl Log {
        /// Nothing written yet; the write of batch `fail_at` (counted from 1) fails.
        fn failing_at(fail_at: Option<usize>) -> Self {
            Log {
                batches: Vec::new(),
                fail_at,
            }
        }
    }

    impl BatchWriter for Log {
        fn write(&mut self, batch: &Batch<'_>) -> Result<Counters, WriteError> {
            self.batches.push((
                batch.partition,
                batch.first,
                batch.next,
                batch.entries.len(),
            ));
            if self.fail_at == Some(self.batches.len()) {
                return Err(WriteError::Store(StoreError::Unavailable("down".into())));
            }
            Ok(Counters {
                records: batch.entries.len() as u64,
                inserted: batch.entries.len() as u64,
                ..Counters::default()
            })
        }
    }

    const LIMITS: ReplayLimits = ReplayLimits {
        deadline: Duration::from_secs(5),
        idle_timeout: Duration::from_millis(50),
    };

    fn options(batch: usize) -> ReplayOptions {
        ReplayOptions {
            batch,
            ..ReplayOptions::default()
        }
    }

    fn plan(partition: i32, stop: i64) -> ReplayPlan {
        test_plan(partition, 0, stop)
    }

    #[test]
    fn a_batch_that_fails_is_the_last_written_though_the_next_was_read() {
        let mut topic = Topic::new(&[(0, 30)]);
        let mut log = Log::failing_at(Some(2));
        let (result, ahead) = run(
            &plan(0, 30),
            Start::Open(LIMITS),
            None,
            options(10),
            &mut topic,
            &mut log,
            &mut |_| {},
        );
        let err = result.unwrap_err();
        assert_eq!(err.committed, Some(10), "{err}");
        assert!(ahead.is_none());
        // The third batch was read while the second was written, and never handed on.
        assert_eq!(topic.delivered.len(), 30);
        assert_eq!(log.batches, vec![(0, 0, 10, 10), (0, 10, 20, 10)]);
        assert_eq!(topic.commits, vec![(0, 10)]);
    }

    /// Replays partition 0 of `topic` in batches of 10, with partition 1 to begin next.
    fn first_of_two(
        topic: &mut Topic,
        log: &mut Log,
    ) -> (Result<ReplaySummary, ReplayError>, Option<ReadAhead>) {
        let (first, second) = (plan(0, topic.partitions[&0]), plan(1, topic.partitions[&1]));
        let limits = || LIMITS;
        run(
            &first,
            Start::Open(LIMITS),
            Some((&second, &limits)),
            options(10),
            topic,
            log,
            &mut |_| {},
        )
    }

    #[test]
    fn the_next_partition_begins_while_the_last_batch_is_written_and_goes_on_from_there() {
        let mut topic = Topic::new(&[(0, 25), (1, 25)]);
        let mut log = Log::failing_at(None);
        let (result, ahead) = first_of_two(&mut topic, &mut log);
        assert_eq!(result.unwrap().final_offset, 25);
        let ahead = ahead.expect("the second partition begun");
        // Its first batch was read as soon as the first partition's range was read: while
        // the batch before the last was written, before it was committed.
        assert_eq!(topic.commits[..3], [(0, 10), (0, 20), (0, 25)]);
        assert_eq!(topic.delivered_at_commit[..3], [20, 35, 35]);
        assert_eq!(
            topic.delivered[25..],
            (0..10).map(|o| (1, o)).collect::<Vec<_>>()
        );
        let (result, next) = run(
            &plan(1, 25),
            Start::Ahead(Box::new(ahead)),
            None,
            options(10),
            &mut topic,
            &mut log,
            &mut |_| {},
        );
        assert!(next.is_none());
        assert_eq!(result.unwrap().counters.records, 25);
        let expected: Vec<(i32, i64)> = (0..25)
            .map(|o| (0, o))
            .chain((0..25).map(|o| (1, o)))
            .collect();
        assert_eq!(topic.delivered, expected, "each record read once, in order");
        assert_eq!(
            log.batches,
            vec![
                (0, 0, 10, 10),
                (0, 10, 20, 10),
                (0, 20, 25, 5),
                (1, 0, 10, 10),
                (1, 10, 20, 10),
                (1, 20, 25, 5)
            ]
        );
        assert_eq!(
            topic.commits,
            vec![(0, 10), (0, 20), (0, 25), (1, 10), (1, 20), (1, 25)]
        );
    }

    #[test]
    fn a_partition_that_fails_hands_on_no_reading_of_the_next() {
        // Its first batch fails: with 10 records it was the last one, with 15 the last one was
        // read while it was written. Either way partition 1 was begun with the read of the last
        // batch, and is dropped.
        for size in [10, 15] {
            let mut topic = Topic::new(&[(0, size), (1, 10)]);
            let mut log = Log::failing_at(Some(1));
            let (result, ahead) = first_of_two(&mut topic, &mut log);
            assert_eq!(result.unwrap_err().committed, Some(0), "{size} records");
            assert_eq!(
                topic.delivered.len() as i64,
                size + 10,
                "partition 1 was begun ({size} records)"
            );
            assert!(ahead.is_none(), "{size} records");
            assert_eq!(log.batches, vec![(0, 0, 10, 10)], "{size} records");
            assert!(topic.commits.is_empty(), "{size} records");
        }
    }
}
