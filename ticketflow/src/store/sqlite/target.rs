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
        if self.shared {
            // SQLite rolls a whole transaction back on some failures (a full disk, an I/O
            // error): then the batches before this one are gone, and so must this one be.
            if self.conn.is_autocommit() {
                self.shared = false;
                return Err(StoreError::Unavailable(format!(
                    "{}: the transaction holding the batches before this one was rolled back",
                    self.place
                ))
                .into());
            }
            self.conn
                .execute_batch("SAVEPOINT lp_batch")
                .map_err(StoreError::from)?;
            let written = batch::write(
                &mut SqliteTx {
                    conn: &self.conn,
                    adoption: &adoption,
                },
                scope,
                batch,
            );
            let end = match written {
                Ok(_) => "RELEASE lp_batch",
                Err(_) => "ROLLBACK TO lp_batch; RELEASE lp_batch",
            };
            let ended = self.conn.execute_batch(end);
            let counters = written?;
            ended.map_err(StoreError::from)?;
            return Ok(counters);
        }
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(StoreError::from)?;
        let counters = {
            let mut btx = SqliteTx {
                conn: &tx,
                adoption: &adoption,
            };
            batch::write(&mut btx, scope, batch)?
        };
        tx.commit().map_err(StoreError::from)?;
        Ok(counters)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_cache_holds_the_index_of_a_large_plan_and_no_less_than_the_runs_share() {
        assert_eq!(page_cache_kib(0), PAGE_CACHE_KIB);
        assert_eq!(page_cache_kib(-5), PAGE_CACHE_KIB);
        // 3M records: an index of about 140 MiB and one transaction's rows.
        assert_eq!(page_cache_kib(3_000_000), 3_000_000 * 48 / 1024 + 32_768);
        assert_eq!(page_cache_kib(i64::MAX), PAGE_CACHE_MAX_KIB);
    }
}
