//! The system under test as one seam: each check reaches the ticketflow parts whose behaviour it
//! claims through [`System`]. The registry runs every check on [`Ticketflow`], the real parts;
//! tests put a broken part in its place to show that the check then fails.

use rdkafka::consumer::BaseConsumer;
use ticketflow::consumer::{AuditConsumer, Commit, ConsumeError, Position};
use ticketflow::event::AuditEvent;
use ticketflow::kafka::{Broker, IdempotentProducer, KafkaError, KafkaReplayConsumer};
use ticketflow::replay::{
    run_bounded_replay, PartitionRequest, PlanError, ReplayConsumer, ReplayError, ReplayGroup,
    ReplayLimits, ReplayPlan, ReplaySummary,
};
use ticketflow::store::{AuditStore, StoreError};

use crate::context::{ProbeContext, ProbeError};
use crate::live::LiveStore;

/// The parts a check exercises; every method defaults to the real one.
pub(crate) trait System {
    /// The lesson-29 consumer: applies `event` through `store`, then commits `offset + 1`
    /// through `commit`.
    fn consume(
        &self,
        store: &mut dyn AuditStore,
        commit: &mut dyn FnMut(&Commit) -> Result<(), KafkaError>,
        at: &Position,
        event: &AuditEvent,
    ) -> Result<bool, ConsumeError> {
        AuditConsumer::new(Borrowed(store), commit).consume(at, event)
    }

    /// The audit store in the case's database, beside the live service's tables.
    fn open_store(&self, ctx: &ProbeContext) -> Result<Box<dyn LiveStore>, ProbeError> {
        ctx.open_live_store()
    }

    /// A replay plan, validated.
    fn plan(&self, request: PartitionRequest<'_>) -> Result<ReplayPlan, PlanError> {
        ReplayPlan::new(request)
    }

    /// The bounded replay of one partition.
    #[allow(clippy::result_large_err)] // ticketflow's own error, as its replay returns it
    fn replay(
        &self,
        plan: &ReplayPlan,
        limits: ReplayLimits,
        consumer: &mut dyn ReplayConsumer,
        store: &mut dyn AuditStore,
    ) -> Result<ReplaySummary, ReplayError> {
        run_bounded_replay(plan, limits, consumer, store)
    }

    /// The replay's consumer over Kafka, committing for `group`.
    fn replay_consumer(
        &self,
        broker: &Broker,
        group: &ReplayGroup,
    ) -> Result<Box<dyn ReplayConsumer>, KafkaError> {
        Ok(Box::new(KafkaReplayConsumer::new(broker, group)?))
    }

    /// A plain consumer of `group` with `auto.offset.reset=reset`, as a service restarts one.
    fn group_consumer(
        &self,
        broker: &Broker,
        group: &str,
        reset: &str,
    ) -> Result<BaseConsumer, KafkaError> {
        broker.consumer(group, reset)
    }

    /// The producer that keyed events go through, its partitioner choosing their partition.
    fn producer(&self, broker: &Broker) -> Result<IdempotentProducer, KafkaError> {
        broker.producer()
    }
}

/// The real ticketflow.
pub(crate) struct Ticketflow;

impl System for Ticketflow {}

/// A borrowed store, for the consumer that owns the store it is given.
struct Borrowed<'a>(&'a mut dyn AuditStore);

impl AuditStore for Borrowed<'_> {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        self.0.apply_once(event)
    }
    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        self.0.audit_rows()
    }
}
