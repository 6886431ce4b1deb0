//! The topic side of a verification: each partition's range read in order through the replay's
//! own reader (assign and seek, contiguous offsets, idle timeout and deadline) by a consumer
//! that never commits, each record decoded, handed on in batches.

use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use super::VerifyError;
use crate::event::EventRecord;
use crate::kafka::{BrokerAddress, KafkaReplayConsumer};
use crate::replay::partition::read::Reader;
use crate::replay::{DayPlan, ReplayLimits};

/// The consumer group the reading consumer belongs to: librdkafka needs one to assign
/// partitions. It never commits, so the group never holds offsets.
pub const READ_GROUP: &str = "lessonprobe-verify";

/// One record as read: its offset and either the event, or why it is not an audit event.
pub(crate) struct Decoded {
    pub offset: i64,
    pub event: Result<EventRecord, String>,
}

/// Consecutive records of one partition.
pub(crate) struct Batch {
    pub partition: i32,
    pub records: Vec<Decoded>,
}

/// Reads every partition of `plan` with records in its range and sends them in batches of up
/// to `batch` records, batch after batch to each of `sends` in turn (so a receiver that takes
/// from them in the same turn sees the window in order); stops at the first error (sent too,
/// in its turn), or when a receiver is gone.
pub(crate) fn read_window(
    kafka: &BrokerAddress,
    plan: &DayPlan,
    limits: ReplayLimits,
    batch: usize,
    sends: &[SyncSender<Result<Batch, VerifyError>>],
) {
    let mut turn = sends.iter().cycle();
    let mut send = |item| turn.next().is_some_and(|s| s.send(item).is_ok());
    let started = Instant::now();
    let result = (|| -> Result<(), VerifyError> {
        let remaining = || {
            limits
                .deadline
                .saturating_sub(started.elapsed())
                .max(Duration::from_millis(1))
        };
        // The planning's broker and lookup client: only the fetching consumer is this reader's.
        let broker = kafka.broker(remaining().min(Duration::from_secs(10)));
        let mut consumer: Option<KafkaReplayConsumer> = None;
        for p in plan.partitions.iter().filter(|p| p.records() > 0) {
            let Some(bounded) = plan.bounded(p) else {
                continue;
            };
            let consumer = match consumer.as_mut() {
                Some(c) => c,
                None => consumer.insert(KafkaReplayConsumer::new(&broker, &bounded.group())?),
            };
            let limits = ReplayLimits {
                deadline: remaining(),
                idle_timeout: limits.idle_timeout,
            };
            let mut reader = Reader::open(&bounded, limits, consumer)?;
            let mut next = p.start;
            while next < p.stop {
                let gathered = reader.next_batch(batch, usize::MAX, next)?;
                // The position after the batch: past control markers and aborted records too.
                next = gathered.next;
                let records = gathered
                    .records
                    .iter()
                    .map(|r| Decoded {
                        offset: r.offset,
                        event: EventRecord::decode(&r.payload).map_err(|e| e.to_string()),
                    })
                    .collect();
                if !send(Ok(Batch {
                    partition: p.partition,
                    records,
                })) {
                    return Ok(());
                }
                if let Some(kind) = gathered.stopped_on {
                    return Err(crate::replay::ReplayError {
                        topic: bounded.topic().to_owned(),
                        partition: p.partition,
                        committed: None,
                        kind,
                    }
                    .into());
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = result {
        send(Err(e));
    }
}
