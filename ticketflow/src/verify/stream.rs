//! The topic side of a verification: each partition's range read in order through the replay's
//! own reader (assign and seek, contiguous offsets, idle timeout and deadline) by a consumer
//! that never commits, each record decoded, handed on in batches.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use super::VerifyError;
use crate::event::EventRecord;
use crate::kafka::{BrokerAddress, KafkaReplayConsumer};
use crate::replay::partition::read::Reader;
use crate::replay::{DayPlan, PartitionPlan, ReplayLimits};

/// The consumer group the reading consumer belongs to: librdkafka needs one to assign
/// partitions. It never commits, so the group never holds offsets.
pub const READ_GROUP: &str = "lessonprobe-verify";

/// One record as read: its offset and either the event, or why it is not an audit event.
pub(crate) struct Decoded {
    pub offset: i64,
    pub event: Result<EventRecord, String>,
    /// What the sorted runs take of the event, when the reader worked it out.
    pub digested: Option<Digested>,
}

/// What the sorted runs take of an event: the first half of its facts digest, the hash of its
/// payload as a JSON value, and the hashes a scanned table's rows are compared with.
#[derive(Clone, Copy)]
pub(crate) struct Digested {
    pub facts: [u8; 16],
    pub payload: u64,
    pub fields: [u64; 5],
}

impl Digested {
    /// `event`'s, with the scan's hashes only when `scanning` (zeros otherwise).
    pub fn of(event: &EventRecord, scanning: bool) -> Digested {
        let (digest, payload) = event.facts_digest_and_payload_hash();
        let mut facts = [0u8; 16];
        facts.copy_from_slice(&digest[..16]);
        Digested {
            facts,
            payload,
            fields: if scanning {
                super::scan::hashes(&event.columns())
            } else {
                [0; 5]
            },
        }
    }
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
    let partitions = plan.partitions.iter().filter(|p| p.records() > 0);
    read_each(
        &mut Reading::new(kafka, limits, batch),
        plan,
        partitions,
        &mut send,
    );
}

/// Reads the partitions of `plan` with records in their ranges as [`read_window`] does, but
/// `readers` at a time, each through a consumer of its own: while one partition is read, the
/// next ones are already being fetched (a partition read alone waits for its assignment and
/// first fetch, most of a partition's time on a broker a few milliseconds away). Batches of
/// different partitions arrive interleaved, each partition's in order; at the first error
/// (sent too) every reader stops.
pub(crate) fn read_window_side_by_side(
    kafka: &BrokerAddress,
    plan: &DayPlan,
    limits: ReplayLimits,
    (batch, readers): (usize, usize),
    send: &SyncSender<Result<Batch, VerifyError>>,
) {
    let partitions: Vec<&PartitionPlan> =
        plan.partitions.iter().filter(|p| p.records() > 0).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..readers.clamp(1, partitions.len().max(1)) {
            let (partitions, next, stop) = (&partitions, &next, &stop);
            scope.spawn(move || {
                let mut send = |item| !stop.load(Ordering::Relaxed) && send.send(item).is_ok();
                let mut reading = Reading {
                    // Several readers: the receiver, one thread, would do it alone otherwise.
                    digest: true,
                    ..Reading::new(kafka, limits, batch)
                };
                let taken =
                    std::iter::from_fn(|| partitions.get(next.fetch_add(1, Ordering::Relaxed)));
                if !read_each(&mut reading, plan, taken.copied(), &mut send) {
                    stop.store(true, Ordering::Relaxed);
                }
            });
        }
    });
}

/// Reads each of `partitions` of `plan` in turn through `reading`, handing each batch to
/// `send`, which answers whether it was taken. False when it stopped early: a receiver gone,
/// or an error (sent too).
fn read_each<'p>(
    reading: &mut Reading<'_>,
    plan: &DayPlan,
    partitions: impl Iterator<Item = &'p PartitionPlan>,
    send: &mut dyn FnMut(Result<Batch, VerifyError>) -> bool,
) -> bool {
    for p in partitions {
        match reading.partition(plan, p, send) {
            Ok(Sent::All) => {}
            Ok(Sent::Stopped) => return false,
            Err(e) => {
                send(Err(e));
                return false;
            }
        }
    }
    true
}

/// Whether a partition was sent whole, or a receiver went away (or another reader stopped).
enum Sent {
    All,
    Stopped,
}

/// One reader of the window: its consumer (made on the first partition), its batch size and
/// its bounds, all partitions sharing one deadline.
struct Reading<'a> {
    kafka: &'a BrokerAddress,
    limits: ReplayLimits,
    batch: usize,
    started: Instant,
    consumer: Option<KafkaReplayConsumer>,
    /// Whether each event is digested here, for a scanned table, rather than by the receiver.
    digest: bool,
}

impl<'a> Reading<'a> {
    fn new(kafka: &'a BrokerAddress, limits: ReplayLimits, batch: usize) -> Reading<'a> {
        Reading {
            kafka,
            limits,
            batch,
            started: Instant::now(),
            consumer: None,
            digest: false,
        }
    }

    fn remaining(&self) -> Duration {
        self.limits
            .deadline
            .saturating_sub(self.started.elapsed())
            .max(Duration::from_millis(1))
    }

    /// Reads `p`'s range of `plan` and hands each batch to `send`, which answers whether it
    /// was taken.
    fn partition(
        &mut self,
        plan: &DayPlan,
        p: &PartitionPlan,
        send: &mut dyn FnMut(Result<Batch, VerifyError>) -> bool,
    ) -> Result<Sent, VerifyError> {
        let Some(bounded) = plan.bounded(p) else {
            return Ok(Sent::All);
        };
        let limits = ReplayLimits {
            deadline: self.remaining(),
            idle_timeout: self.limits.idle_timeout,
        };
        let consumer = match self.consumer.as_mut() {
            Some(c) => c,
            None => {
                // The planning's broker and lookup client: only the fetching consumer is this
                // reader's.
                let broker = self
                    .kafka
                    .broker(limits.deadline.min(Duration::from_secs(10)));
                let made = KafkaReplayConsumer::new(&broker, &bounded.group())?;
                self.consumer.insert(made)
            }
        };
        let mut reader = Reader::open(&bounded, limits, consumer)?;
        let mut next = p.start;
        while next < p.stop {
            let gathered = reader.next_batch(self.batch, usize::MAX, next)?;
            // The position after the batch: past control markers and aborted records too.
            next = gathered.next;
            let records = gathered
                .records
                .iter()
                .map(|r| {
                    let mut event = EventRecord::decode(&r.payload).map_err(|e| e.to_string());
                    let digested = match &mut event {
                        Ok(e) if self.digest => {
                            let digested = Digested::of(e, true);
                            keep_only_the_id(e);
                            Some(digested)
                        }
                        _ => None,
                    };
                    Decoded {
                        offset: r.offset,
                        event,
                        digested,
                    }
                })
                .collect();
            if !send(Ok(Batch {
                partition: p.partition,
                records,
            })) {
                return Ok(Sent::Stopped);
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
        Ok(Sent::All)
    }
}

/// Empties every field of a digested `event` but its id, the one the receiver still takes:
/// their memory is freed here, on the thread that allocated it (freeing it on the receiver
/// left the allocator fresh pages to zero on this one).
fn keep_only_the_id(event: &mut EventRecord) {
    *event = EventRecord {
        event_id: std::mem::take(&mut event.event_id),
        tenant_id: String::new(),
        ticket_id: String::new(),
        action: String::new(),
        occurred_at: String::new(),
        payload: String::new(),
    };
}
