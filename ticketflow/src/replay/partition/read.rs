//! The reading side of a bounded replay: position the replay consumer on one partition's range
//! and hand out batches of records together with the position after them, driven by the
//! consumer's position rather than by record offsets, so control markers and aborted records
//! (verified by re-reading) are accounted for and any other jump stops the replay.

use std::time::{Duration, Instant};

use super::{
    GapFinding, GapReading, ReplayConsumer, ReplayError, ReplayErrorKind, ReplayLimits, ReplayPlan,
    ReplayRecord,
};

/// How long a batch that has begun waits for its next record before it is applied as it is.
const GATHER_WAIT: Duration = Duration::from_millis(5);

/// How long one poll waits before the position is looked at again: a range that ends in
/// control markers is done only once the position has moved past them.
const POLL: Duration = Duration::from_millis(50);

/// What the offsets of a batch held besides its records, by offset, so that a batch the
/// writer cuts short counts only what lies below its cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BatchCounts {
    /// Each jump over offsets without records: where it ended, its markers and aborted records.
    pub jumps: Vec<(i64, u64, u64)>,
    /// Offsets of records whose timestamps lie outside the plan's time window.
    pub out_of_window: Vec<i64>,
}

/// One batch as read: the records of offsets `[before, next)` (the other offsets held control
/// markers or aborted records), and what stopped it early, if anything (the records before such
/// a stop are still to be applied).
pub(crate) struct Gathered {
    pub records: Vec<ReplayRecord>,
    /// The position after the batch: what the writer commits.
    pub next: i64,
    pub counts: BatchCounts,
    pub stopped_on: Option<ReplayErrorKind>,
}

impl Gathered {
    /// `(markers, aborted)` of the jumps that end at or below `next`.
    pub fn jumps_below(&self, next: i64) -> (u64, u64) {
        self.counts
            .jumps
            .iter()
            .filter(|j| j.0 <= next)
            .fold((0, 0), |(m, a), j| (m + j.1, a + j.2))
    }

    /// Records below `next` whose timestamps lie outside the plan's time window.
    pub fn out_of_window_below(&self, next: i64) -> u64 {
        self.counts
            .out_of_window
            .iter()
            .filter(|&&o| o < next)
            .count() as u64
    }
}

/// A batch while [`Reader::next_batch`] gathers it.
struct Gathering {
    records: Vec<ReplayRecord>,
    counts: BatchCounts,
    stopped_on: Option<ReplayErrorKind>,
    /// Payload bytes of `records`.
    bytes: usize,
    /// The clock is read once per poll, after it: a batch reads it ten thousand times.
    now: Instant,
    /// When the position last moved.
    progress_at: Instant,
}

impl Gathering {
    fn new(max: usize) -> Gathering {
        let now = Instant::now();
        Gathering {
            records: Vec::with_capacity(max.min(10_000)),
            counts: BatchCounts::default(),
            stopped_on: None,
            bytes: 0,
            now,
            progress_at: now,
        }
    }
}

/// What one poll's outcome means for the batch being gathered.
enum Step {
    /// Gather on.
    More,
    /// The batch ends here; with what stopped it early, if anything.
    End(Option<ReplayErrorKind>),
}

/// A replay consumer positioned at the start of a plan's range.
pub(crate) struct Reader<'a> {
    plan: &'a ReplayPlan,
    limits: ReplayLimits,
    consumer: &'a mut dyn ReplayConsumer,
    started: Instant,
    /// The end offset captured before seeking.
    end: i64,
    /// Every offset below it is accounted for.
    next: i64,
    /// A record at or past `stop` that arrived while reading the range: the first one after it.
    beyond: Option<ReplayRecord>,
}

/// Where a [`Reader`] stood when it let go of its consumer.
pub(crate) struct Parked {
    limits: ReplayLimits,
    started: Instant,
    end: i64,
    next: i64,
    beyond: Option<ReplayRecord>,
}

impl<'a> Reader<'a> {
    /// Checks the consumer's group, captures the end offset, refuses `stop > end` before any
    /// seek, then seeks to `start`.
    pub fn open(
        plan: &'a ReplayPlan,
        limits: ReplayLimits,
        consumer: &'a mut dyn ReplayConsumer,
    ) -> Result<Self, ReplayError> {
        let started = Instant::now();
        let (topic, partition) = (plan.topic(), plan.partition());
        let fail = |committed: Option<i64>, kind: ReplayErrorKind| ReplayError {
            topic: topic.to_owned(),
            partition,
            committed,
            kind,
        };
        if consumer.group_id() != plan.replay_group() {
            return Err(fail(
                None,
                ReplayErrorKind::WrongGroup {
                    expected: plan.replay_group().to_owned(),
                    actual: consumer.group_id().to_owned(),
                },
            ));
        }
        let end = consumer
            .end_offset(topic, partition)
            .map_err(|e| fail(Some(plan.start()), ReplayErrorKind::Consumer(e)))?;
        if plan.stop() > end {
            return Err(fail(
                None,
                ReplayErrorKind::StopBeyondEnd {
                    stop: plan.stop(),
                    end,
                },
            ));
        }
        consumer
            .seek(topic, partition, plan.start())
            .map_err(|e| fail(Some(plan.start()), ReplayErrorKind::Consumer(e)))?;
        Ok(Reader {
            plan,
            limits,
            consumer,
            started,
            end,
            next: plan.start(),
            beyond: None,
        })
    }

    /// Lets go of the consumer, keeping where the reading stands: another partition's reader
    /// may use the consumer meanwhile, and [`resume`](Self::resume) takes it up again.
    pub(crate) fn park(self) -> Parked {
        Parked {
            limits: self.limits,
            started: self.started,
            end: self.end,
            next: self.next,
            beyond: self.beyond,
        }
    }

    /// The reader `parked` was, on `plan` (the one it was opened for) and `consumer` again:
    /// the consumer must not have read this partition since.
    pub(crate) fn resume(
        plan: &'a ReplayPlan,
        consumer: &'a mut dyn ReplayConsumer,
        parked: Parked,
    ) -> Self {
        Reader {
            plan,
            limits: parked.limits,
            consumer,
            started: parked.started,
            end: parked.end,
            next: parked.next,
            beyond: parked.beyond,
        }
    }

    /// The consumer, for committing what the batch made durable.
    pub fn consumer(&mut self) -> &mut dyn ReplayConsumer {
        &mut *self.consumer
    }

    /// Gathers up to `max` records and about `max_bytes` of payload (at least one record):
    /// waits for the first (idle timeout, deadline), then takes what has already arrived. A
    /// jump past offsets that held control markers or aborted records moves the position on
    /// and is counted; a position that moves past offsets without a record does the same
    /// (markers at the end of the range). `committed` is the last durable offset, for errors.
    pub fn next_batch(
        &mut self,
        max: usize,
        max_bytes: usize,
        committed: i64,
    ) -> Result<Gathered, ReplayError> {
        let plan = self.plan;
        let fail = |kind: ReplayErrorKind| ReplayError {
            topic: plan.topic().to_owned(),
            partition: plan.partition(),
            committed: Some(committed),
            kind,
        };
        let mut batch = Gathering::new(max);
        while self.next < plan.stop()
            && batch.records.len() < max
            && batch.bytes < max_bytes
            && self.beyond.is_none()
        {
            let Some(wait) = self.wait(&batch).map_err(fail)? else {
                break;
            };
            let polled = self
                .consumer
                .poll(wait)
                .map_err(|e| fail(ReplayErrorKind::Consumer(e)));
            batch.now = Instant::now();
            let step = match polled {
                Ok(Some(record)) => self.take(record, &mut batch),
                Ok(None) => self.quiet(&mut batch).map_err(fail)?,
                Err(e) => match self.removed_below_position(&e) {
                    Some(kind) => Step::End(Some(kind)),
                    None => return Err(e),
                },
            };
            if let Step::End(stopped_on) = step {
                batch.stopped_on = stopped_on;
                break;
            }
        }
        Ok(Gathered {
            records: batch.records,
            next: self.next,
            counts: batch.counts,
            stopped_on: batch.stopped_on,
        })
    }

    /// How long the next poll may wait: `None` when the deadline has run out on a batch that
    /// has records (it is applied as it is); the deadline or the idle timeout run out on an
    /// empty one is the error.
    fn wait(&self, batch: &Gathering) -> Result<Option<Duration>, ReplayErrorKind> {
        let (plan, limits) = (self.plan, self.limits);
        let gathering = !batch.records.is_empty();
        let remaining = limits
            .deadline
            .saturating_sub(batch.now.saturating_duration_since(self.started));
        if remaining.is_zero() {
            if gathering {
                return Ok(None);
            }
            return Err(ReplayErrorKind::Deadline {
                deadline: limits.deadline,
                stop: plan.stop(),
            });
        }
        let idle_left = limits
            .idle_timeout
            .saturating_sub(batch.now.saturating_duration_since(batch.progress_at));
        if idle_left.is_zero() && !gathering {
            return Err(ReplayErrorKind::Idle {
                idle: limits.idle_timeout,
                stop: plan.stop(),
            });
        }
        let wait = if gathering {
            GATHER_WAIT
        } else {
            POLL.min(idle_left)
        };
        Ok(Some(wait.min(remaining)))
    }

    /// A poll that brought no record: the position may have moved past control markers with
    /// none. A batch that has records ends when it has not.
    fn quiet(&mut self, batch: &mut Gathering) -> Result<Step, ReplayErrorKind> {
        let position = self
            .consumer
            .position(self.plan.topic(), self.plan.partition())
            .map_err(ReplayErrorKind::Consumer)?;
        Ok(match position.filter(|&p| p > self.next) {
            Some(p) => match self.account_jump(p, &mut batch.counts) {
                Ok(()) => {
                    batch.now = Instant::now();
                    batch.progress_at = batch.now;
                    Step::More
                }
                Err(kind) => Step::End(Some(kind)),
            },
            None if !batch.records.is_empty() => Step::End(None),
            None => Step::More,
        })
    }

    /// Takes `record` into the batch, after the offsets it jumped over are accounted for; a
    /// record of another partition, one behind the position, or one at or past `stop` (kept
    /// for [`late_records`](Self::late_records)) ends the batch instead.
    fn take(&mut self, record: ReplayRecord, batch: &mut Gathering) -> Step {
        let plan = self.plan;
        batch.progress_at = batch.now;
        if record.topic != plan.topic() || record.partition != plan.partition() {
            return Step::End(Some(ReplayErrorKind::ForeignRecord {
                topic: record.topic,
                partition: record.partition,
            }));
        }
        if record.offset < self.next {
            return Step::End(Some(ReplayErrorKind::Gap {
                expected: self.next,
                got: record.offset,
            }));
        }
        if record.offset > self.next {
            if let Err(kind) = self.account_jump(record.offset, &mut batch.counts) {
                return Step::End(Some(kind));
            }
            // Re-reading the jump took time of its own.
            batch.now = Instant::now();
        }
        if record.offset >= plan.stop() {
            self.beyond = Some(record);
            return Step::End(None);
        }
        if let Some((since, until)) = plan.window() {
            if !record.timestamp.is_some_and(|ts| since <= ts && ts < until) {
                batch.counts.out_of_window.push(record.offset);
            }
        }
        self.next = record.offset + 1;
        batch.bytes = batch.bytes.saturating_add(record.payload.len());
        batch.records.push(record);
        Step::More
    }

    /// Accounts for offsets `[next, got)` the consumer moved past without a record (up to the
    /// plan's stop): re-read, they must be control markers or aborted records.
    fn account_jump(&mut self, got: i64, counts: &mut BatchCounts) -> Result<(), ReplayErrorKind> {
        let (from, to) = (self.next, got.min(self.plan.stop()));
        let reading = self
            .consumer
            .reread(self.plan.topic(), self.plan.partition(), from, to)
            .map_err(ReplayErrorKind::Consumer)?
            .ok_or(ReplayErrorKind::Gap {
                expected: from,
                got,
            })?;
        let (markers, aborted) =
            explain(from, to, &reading).map_err(|finding| ReplayErrorKind::UnexplainedGap {
                expected: from,
                got,
                finding,
            })?;
        counts.jumps.push((to, markers, aborted));
        self.next = to;
        Ok(())
    }

    /// A consumer error that means retention removed offsets at the position (the replay
    /// consumer errs rather than jump when its offset is gone).
    fn removed_below_position(&mut self, error: &ReplayError) -> Option<ReplayErrorKind> {
        let ReplayErrorKind::Consumer(_) = &error.kind else {
            return None;
        };
        let reading = self
            .consumer
            .reread(
                self.plan.topic(),
                self.plan.partition(),
                self.next,
                self.next,
            )
            .ok()
            .flatten()?;
        (reading.log_start > self.next).then_some(ReplayErrorKind::RemovedWhileReading {
            from: self.next,
            log_start: reading.log_start,
        })
    }

    /// After the range is done: reads on past `stop`, up to the captured end, until a record
    /// later than `until + skew` arrives, and counts the records whose timestamps fall inside
    /// `[since, until)` — events of the window written after its stop. Ends early, with what it
    /// counted, when nothing arrives within the idle timeout or the deadline runs out.
    pub fn late_records(&mut self, (since, until): (i64, i64), skew: Duration) -> u64 {
        let horizon = until.saturating_add(skew.as_millis().min(i64::MAX as u128) as i64);
        let mut late = 0;
        let mut reached = self.plan.stop();
        let mut progress_at = Instant::now();
        let (topic, partition) = (self.plan.topic(), self.plan.partition());
        while reached < self.end {
            let remaining = self.limits.deadline.saturating_sub(self.started.elapsed());
            if remaining.is_zero() || progress_at.elapsed() >= self.limits.idle_timeout {
                break;
            }
            let record = match self.beyond.take() {
                Some(record) => Some(record),
                None => match self.consumer.poll(POLL.min(remaining)) {
                    Ok(record) => record,
                    Err(_) => break,
                },
            };
            match record {
                Some(r) if r.topic == topic && r.partition == partition => {
                    progress_at = Instant::now();
                    if r.offset >= self.end || r.timestamp.is_some_and(|ts| ts >= horizon) {
                        break;
                    }
                    if r.timestamp.is_some_and(|ts| since <= ts && ts < until) {
                        late += 1;
                    }
                    reached = r.offset + 1;
                }
                Some(_) => break,
                None => match self.consumer.position(topic, partition) {
                    Ok(Some(p)) if p > reached => {
                        reached = p;
                        progress_at = Instant::now();
                    }
                    Ok(_) => {}
                    Err(_) => break,
                },
            }
        }
        late
    }
}

/// Judges a re-read of the jumped-over offsets `[from, to)`: `(markers, aborted)` when they
/// held only control markers (nothing delivered either way) and records of aborted
/// transactions (delivered read_uncommitted only); otherwise why not.
fn explain(from: i64, to: i64, reading: &GapReading) -> Result<(u64, u64), GapFinding> {
    if reading.log_start > from {
        return Err(GapFinding::Removed {
            log_start: reading.log_start,
        });
    }
    if let Some(&offset) = reading.committed.iter().find(|&&o| from <= o && o < to) {
        return Err(GapFinding::Undelivered { offset });
    }
    let aborted = reading
        .uncommitted
        .iter()
        .filter(|&&o| from <= o && o < to)
        .count() as u64;
    Ok(((to - from) as u64 - aborted, aborted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::partition::{test_plan, ConsumerError};
    use std::collections::VecDeque;

    /// A broker's view of one partition, offset by offset: what a replay consumer meets.
    #[derive(Clone, Copy, PartialEq)]
    enum Slot {
        Committed(i64),
        Aborted,
        Marker,
        /// Removed by compaction or never delivered: the consumer skips it.
        Lost,
    }

    /// Delivers like a read_committed consumer of a broker that filters aborted records, with
    /// a position that moves past trailing markers after an empty poll; re-reads like one.
    struct Log {
        slots: Vec<Slot>,
        at: usize,
        log_start: i64,
        delivered: VecDeque<i64>,
        rereads: Rereads,
    }

    /// What re-reading the jumped-over offsets finds.
    enum Rereads {
        /// The slots as delivered.
        Delivered,
        /// Other slots: a consumer that skipped what a re-read then delivers.
        Truth(Vec<Slot>),
        /// Nothing: a consumer that can neither re-read nor tell its position.
        Blind,
    }

    impl Log {
        fn new(slots: Vec<Slot>) -> Self {
            Log {
                slots,
                at: 0,
                log_start: 0,
                delivered: VecDeque::new(),
                rereads: Rereads::Delivered,
            }
        }
    }

    impl ReplayConsumer for Log {
        fn group_id(&self) -> &str {
            "replay"
        }
        fn end_offset(&mut self, _: &str, _: i32) -> Result<i64, ConsumerError> {
            Ok(self.slots.len() as i64)
        }
        fn seek(&mut self, _: &str, _: i32, offset: i64) -> Result<(), ConsumerError> {
            self.at = offset as usize;
            Ok(())
        }
        fn poll(&mut self, _: Duration) -> Result<Option<ReplayRecord>, ConsumerError> {
            while self.at < self.slots.len() {
                let offset = self.at as i64;
                self.at += 1;
                if let Slot::Committed(ts) = self.slots[offset as usize] {
                    self.delivered.push_back(offset);
                    return Ok(Some(ReplayRecord {
                        topic: "t".into(),
                        partition: 0,
                        offset,
                        timestamp: Some(ts),
                        key: None,
                        payload: Vec::new(),
                    }));
                }
            }
            Ok(None)
        }
        fn position(&mut self, _: &str, _: i32) -> Result<Option<i64>, ConsumerError> {
            Ok(match self.rereads {
                Rereads::Blind => None,
                _ => Some(self.at as i64),
            })
        }
        fn reread(
            &mut self,
            _: &str,
            _: i32,
            from: i64,
            to: i64,
        ) -> Result<Option<GapReading>, ConsumerError> {
            let slots = match &self.rereads {
                Rereads::Delivered => &self.slots,
                Rereads::Truth(slots) => slots,
                Rereads::Blind => return Ok(None),
            };
            let pick = |want: &dyn Fn(Slot) -> bool| -> Vec<i64> {
                (from..to).filter(|&o| want(slots[o as usize])).collect()
            };
            Ok(Some(GapReading {
                log_start: self.log_start,
                uncommitted: pick(&|s| matches!(s, Slot::Committed(_) | Slot::Aborted)),
                committed: pick(&|s| matches!(s, Slot::Committed(_))),
            }))
        }
        fn commit(&mut self, _: &str, _: i32, _: i64) -> Result<(), ConsumerError> {
            Ok(())
        }
    }

    const LIMITS: ReplayLimits = ReplayLimits {
        deadline: Duration::from_secs(5),
        idle_timeout: Duration::from_millis(300),
    };

    /// `(offsets, position)` per batch.
    type Batches = Vec<(Vec<i64>, i64)>;

    /// The batches, the summed counts (markers, aborted, out of window), and the error that
    /// stopped the read, if one did.
    type ReadAll = (Batches, (u64, u64, u64), Option<ReplayErrorKind>);

    /// Reads `[start, stop)` of `log` in batches of `max`.
    fn read_all(log: &mut Log, plan: &ReplayPlan, max: usize) -> ReadAll {
        let mut reader = Reader::open(plan, LIMITS, log).unwrap();
        let (mut batches, mut total) = (Vec::new(), (0, 0, 0));
        let mut committed = plan.start();
        while committed < plan.stop() {
            let g = match reader.next_batch(max, usize::MAX, committed) {
                Ok(g) => g,
                Err(e) => return (batches, total, Some(e.kind)),
            };
            let (markers, aborted) = g.jumps_below(g.next);
            total.0 += markers;
            total.1 += aborted;
            total.2 += g.out_of_window_below(g.next);
            batches.push((g.records.iter().map(|r| r.offset).collect(), g.next));
            committed = g.next;
            if g.stopped_on.is_some() {
                return (batches, total, g.stopped_on);
            }
        }
        (batches, total, None)
    }

    /// Reads `plan`'s range of [`transactions`] in batches of `max`, which must not fail: the
    /// batches and the summed counts.
    fn read_transactions(plan: &ReplayPlan, max: usize) -> (Batches, (u64, u64, u64)) {
        let (batches, counts, error) = read_all(&mut Log::new(transactions()), plan, max);
        assert!(error.is_none(), "{error:?}");
        (batches, counts)
    }

    use Slot::*;

    /// Commit 3, abort 2, commit 3: markers at 3, 6 and 10, end 11.
    fn transactions() -> Vec<Slot> {
        vec![
            Committed(10),
            Committed(11),
            Committed(12),
            Marker,
            Aborted,
            Aborted,
            Marker,
            Committed(13),
            Committed(14),
            Committed(15),
            Marker,
        ]
    }

    #[test]
    fn markers_and_aborted_records_are_counted_and_the_position_reaches_stop() {
        let plan = test_plan(0, 0, 11);
        let (batches, counts) = read_transactions(&plan, 100);
        let offsets: Vec<i64> = batches.iter().flat_map(|b| b.0.clone()).collect();
        assert_eq!(offsets, vec![0, 1, 2, 7, 8, 9]);
        assert_eq!(
            batches.last().unwrap().1,
            11,
            "the trailing marker is passed"
        );
        assert_eq!((counts.0, counts.1), (3, 2));
        // Small batches: each position is past its records and the markers before the next.
        let (batches, counts) = read_transactions(&plan, 2);
        let positions: Vec<i64> = batches.iter().map(|b| b.1).collect();
        assert_eq!(positions, vec![2, 8, 10, 11]);
        assert_eq!((counts.0, counts.1), (3, 2));
    }

    #[test]
    fn a_range_that_stops_before_a_marker_ends_at_stop() {
        let plan = test_plan(0, 1, 10);
        let (batches, counts) = read_transactions(&plan, 100);
        assert_eq!(batches.last().unwrap().1, 10);
        assert_eq!((counts.0, counts.1), (2, 2));
    }

    #[test]
    fn a_jump_over_a_committed_record_or_removed_offsets_is_not_explained() {
        // The consumer skips offset 8, yet a read_committed re-read delivers it.
        let plan = test_plan(0, 0, 11);
        let mut skipping = Log::new(transactions());
        skipping.slots[8] = Lost;
        let mut truth = transactions();
        truth[8] = Committed(14);
        skipping.rereads = Rereads::Truth(truth);
        let mut reader = Reader::open(&plan, LIMITS, &mut skipping).unwrap();
        let g = reader.next_batch(100, usize::MAX, 0).unwrap();
        assert_eq!(
            g.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![0, 1, 2, 7]
        );
        assert_eq!(g.next, 8, "the position stays before the unexplained jump");
        assert!(
            matches!(
                g.stopped_on,
                Some(ReplayErrorKind::UnexplainedGap {
                    expected: 8,
                    got: 9,
                    finding: GapFinding::Undelivered { offset: 8 }
                })
            ),
            "{:?}",
            g.stopped_on
        );
        assert_eq!(
            explain(
                3,
                5,
                &GapReading {
                    log_start: 4,
                    ..GapReading::default()
                }
            ),
            Err(GapFinding::Removed { log_start: 4 })
        );
    }

    #[test]
    fn a_consumer_that_cannot_reread_keeps_every_jump_a_gap() {
        let mut consumer = Log::new(transactions());
        consumer.rereads = Rereads::Blind;
        let plan = test_plan(0, 0, 11);
        let mut reader = Reader::open(&plan, LIMITS, &mut consumer).unwrap();
        let g = reader.next_batch(100, usize::MAX, 0).unwrap();
        assert_eq!(g.next, 3);
        assert!(
            matches!(
                g.stopped_on,
                Some(ReplayErrorKind::Gap {
                    expected: 3,
                    got: 7
                })
            ),
            "{:?}",
            g.stopped_on
        );
    }

    #[test]
    fn timestamps_outside_the_window_and_late_records_are_counted() {
        // Window [12, 15): offsets 0..2 hold 10, 11, 12; 7..9 hold 13, 14, 15.
        let plan = test_plan(0, 0, 9).timed(12, 15);
        let (_, counts) = read_transactions(&plan, 100);
        assert_eq!(counts.2, 2, "10 and 11 are before the window");
        // Past stop 7 (ts 13, 14 are in the window, 15 is not).
        let mut slots = transactions();
        slots[9] = Committed(12);
        let mut log = Log::new(slots);
        let plan = test_plan(0, 0, 8).timed(12, 14);
        let mut reader = Reader::open(&plan, LIMITS, &mut log).unwrap();
        let mut committed = 0;
        while committed < 8 {
            committed = reader.next_batch(100, usize::MAX, committed).unwrap().next;
        }
        assert_eq!(reader.late_records((12, 14), Duration::from_millis(5)), 1);
    }
}
