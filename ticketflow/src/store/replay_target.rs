//! What a replay does in its target database, whichever it is: the trait every backend's
//! target serves, and the bounds on every wait there.

use std::time::Duration;

use super::batch::PlanScope;
use super::error::StoreError;
use super::inspect::{Adoption, Inspection};
use super::ledger::{Batch, Claim, Counters, PlanStatus, RecordedPlan, Recording, WriteError};

/// How long opening a connection to the audit database may take, unless the URL's
/// `connect_timeout` or the run's deadline says less.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a replay lets its database work on one statement or wait for one lock: the
/// server gives up by then and says so, so on a live link an answer (the result, or that
/// error) always comes within it. A call unanswered well past it means the link went silent
/// (see [`super::unanswered`]).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the database may keep the replay waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a connection, the server's first answers and the TLS handshake included.
    pub connect: Duration,
    /// Any one statement, and any wait for a lock (PostgreSQL) or for the file (SQLite).
    pub statement: Duration,
    /// How long a call that only met another writer is made again.
    pub contention: Duration,
}

// A replay's and a reader's bounds read the database's URL: they stand beside `AuditDb`.
impl Timeouts {
    /// The same bound for all three.
    pub fn all(bound: Duration) -> Timeouts {
        Timeouts {
            connect: bound,
            statement: bound,
            contention: bound,
        }
    }
}

/// One owner's hold on one partition of a recorded plan: what claiming the partition takes,
/// and releasing it gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionClaim<'a> {
    pub plan_id: &'a str,
    pub partition: i32,
    pub owner: &'a str,
}

/// What a replay does in its target database. Every call is bounded by the [`Timeouts`] it
/// was opened with.
pub trait ReplayTarget: Send {
    /// The database, without a password: for messages.
    fn place(&self) -> &str;
    /// What the target holds; writes nothing.
    fn inspect(&mut self) -> Result<Inspection, StoreError>;
    /// Creates what `adoption` says is missing (`audit_events` when absent, the bookkeeping
    /// tables), and remembers how to write the adopted table.
    fn prepare(&mut self, adoption: &Adoption) -> Result<(), StoreError>;
    /// Every recorded plan with its partitions (none when there is no bookkeeping yet).
    fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError>;
    /// Records a new plan and its partitions, each with its checkpoint at its start.
    fn record_plan(&mut self, plan: &RecordedPlan) -> Result<(), StoreError>;
    /// Makes `owner` the owner of every partition of the plan (a writer that owned them before
    /// fails its next checkpoint), and marks the plan running.
    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError>;
    /// Records `plan` unless it, or another plan of its replay group, is recorded already —
    /// decided under a lock, so workers starting at once record it exactly once.
    fn record_plan_once(&mut self, plan: &RecordedPlan) -> Result<Recording, StoreError>;
    /// Makes the claim's owner the owner of one unfinished partition of the plan (the writer
    /// that owned it before fails its next checkpoint); waits for a batch of that partition in
    /// flight. `None`: the plan has no such partition.
    fn claim_partition(&mut self, claim: PartitionClaim<'_>) -> Result<Option<Claim>, StoreError>;
    /// Clears the owner of an unfinished partition where it is still the claim's owner.
    fn release_partition(&mut self, claim: PartitionClaim<'_>) -> Result<(), StoreError>;
    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError>;
    /// Conflicts recorded for the plan, per partition of the version not kept.
    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError>;
    /// Makes `batch` durable in one transaction together with its checkpoint — or, after
    /// [`begin`](Self::begin), writes it into the shared transaction inside a savepoint of its
    /// own (a batch that fails leaves no trace and the others stand), durable at
    /// [`commit`](Self::commit).
    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError>;
    /// This connection is one of `writers` writing at once: a memory budget for the whole run
    /// (SQLite's page cache) is split among them.
    fn share_with(&mut self, _writers: usize) -> Result<(), StoreError> {
        Ok(())
    }
    /// Opens one transaction for the batches written until [`commit`](Self::commit), of one
    /// partition or of several: fewer commits, each of more rows.
    fn begin(&mut self) -> Result<(), StoreError>;
    /// Commits the transaction [`begin`](Self::begin) opened: every batch written since is
    /// durable, with its checkpoint, or (on `Err`) none is.
    fn commit(&mut self) -> Result<(), StoreError>;
}
