//! Contention is waiting, not failure: a store call that ran into another writer (SQLite's busy
//! file, PostgreSQL's deadlock, serialization failure or lock timeout) is made again, with a
//! growing pause, until the run's deadline; only then does the contention become the error.
//! Every attempt counts as a call waiting for its answer ([`super::unanswered`]) until it
//! returns.

use std::time::{Duration, Instant};

use super::batch::PlanScope;
use super::error::StoreError;
use super::inspect::{Adoption, Inspection};
use super::ledger::{Batch, Claim, Counters, PlanStatus, RecordedPlan, Recording, WriteError};
use super::replay_target::{PartitionClaim, ReplayTarget};
use super::unanswered;

/// The first pause after a contended call, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_millis(250);

/// How long a connection's calls may keep trying past contention: its run's deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Patience {
    until: Instant,
}

/// An error that may only say another transaction was in the way.
pub(crate) trait Contended {
    fn contended(&self) -> bool;
}

impl Contended for StoreError {
    fn contended(&self) -> bool {
        self.is_transient()
    }
}

impl Contended for WriteError {
    fn contended(&self) -> bool {
        matches!(self, WriteError::Store(e) if e.is_transient())
    }
}

impl Patience {
    /// Contended calls are made again for at most `within` from now.
    pub(crate) fn within(within: Duration) -> Patience {
        Patience {
            until: Instant::now() + within,
        }
    }

    /// Runs `op` until it succeeds, fails for another reason, or the deadline leaves no room
    /// for another pause. `op` must be a whole unit of work (its own transaction, or one
    /// statement in autocommit): a failed attempt leaves nothing behind.
    pub(crate) fn run<T, E: Contended + std::fmt::Display>(
        self,
        place: &str,
        mut op: impl FnMut() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut pause = FIRST_PAUSE;
        let mut attempt = 1u32;
        loop {
            match op() {
                Err(e) if e.contended() && Instant::now() + pause < self.until => {
                    tracing::debug!("{place}: attempt {attempt} met another writer ({e}); trying again in {pause:?}");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(LONGEST_PAUSE);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

/// A replay target whose calls wait out other writers: each call that is a whole unit of work
/// is made again while it only met another transaction, until the run's deadline. A batch
/// written into a transaction [`begin`](ReplayTarget::begin) opened is not: the transaction
/// may be gone with it, so that error goes to the caller, which knows what the transaction held.
pub(crate) struct Patient<T> {
    inner: T,
    patience: Patience,
    /// A transaction opened by `begin` is open.
    shared: bool,
}

impl<T: ReplayTarget> Patient<T> {
    pub(crate) fn new(inner: T, patience: Patience) -> Self {
        Patient {
            inner,
            patience,
            shared: false,
        }
    }

    /// `call`, made again while it only meets another writer; each attempt counts as waiting
    /// for its answer (asked to do `what`) until it returns.
    fn patiently<R, E: Contended + std::fmt::Display>(
        &mut self,
        what: &str,
        mut call: impl FnMut(&mut T) -> Result<R, E>,
    ) -> Result<R, E> {
        let (patience, inner) = (self.patience, &mut self.inner);
        let place = inner.place().to_owned();
        patience.run(&place, || {
            let _waiting = unanswered::asking(&place, what);
            call(inner)
        })
    }

    /// `call` made once, counting as waiting for its answer until it returns.
    fn once<R>(&mut self, what: &str, call: impl FnOnce(&mut T) -> R) -> R {
        let _waiting = unanswered::asking(self.inner.place(), what);
        call(&mut self.inner)
    }
}

impl<T: ReplayTarget> ReplayTarget for Patient<T> {
    fn place(&self) -> &str {
        self.inner.place()
    }

    fn inspect(&mut self) -> Result<Inspection, StoreError> {
        self.patiently("inspect the target", |t| t.inspect())
    }

    fn prepare(&mut self, adoption: &Adoption) -> Result<(), StoreError> {
        self.patiently("prepare the target", |t| t.prepare(adoption))
    }

    fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError> {
        self.patiently("read the recorded plans", |t| t.plans())
    }

    fn record_plan(&mut self, plan: &RecordedPlan) -> Result<(), StoreError> {
        self.patiently("record the plan", |t| t.record_plan(plan))
    }

    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError> {
        self.patiently("claim the plan", |t| t.claim(plan_id, owner))
    }

    fn record_plan_once(&mut self, plan: &RecordedPlan) -> Result<Recording, StoreError> {
        self.patiently("record the plan", |t| t.record_plan_once(plan))
    }

    fn claim_partition(&mut self, claim: PartitionClaim<'_>) -> Result<Option<Claim>, StoreError> {
        self.patiently("claim a partition", |t| t.claim_partition(claim))
    }

    fn release_partition(&mut self, claim: PartitionClaim<'_>) -> Result<(), StoreError> {
        self.patiently("release a partition", |t| t.release_partition(claim))
    }

    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError> {
        self.patiently("finish the plan", |t| t.finish(plan_id, status))
    }

    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError> {
        self.patiently("count the conflicts", |t| t.conflicts_by_partition(plan_id))
    }

    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError> {
        if self.shared {
            return self.once("write a batch", |t| t.write_batch(scope, batch));
        }
        self.patiently("write a batch", |t| t.write_batch(scope, batch))
    }

    fn share_with(&mut self, writers: usize) -> Result<(), StoreError> {
        self.once("share its connection", |t| t.share_with(writers))
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.patiently("begin a transaction", |t| t.begin())?;
        self.shared = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.shared = false;
        self.once("commit", |t| t.commit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy() -> StoreError {
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            Some("database is locked".into()),
        ))
    }

    #[test]
    fn contention_is_tried_again_until_it_clears() {
        let mut calls = 0;
        let got = Patience::within(Duration::from_secs(5)).run("t", || {
            calls += 1;
            if calls < 4 {
                Err(busy())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(got.unwrap(), 4);
    }

    #[test]
    fn contention_past_the_deadline_is_the_error() {
        let started = Instant::now();
        let got: Result<(), _> =
            Patience::within(Duration::from_millis(100)).run("t", || Err(busy()));
        assert!(got.unwrap_err().is_transient());
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    /// The busy case a busy timeout cannot wait out: a transaction that read, then wants to
    /// write after another writer committed, is refused at once (waiting could deadlock);
    /// made again whole, it succeeds.
    #[test]
    fn a_transaction_that_met_another_writers_commit_succeeds_when_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let a = rusqlite::Connection::open(&path).unwrap();
        a.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (n INTEGER)")
            .unwrap();
        a.busy_timeout(Duration::from_secs(10)).unwrap();
        let b = rusqlite::Connection::open(&path).unwrap();
        let mut attempts = 0;
        let started = Instant::now();
        let got = Patience::within(Duration::from_secs(5)).run("t", || {
            attempts += 1;
            a.execute_batch("BEGIN")?;
            let n: i64 = a.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))?;
            if attempts == 1 {
                b.execute("INSERT INTO t VALUES (1)", []).unwrap();
            }
            match a.execute("INSERT INTO t VALUES (?1)", [n + 10]) {
                Ok(_) => {
                    a.execute_batch("COMMIT")?;
                    Ok(n)
                }
                Err(e) => {
                    let _ = a.execute_batch("ROLLBACK");
                    Err(StoreError::from(e))
                }
            }
        });
        assert_eq!(got.unwrap(), 1);
        assert_eq!(attempts, 2);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "refused at once, not waited for"
        );
    }

    #[test]
    fn other_errors_end_at_once() {
        let mut calls = 0;
        let got: Result<(), _> = Patience::within(Duration::from_secs(5)).run("t", || {
            calls += 1;
            Err(StoreError::Unavailable("gone".into()))
        });
        assert!(got.is_err());
        assert_eq!(calls, 1);
    }
}
