//! A SQLite file as a replay's target, adopted as found: what it holds, what is created in it,
//! and the replay's bookkeeping there (plans, claims, checkpoints, conflicts); each batch is
//! handed to the batch writer inside the transaction opened here.

use std::path::Path;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::audit_store::ensure_audit_table;
use super::batch::SqliteTx;
use super::connect::{tune, PAGE_CACHE_KIB};
use crate::store::backend::Backend;
use crate::store::batch::{self, PlanScope};
use crate::store::bookkeeping_sql::SQLITE as SQL;
use crate::store::error::StoreError;
use crate::store::inspect::{Adoption, AuditTable, Column, Inspection};
use crate::store::ledger::{
    now, Batch, Claim, Counters, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
use crate::store::patience::Patience;
use crate::store::replay_target::{PartitionClaim, ReplayTarget, Timeouts};
use crate::store::schema::{self, AUDIT_TABLE, BOOKKEEPING, LEGACY};

/// A SQLite file as a replay's target.
pub struct SqliteTarget {
    conn: Connection,
    place: String,
    adoption: Option<Adoption>,
    /// A transaction opened by `begin` is open.
    shared: bool,
    /// Connections the run's page cache is split among (`share_with`), and whether this one's
    /// was sized for its plan yet (on its first batch).
    writers: usize,
    sized: bool,
}

impl SqliteTarget {
    /// Opens `path` (created when missing unless `look_only`); waits for a locked file, and
    /// tries again a call that met another writer, for at most `timeouts.contention`.
    pub fn open(path: &Path, timeouts: Timeouts, look_only: bool) -> Result<Self, StoreError> {
        let place = format!("sqlite {}", path.display());
        let patience = Patience::within(timeouts.contention);
        let conn = patience.run(&place, || {
            let conn = if look_only {
                // No mutex: one thread at a time uses the connection, and a scan of a large
                // table otherwise locks and unlocks it for every column of every row.
                Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?
            } else {
                Connection::open(path)?
            };
            if look_only {
                conn.busy_timeout(timeouts.statement)?;
            } else {
                tune(&conn, timeouts.statement)?;
            }
            Ok::<_, StoreError>(conn)
        })?;
        Ok(SqliteTarget {
            conn,
            place,
            adoption: None,
            shared: false,
            writers: 1,
            sized: false,
        })
    }

    /// The connection, for read-only lookups of the same file.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// This connection's share of the page cache a replay of `records` records needs.
    fn size_cache(&self, records: i64) -> rusqlite::Result<()> {
        let kib = (page_cache_kib(records) / self.writers as i64).max(8_192);
        self.conn.pragma_update(None, "cache_size", -kib)
    }

    fn tables(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(names.collect::<Result<_, _>>()?)
    }

    fn audit_table(&self) -> Result<AuditTable, StoreError> {
        let mut columns = Vec::new();
        let mut integer_pk = None;
        {
            let mut stmt = self.conn.prepare("PRAGMA table_info(audit_events)")?;
            let mut rows = stmt.query([])?;
            let mut pk_columns = 0;
            while let Some(row) = rows.next()? {
                let name: String = row.get(1)?;
                let sql_type: String = row.get(2)?;
                let not_null: bool = row.get::<_, i64>(3)? != 0;
                let default: Option<String> = row.get(4)?;
                let pk: i64 = row.get(5)?;
                if pk > 0 {
                    pk_columns += 1;
                    if sql_type.eq_ignore_ascii_case("INTEGER") {
                        integer_pk = Some(name.clone());
                    }
                }
                columns.push(Column {
                    filled: default.is_some()
                        || (pk > 0 && sql_type.eq_ignore_ascii_case("INTEGER")),
                    name,
                    sql_type,
                    not_null,
                });
            }
            if pk_columns != 1 {
                integer_pk = None;
            }
        }
        let mut unique_keys = Vec::new();
        if let Some(name) = integer_pk {
            unique_keys.push(("PRIMARY KEY".to_owned(), vec![name]));
        }
        let indexes: Vec<(String, bool, bool)> = {
            let mut stmt = self.conn.prepare("PRAGMA index_list(audit_events)")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)? != 0,
                    r.get::<_, i64>(4)? != 0,
                ))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        for (name, unique, partial) in indexes {
            if !unique || partial {
                continue;
            }
            let mut stmt = self.conn.prepare(&format!(
                "PRAGMA index_info(\"{}\")",
                name.replace('"', "\"\"")
            ))?;
            let cols: Vec<Option<String>> = stmt
                .query_map([], |r| r.get::<_, Option<String>>(2))?
                .collect::<Result<_, _>>()?;
            // An expression in the key has no column name: not usable by ON CONFLICT (event_id).
            if let Some(cols) = cols.into_iter().collect::<Option<Vec<String>>>() {
                unique_keys.push((name, cols));
            }
        }
        Ok(AuditTable {
            columns,
            unique_keys,
        })
    }

    fn adoption(&self) -> Result<&Adoption, StoreError> {
        self.adoption.as_ref().ok_or_else(|| {
            StoreError::Unavailable(format!("{}: the target was not prepared", self.place))
        })
    }
}

/// Inserts `plan` and its partitions inside the caller's transaction.
/// Bytes of the event_id index per record, about (an id of some 30 bytes, its rowid and the
/// b-tree's slack: 40 measured on the sample day's ids).
const INDEX_BYTES_PER_RECORD: i64 = 48;

/// The largest page cache a replay sizes for itself, in KiB.
const PAGE_CACHE_MAX_KIB: i64 = 1 << 20;

/// The page cache, in KiB, a replay of `records` records needs: the run's 64 MiB, or enough
/// to keep the event_id index and one transaction's new rows in memory. Rows land all over the
/// index, so every transaction dirties nearly all of its pages; once the index outgrew the
/// cache, SQLite wrote dirty pages to the WAL mid-transaction, read them back, changed and
/// wrote them again (3M events: 0.48 reads a record instead of 0.06 at 1M, and 1.7 times the
/// CPU per record).
fn page_cache_kib(records: i64) -> i64 {
    let index_kib = records.max(0).saturating_mul(INDEX_BYTES_PER_RECORD) / 1024;
    // The new rows of a transaction of 100,000 records, about 300 bytes each. A larger one
    // (the default grows with the plan) spills its oldest rows to the WAL, where they go at
    // its commit anyway, so memory does not grow with the transaction: a replay of 3M records
    // in transactions of 625,000 peaked at 342 MiB against 341 in ones of 100,000.
    let rows_kib = 32_768;
    PAGE_CACHE_KIB
        .max(index_kib + rows_kib)
        .min(PAGE_CACHE_MAX_KIB)
}

fn insert_plan(tx: &Connection, plan: &RecordedPlan) -> Result<(), StoreError> {
    let (kind, w) = plan.window.columns();
    tx.execute(
        &SQL.insert_plan,
        params![
            plan.plan_id,
            plan.topic,
            plan.replay_group,
            plan.live_group,
            kind,
            w[0],
            w[1],
            w[2],
            w[3],
            plan.partition_list(),
            plan.created_at,
            plan.created_by,
            plan.status.as_str()
        ],
    )?;
    for p in &plan.partitions {
        tx.execute(
            &SQL.insert_partition,
            params![
                plan.plan_id,
                p.partition,
                p.start,
                p.stop,
                p.captured_end,
                p.next_offset,
                p.owner,
                p.updated_at
            ],
        )?;
    }
    Ok(())
}

/// A batch in the open transaction under a savepoint of its own, so that a batch that fails
/// leaves nothing while the batches before it stay to be committed: a replay that stops at a
/// refused row (`--on-bad-record fail`) stops with every batch before that row's committed.
fn write_guarded(
    tx: &mut SqliteTx<'_>,
    scope: &PlanScope<'_>,
    batch: &Batch<'_>,
) -> Result<Counters, WriteError> {
    tx.conn
        .execute_batch("SAVEPOINT lp_batch")
        .map_err(StoreError::from)?;
    let written = batch::write(tx, scope, batch);
    let end = match written {
        Ok(_) => "RELEASE lp_batch",
        Err(_) => "ROLLBACK TO lp_batch; RELEASE lp_batch",
    };
    let ended = tx.conn.execute_batch(end);
    let counters = written?;
    ended.map_err(StoreError::from)?;
    Ok(counters)
}

/// A batch in the open transaction with no savepoint. A savepoint makes SQLite keep the first
/// version of every page it changes (in memory: 4 KiB copied into 1 KiB chunks of the C
/// allocator, freed at its release), and a batch's rows land all over the event_id index, so
/// one batch changed nearly an index page a row, more as the index grew (0.37 page copies a
/// record for a day of 1M records, 0.59 for 3M: the CPU a record grew with the day). Without
/// one, a batch that fails once it changed anything ends the whole transaction (ROLLBACK):
/// the batches before it go with their checkpoints, none of them told to Kafka, each
/// partition reported at its last committed checkpoint, and a resume writes them again. So
/// what can be known before writing is looked at first: a checkpoint not where the batch
/// begins (this transaction holds the file's write lock, so it cannot move afterwards); a row
/// refused for its data undoes only its own statement and is quarantined. What is left ends
/// the transaction: the file's own errors (a full disk, I/O, on which SQLite may roll it
/// back by itself anyway) and a conflicting version the table refuses to take.
fn write_unguarded(
    tx: &mut SqliteTx<'_>,
    scope: &PlanScope<'_>,
    batch: &Batch<'_>,
) -> Result<Counters, WriteError> {
    // The rule ADVANCE moves the checkpoint by, asked before the rows go in.
    let none = Counters::default();
    let written = batch::Written {
        scope,
        batch,
        counters: &none,
    };
    let found: Option<(i64, Option<bool>)> = tx
        .conn
        .prepare_cached(&SQL.in_place)
        .and_then(|mut stmt| {
            stmt.query_row(written.advance_params(""), |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(StoreError::from)?;
    let in_place = found.is_some_and(|(_, here)| here == Some(true));
    if !in_place {
        return Err(WriteError::CheckpointMoved {
            partition: batch.partition,
            expected: batch.first,
            found: found.map(|(next, _)| next),
        });
    }
    let written = batch::write(tx, scope, batch);
    if written.is_err() {
        // What the batch changed cannot be undone alone; the transaction ends, and the next
        // batch and the commit find it gone.
        let _ = tx.conn.execute_batch("ROLLBACK");
    }
    written
}

impl ReplayTarget for SqliteTarget {
    fn place(&self) -> &str {
        &self.place
    }

    fn inspect(&mut self) -> Result<Inspection, StoreError> {
        let tables = self.tables()?;
        let has = |t: &str| tables.iter().any(|have| have == t);
        Ok(Inspection {
            backend: Backend::Sqlite,
            place: self.place.clone(),
            schema: None,
            exists: true,
            audit_events: if has(AUDIT_TABLE) {
                Some(self.audit_table()?)
            } else {
                None
            },
            bookkeeping: BOOKKEEPING
                .iter()
                .filter(|t| has(t))
                .map(|t| t.to_string())
                .collect(),
            legacy: LEGACY
                .iter()
                .filter(|t| has(t))
                .map(|t| t.to_string())
                .collect(),
        })
    }

    fn prepare(&mut self, adoption: &Adoption) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if adoption.create_audit_events {
            ensure_audit_table(&tx)?;
        }
        for table in &adoption.create_bookkeeping {
            tx.execute_batch(&schema::bookkeeping(table, Backend::Sqlite).replacen(
                "CREATE TABLE",
                "CREATE TABLE IF NOT EXISTS",
                1,
            ))?;
        }
        tx.commit()?;
        self.adoption = Some(adoption.clone());
        Ok(())
    }

    fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError> {
        let tables = self.tables()?;
        if !BOOKKEEPING[..2]
            .iter()
            .all(|t| tables.iter().any(|h| h == t))
        {
            return Ok(Vec::new());
        }
        let mut plans = Vec::new();
        {
            let mut stmt = self.conn.prepare(&SQL.plans)?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let kind: String = r.get(4)?;
                plans.push(RecordedPlan {
                    plan_id: r.get(0)?,
                    topic: r.get(1)?,
                    replay_group: r.get(2)?,
                    live_group: r.get(3)?,
                    window: PlanWindow::from_columns(
                        &kind,
                        [r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?],
                    ),
                    created_at: r.get(9)?,
                    created_by: r.get(10)?,
                    status: PlanStatus::parse(&r.get::<_, String>(11)?),
                    finished_at: r.get(12)?,
                    partitions: Vec::new(),
                });
            }
        }
        let mut stmt = self.conn.prepare(&SQL.partitions)?;
        for plan in &mut plans {
            let rows = stmt.query_map([&plan.plan_id], |r| {
                let n = |i: usize| r.get::<_, i64>(i).map(|v| v as u64);
                Ok(PartitionProgress {
                    partition: r.get(0)?,
                    start: r.get(1)?,
                    stop: r.get(2)?,
                    captured_end: r.get(3)?,
                    next_offset: r.get(4)?,
                    owner: r.get(5)?,
                    counters: Counters {
                        records: n(6)?,
                        inserted: n(7)?,
                        duplicates: n(8)?,
                        conflicts: n(9)?,
                        quarantined: n(10)?,
                        markers: n(11)?,
                        aborted: n(12)?,
                    },
                    updated_at: r.get(13)?,
                })
            })?;
            plan.partitions = rows.collect::<Result<_, _>>()?;
        }
        Ok(plans)
    }

    fn record_plan(&mut self, plan: &RecordedPlan) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        insert_plan(&tx, plan)?;
        tx.commit()?;
        Ok(())
    }

    fn record_plan_once(&mut self, plan: &RecordedPlan) -> Result<Recording, StoreError> {
        // IMMEDIATE takes the write lock first: one writer at a time looks and inserts.
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let found: Option<String> = tx
            .query_row(
                &SQL.plan_or_group,
                params![plan.plan_id, plan.replay_group],
                |r| r.get(0),
            )
            .optional()?;
        let recording = match found {
            Some(id) if id == plan.plan_id => Recording::Present,
            Some(plan_id) => Recording::OtherPlan { plan_id },
            None => {
                insert_plan(&tx, plan)?;
                Recording::Recorded
            }
        };
        tx.commit()?;
        Ok(recording)
    }

    fn claim_partition(&mut self, claim: PartitionClaim<'_>) -> Result<Option<Claim>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &SQL.claim_partition,
                params![claim.plan_id, claim.partition, claim.owner, now()],
                |r| {
                    Ok(Claim {
                        next_offset: r.get(0)?,
                        stop: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    fn release_partition(&mut self, claim: PartitionClaim<'_>) -> Result<(), StoreError> {
        self.conn.execute(
            &SQL.release_partition,
            params![claim.plan_id, claim.partition, claim.owner, now()],
        )?;
        Ok(())
    }

    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(&SQL.claim_all, params![plan_id, owner, now()])?;
        tx.execute(&SQL.running, [plan_id])?;
        tx.commit()?;
        Ok(())
    }

    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError> {
        self.conn
            .execute(&SQL.finish, params![plan_id, status.as_str(), now()])?;
        Ok(())
    }

    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError> {
        let mut stmt = self.conn.prepare(&SQL.conflicts_by_partition)?;
        let rows = stmt.query_map([plan_id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError> {
        let adoption = self.adoption()?.clone();
        if !self.sized {
            self.sized = true;
            let records = scope
                .ranges
                .iter()
                .map(|(_, start, stop)| stop - start)
                .sum();
            self.size_cache(records).map_err(StoreError::from)?;
        }
        if !self.shared {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(StoreError::from)?;
            let counters = batch::write(
                &mut SqliteTx {
                    conn: &tx,
                    adoption: &adoption,
                },
                scope,
                batch,
            )?;
            tx.commit().map_err(StoreError::from)?;
            return Ok(counters);
        }
        // SQLite rolls a whole transaction back on some failures (a full disk, an I/O error):
        // then the batches before this one are gone, and so must this one be.
        if self.conn.is_autocommit() {
            self.shared = false;
            return Err(StoreError::Unavailable(format!(
                "{}: the transaction holding the batches before this one was rolled back",
                self.place
            ))
            .into());
        }
        let mut tx = SqliteTx {
            conn: &self.conn,
            adoption: &adoption,
        };
        if scope.fail_on_refused {
            write_guarded(&mut tx, scope, batch)
        } else {
            write_unguarded(&mut tx, scope, batch)
        }
    }

    fn share_with(&mut self, writers: usize) -> Result<(), StoreError> {
        // One writer at a time holds the file anyway: the run's page cache (see `tune` and
        // `size_cache`) is split among its connections, so memory does not grow with --jobs.
        self.writers = writers.max(1);
        self.size_cache(0)?;
        Ok(())
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        // IMMEDIATE: the write lock now, so no batch finds the file locked halfway through.
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        self.shared = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.shared = false;
        if self.conn.is_autocommit() {
            return Err(StoreError::Unavailable(format!(
                "{}: the transaction holding the batches was rolled back",
                self.place
            )));
        }
        self.conn.execute_batch("COMMIT").map_err(|e| {
            let _ = self.conn.execute_batch("ROLLBACK");
            StoreError::from(e)
        })
    }
}

/// A fresh SQLite target at `path` with plan `p` of topic `t` over `[0, stop)` of each
/// partition, for tests.
#[cfg(test)]
pub(crate) fn target_with_plan(
    path: &Path,
    partitions: &[i32],
    stop: i64,
) -> Box<dyn ReplayTarget> {
    use crate::store::{AuditDb, PartitionProgress};
    let mut target = AuditDb::Sqlite(path.to_owned())
        .open_target(Timeouts::all(std::time::Duration::from_secs(5)))
        .unwrap();
    let adoption = target.inspect().unwrap().adopt().unwrap();
    target.prepare(&adoption).unwrap();
    target
        .record_plan(&RecordedPlan {
            plan_id: "p".into(),
            topic: "t".into(),
            replay_group: "replay".into(),
            live_group: "live".into(),
            window: PlanWindow::Offsets { start: 0, stop },
            created_at: "now".into(),
            created_by: "me@here".into(),
            status: PlanStatus::Running,
            finished_at: None,
            partitions: partitions
                .iter()
                .map(|&partition| PartitionProgress {
                    partition,
                    start: 0,
                    stop,
                    captured_end: stop,
                    next_offset: 0,
                    owner: None,
                    counters: Counters::default(),
                    updated_at: "now".into(),
                })
                .collect(),
        })
        .unwrap();
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventRecord;
    use crate::store::Entry;

    /// A fresh target at `path` with plan `p` over `[0, 20)` of partitions 0 and 1, and two
    /// triggers: ticket "poison" refused for its data (as a CHECK would refuse it, but one that
    /// can be dropped, the table fixed), ticket "boom" failing for a reason not about the data
    /// (an integer overflow).
    fn target(path: &Path) -> Box<dyn ReplayTarget> {
        let target = target_with_plan(path, &[0, 1], 20);
        Connection::open(path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER no_poison BEFORE INSERT ON audit_events
                   WHEN NEW.ticket_id = 'poison' BEGIN SELECT RAISE(ABORT, 'poison refused'); END;
                 CREATE TRIGGER boom BEFORE INSERT ON audit_events
                   WHEN NEW.ticket_id = 'boom' BEGIN SELECT abs(-9223372036854775808); END;",
            )
            .unwrap();
        target
    }

    /// The records of `partition` at offsets `[first, next)`, each with its ticket from
    /// `ticket`. Their ids fall as the offsets rise, so key order is not offset order.
    fn records(
        partition: i32,
        (first, next): (i64, i64),
        ticket: impl Fn(i64) -> &'static str,
    ) -> Vec<(i64, EventRecord)> {
        (first..next)
            .map(|offset| {
                let event = EventRecord {
                    event_id: format!("e{partition}-{:03}", 999 - offset),
                    tenant_id: "tenant".into(),
                    ticket_id: ticket(offset).into(),
                    action: "ticket.updated".into(),
                    occurred_at: "2026-09-21T10:00:00Z".into(),
                    payload: "{}".into(),
                };
                (offset, event)
            })
            .collect()
    }

    fn batch(partition: i32, records: &[(i64, EventRecord)]) -> Batch<'_> {
        Batch {
            partition,
            first: records[0].0,
            next: records[records.len() - 1].0 + 1,
            entries: records
                .iter()
                .map(|(offset, event)| Entry {
                    topic: "t",
                    partition,
                    offset: *offset,
                    timestamp: None,
                    raw: b"{}",
                    decoded: Ok(event.clone()),
                })
                .collect(),
            markers: 0,
            aborted: 0,
        }
    }

    fn scope(fail_on_refused: bool) -> PlanScope<'static> {
        PlanScope {
            plan_id: "p",
            topic: "t",
            ranges: &[(0, 0, 20), (1, 0, 20)],
            owner: None,
            fail_on_refused,
        }
    }

    fn strings(path: &Path, sql: &str) -> Vec<String> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| r.get(0)).unwrap();
        rows.collect::<Result<_, _>>().unwrap()
    }

    /// Each partition's checkpoint, and how many rows `audit_events` holds of each.
    fn landed(path: &Path) -> Vec<String> {
        strings(
            path,
            "SELECT p.partition || ': ' || p.next_offset || ', ' ||
                    (SELECT COUNT(*) FROM audit_events WHERE event_id LIKE 'e' || p.partition || '-%')
             FROM lessonprobe_replay_partitions p ORDER BY p.partition",
        )
    }

    /// Partition 1's records `[0, 10)` with "poison" at offsets 4 and 7: offset 7 has the
    /// smaller id, so it is inserted, and refused, before offset 4.
    fn poisoned() -> Vec<(i64, EventRecord)> {
        records(
            1,
            (0, 10),
            |o| if o == 4 || o == 7 { "poison" } else { "t" },
        )
    }

    /// A fresh target at `path` with a transaction begun: partition 0's first batch written,
    /// then partition 1's [`poisoned`] one; what the latter did.
    fn write_poisoned(
        path: &Path,
        fail_on_refused: bool,
    ) -> (Box<dyn ReplayTarget>, Result<Counters, WriteError>) {
        let mut target = target(path);
        let ok = records(0, (0, 10), |_| "t");
        target.begin().unwrap();
        let scope = scope(fail_on_refused);
        target.write_batch(&scope, &batch(0, &ok)).unwrap();
        let written = target.write_batch(&scope, &batch(1, &poisoned()));
        (target, written)
    }

    #[test]
    fn a_batch_not_starting_at_its_checkpoint_or_of_another_owner_is_refused_before_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut target = target(&path);
        Connection::open(&path)
            .unwrap()
            .execute(
                "UPDATE lessonprobe_replay_partitions SET owner = 'other' WHERE partition = 0",
                [],
            )
            .unwrap();
        let moved = |err: WriteError| match err {
            WriteError::CheckpointMoved {
                partition,
                expected,
                found,
            } => (partition, expected, found),
            other => panic!("{other:?}"),
        };
        target.begin().unwrap();
        let mine = PlanScope {
            owner: Some("me"),
            ..scope(false)
        };
        let from_zero = records(0, (0, 10), |_| "t");
        let err = target
            .write_batch(&mine, &batch(0, &from_zero))
            .unwrap_err();
        assert_eq!(moved(err), (0, 0, Some(0)));
        let from_five = records(1, (5, 10), |_| "t");
        let err = target
            .write_batch(&scope(false), &batch(1, &from_five))
            .unwrap_err();
        assert_eq!(moved(err), (1, 5, Some(0)));
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 0, 0", "1: 0, 0"]);
        // Without an owner of its own, a batch at the checkpoint goes in whoever holds it.
        target.begin().unwrap();
        target
            .write_batch(&scope(false), &batch(0, &from_zero))
            .unwrap();
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 10, 10", "1: 0, 0"]);
    }

    #[test]
    fn a_refused_row_inside_a_shared_transaction_is_quarantined_and_the_rest_lands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (mut target, written) = write_poisoned(&path, false);
        let counters = written.unwrap();
        assert_eq!((counters.inserted, counters.quarantined), (8, 2));
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 10, 10", "1: 10, 8"]);
        assert_eq!(
            strings(
                &path,
                "SELECT record_offset || ' ' || reason FROM lessonprobe_replay_quarantine ORDER BY 1"
            ),
            ["4 poison refused", "7 poison refused"]
        );
    }

    #[test]
    fn a_replay_that_stops_at_a_refused_row_names_the_first_by_offset_and_resumes_once_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (mut target, written) = write_poisoned(&path, true);
        let err = written.unwrap_err();
        assert!(
            matches!(&err, WriteError::Refused { offset: 4, reason } if reason.contains("poison")),
            "{err:?}"
        );
        // The batch before it commits; of the refused one nothing lands, its checkpoint stays.
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 10, 10", "1: 0, 0"]);
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TRIGGER no_poison")
            .unwrap();
        target.begin().unwrap();
        target
            .write_batch(&scope(true), &batch(1, &poisoned()))
            .unwrap();
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 10, 10", "1: 10, 10"]);
    }

    #[test]
    fn a_batch_failing_on_anything_but_its_data_ends_the_transaction_and_a_rerun_lands_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut target = target(&path);
        let ok = records(0, (0, 10), |_| "t");
        let more = records(0, (10, 20), |_| "t");
        let boom = records(1, (0, 10), |o| if o == 5 { "boom" } else { "t" });
        // A checkpoint not where the batch begins is found before anything is written: the
        // transaction goes on.
        let ahead = records(1, (10, 20), |_| "t");
        target.begin().unwrap();
        target.write_batch(&scope(false), &batch(0, &ok)).unwrap();
        let err = target
            .write_batch(&scope(false), &batch(1, &ahead))
            .unwrap_err();
        assert!(
            matches!(
                err,
                WriteError::CheckpointMoved {
                    partition: 1,
                    expected: 10,
                    found: Some(0)
                }
            ),
            "{err:?}"
        );
        // Past its first row, a failure takes the batches before it along.
        let err = target
            .write_batch(&scope(false), &batch(1, &boom))
            .unwrap_err();
        assert!(matches!(err, WriteError::Store(_)), "{err:?}");
        assert!(target.write_batch(&scope(false), &batch(0, &more)).is_err());
        assert!(target.commit().is_err());
        assert_eq!(landed(&path), ["0: 0, 0", "1: 0, 0"]);
        // Written again from the checkpoints: every row once.
        let fixed = records(1, (0, 10), |_| "t");
        target.begin().unwrap();
        for (partition, records) in [(0, &ok), (1, &fixed), (0, &more)] {
            target
                .write_batch(&scope(false), &batch(partition, records))
                .unwrap();
        }
        target.commit().unwrap();
        assert_eq!(landed(&path), ["0: 20, 20", "1: 10, 10"]);
    }

    #[test]
    fn the_page_cache_holds_the_index_of_a_large_plan_and_no_less_than_the_runs_share() {
        assert_eq!(page_cache_kib(0), PAGE_CACHE_KIB);
        assert_eq!(page_cache_kib(-5), PAGE_CACHE_KIB);
        // 3M records: an index of about 140 MiB and one transaction's rows.
        assert_eq!(page_cache_kib(3_000_000), 3_000_000 * 48 / 1024 + 32_768);
        assert_eq!(page_cache_kib(i64::MAX), PAGE_CACHE_MAX_KIB);
    }
}
