//! The reading side of a bounded replay: position the replay consumer on one partition's range
//! and hand out batches of records that carry exactly the next expected offsets, within the
//! idle timeout and the wall-clock deadline.

use std::time::{Duration, Instant};

use super::{ReplayConsumer, ReplayError, ReplayErrorKind, ReplayLimits, ReplayPlan, ReplayRecord};

/// How long a batch that has begun waits for its next record before it is applied as it is.
const GATHER_WAIT: Duration = Duration::from_millis(5);

/// One batch as read: contiguous records from the position before it, and what stopped it
/// early, if anything (the records before such a stop are still to be applied).
pub(crate) struct Gathered {
    pub records: Vec<ReplayRecord>,
    pub stopped_on: Option<ReplayErrorKind>,
}

/// A replay consumer positioned at the start of a plan's range.
pub(crate) struct Reader<'a> {
    plan: &'a ReplayPlan,
    limits: ReplayLimits,
    consumer: &'a mut dyn ReplayConsumer,
    started: Instant,
    /// The offset the next record must carry.
    next: i64,
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
            next: plan.start(),
        })
    }

    /// The consumer, for committing what the batch made durable.
    pub fn consumer(&mut self) -> &mut dyn ReplayConsumer {
        &mut *self.consumer
    }

    /// Gathers up to `max` records and about `max_bytes` of payload (at least one record):
    /// waits for the first (idle timeout, deadline), then takes what has already arrived.
    /// `committed` is the last durable offset, for errors.
    pub fn next_batch(
        &mut self,
        max: usize,
        max_bytes: usize,
        committed: i64,
    ) -> Result<Gathered, ReplayError> {
        let (plan, limits) = (self.plan, self.limits);
        let fail = |kind: ReplayErrorKind| ReplayError {
            topic: plan.topic().to_owned(),
            partition: plan.partition(),
            committed: Some(committed),
            kind,
        };
        let mut records: Vec<ReplayRecord> = Vec::with_capacity(max.min(10_000));
        let mut stopped_on = None;
        let mut bytes = 0usize;
        while self.next < plan.stop() && records.len() < max && bytes < max_bytes {
            let gathering = !records.is_empty();
            let remaining = limits.deadline.saturating_sub(self.started.elapsed());
            if remaining.is_zero() {
                if gathering {
                    break;
                }
                return Err(fail(ReplayErrorKind::Deadline {
                    deadline: limits.deadline,
                    stop: plan.stop(),
                }));
            }
            let wait = if gathering {
                GATHER_WAIT.min(remaining)
            } else {
                remaining.min(limits.idle_timeout)
            };
            let record = match self
                .consumer
                .poll(wait)
                .map_err(|e| fail(ReplayErrorKind::Consumer(e)))?
            {
                Some(record) => record,
                None if gathering => break,
                None if wait < limits.idle_timeout => continue, // the deadline check ends it
                None => {
                    return Err(fail(ReplayErrorKind::Idle {
                        idle: limits.idle_timeout,
                        stop: plan.stop(),
                    }))
                }
            };
            if record.topic != plan.topic() || record.partition != plan.partition() {
                stopped_on = Some(ReplayErrorKind::ForeignRecord {
                    topic: record.topic,
                    partition: record.partition,
                });
                break;
            }
            if record.offset != self.next {
                stopped_on = Some(ReplayErrorKind::Gap {
                    expected: self.next,
                    got: record.offset,
                });
                break;
            }
            bytes = bytes.saturating_add(record.payload.len());
            records.push(record);
            self.next += 1;
        }
        Ok(Gathered {
            records,
            stopped_on,
        })
    }
}
