//! The audit store on SQLite (bundled), in memory or in a file; and a SQLite file as a replay
//! target, adopted as found.

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OpenFlags, OptionalExtension};

use super::audit_db::{ReplayTarget, Timeouts};
use super::batch::{
    self, BatchTx, Conflict, Fault, Location, PlanScope, Quarantine, StoredVersion,
};
use super::inspect::{Adoption, AuditTable, Column, Inspection};
use super::ledger::{
    now, Batch, Claim, Counters, Entry, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
use super::schema::{self, payload_column, AUDIT_TABLE, BOOKKEEPING, LEGACY};
use super::{AuditStore, Backend, StoreError};
use crate::event::{AuditEvent, EventRecord};

pub struct SqliteAuditStore {
    conn: Connection,
}

/// Creates `audit_events` unless a table of that name is there.
fn ensure_audit_table(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(&schema::audit_events(Backend::Sqlite).replacen(
        "CREATE TABLE",
        "CREATE TABLE IF NOT EXISTS",
        1,
    ))?;
    Ok(())
}

/// The page cache of a replay's connections together, in KiB.
const PAGE_CACHE_KIB: i64 = 65_536;

/// WAL, durable commits, a bounded wait for the file.
fn tune(conn: &Connection, busy: Duration) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // synchronous stays FULL: an offset is committed to Kafka right after the SQL commit,
    // so that commit must survive power loss too. A 64 MiB page cache keeps the event_id
    // index of a large replay in memory, where inserts in partition order land at random.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
    // A batch dirties thousands of index pages, so with the default (1,000 pages) nearly
    // every commit also copied the WAL back into the file; a larger WAL is copied back less
    // often and each page once for many commits. Durability is the WAL's, unchanged.
    conn.pragma_update(None, "wal_autocheckpoint", 16_384)?;
    conn.busy_timeout(busy)?;
    Ok(())
}

impl SqliteAuditStore {
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory()?;
        ensure_audit_table(&conn)?;
        Ok(SqliteAuditStore { conn })
    }

    /// Opens (or creates) a database file in WAL mode.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)?;
        tune(&conn, Duration::from_secs(5))?;
        ensure_audit_table(&conn)?;
        Ok(SqliteAuditStore { conn })
    }

    /// The connection, for checks that read the database back.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }
}

impl AuditStore for SqliteAuditStore {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let tx = self.conn.transaction()?;
        let inserted = insert_audit(&tx, event)?;
        tx.commit()?;
        Ok(inserted)
    }

    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM audit_events", [], |r| r.get(0))?;
        Ok(n as u64)
    }
}

/// Inserts the audit row unless its `event_id` exists; `true` when inserted. ON CONFLICT
/// (event_id), not INSERT OR IGNORE: the latter also swallows NOT NULL and CHECK failures,
/// which must surface. Public so a caller may add effects of its own in the same transaction.
pub fn insert_audit(conn: &Connection, event: &AuditEvent) -> Result<bool, StoreError> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (event_id) DO NOTHING",
    )?;
    let n = insert.execute(params![
        event.event_id,
        event.tenant_id,
        event.ticket_id,
        event.action,
        event.occurred_at,
        payload_column(event),
    ])?;
    Ok(n == 1)
}

/// A SQLite file as a replay's target.
pub struct SqliteTarget {
    conn: Connection,
    place: String,
    adoption: Option<Adoption>,
    /// A transaction opened by `begin` is open.
    shared: bool,
}

impl SqliteTarget {
    /// Opens `path` (created when missing unless `look_only`); waits for a locked file at
    /// most `timeouts.statement`.
    pub fn open(path: &Path, timeouts: Timeouts, look_only: bool) -> Result<Self, StoreError> {
        let place = format!("sqlite {}", path.display());
        let conn = if look_only {
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?
        } else {
            Connection::open(path)?
        };
        if look_only {
            conn.busy_timeout(timeouts.statement)?;
        } else {
            tune(&conn, timeouts.statement)?;
        }
        Ok(SqliteTarget {
            conn,
            place,
            adoption: None,
            shared: false,
        })
    }

    /// The connection, for read-only lookups of the same file.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
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
fn insert_plan(tx: &Connection, plan: &RecordedPlan) -> Result<(), StoreError> {
    let (kind, w) = plan.window.columns();
    tx.execute(
        "INSERT INTO lessonprobe_replay_plans (plan_id, topic, replay_group, live_group,
                window_kind, since_ms, until_ms, start_offset, stop_offset, partitions, created_at,
                created_by, status, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, NULL)",
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
            "INSERT INTO lessonprobe_replay_partitions (plan_id, partition, start_offset,
                    stop_offset, captured_end, next_offset, owner, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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

/// A finished partition keeps the owner that finished it; an unfinished one gets the claimer.
const CLAIM_PARTITION: &str = "UPDATE lessonprobe_replay_partitions
     SET owner = CASE WHEN next_offset < stop_offset THEN ?3 ELSE owner END,
         updated_at = CASE WHEN next_offset < stop_offset THEN ?4 ELSE updated_at END
     WHERE plan_id = ?1 AND partition = ?2
     RETURNING next_offset, stop_offset";

const RELEASE_PARTITION: &str =
    "UPDATE lessonprobe_replay_partitions SET owner = NULL, updated_at = ?4
     WHERE plan_id = ?1 AND partition = ?2 AND owner = ?3 AND next_offset < stop_offset";

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
            let mut stmt = self.conn.prepare(
                "SELECT plan_id, topic, replay_group, live_group, window_kind, since_ms, until_ms,
                        start_offset, stop_offset, created_at, created_by, status, finished_at
                 FROM lessonprobe_replay_plans ORDER BY created_at, plan_id",
            )?;
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
        let mut stmt = self.conn.prepare(
            "SELECT partition, start_offset, stop_offset, captured_end, next_offset, owner,
                    records, inserted, duplicates, conflicts, quarantined, markers, aborted, updated_at
             FROM lessonprobe_replay_partitions WHERE plan_id = ?1 ORDER BY partition",
        )?;
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
                "SELECT plan_id FROM lessonprobe_replay_plans WHERE plan_id = ?1 OR replay_group = ?2
                 ORDER BY plan_id = ?1 DESC LIMIT 1",
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

    fn claim_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<Option<Claim>, StoreError> {
        Ok(self
            .conn
            .query_row(
                CLAIM_PARTITION,
                params![plan_id, partition, owner, now()],
                |r| {
                    Ok(Claim {
                        next_offset: r.get(0)?,
                        stop: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    fn release_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(RELEASE_PARTITION, params![plan_id, partition, owner, now()])?;
        Ok(())
    }

    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE lessonprobe_replay_partitions SET owner = ?2, updated_at = ?3 WHERE plan_id = ?1",
            params![plan_id, owner, now()],
        )?;
        tx.execute(
            "UPDATE lessonprobe_replay_plans SET status = 'running', finished_at = NULL WHERE plan_id = ?1",
            [plan_id],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE lessonprobe_replay_plans SET status = ?2, finished_at = ?3 WHERE plan_id = ?1",
            params![plan_id, status.as_str(), now()],
        )?;
        Ok(())
    }

    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT incoming_partition, COUNT(*) FROM lessonprobe_replay_conflicts
             WHERE plan_id = ?1 GROUP BY incoming_partition ORDER BY 1",
        )?;
        let rows = stmt.query_map([plan_id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError> {
        let adoption = self.adoption()?.clone();
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
        // One writer at a time holds the file anyway: the run's 64 MiB of page cache (see
        // `tune`) is split among its connections, so memory does not grow with --jobs.
        let kib = (PAGE_CACHE_KIB / writers.max(1) as i64).max(8_192);
        self.conn.pragma_update(None, "cache_size", -kib)?;
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

/// The event a row stores in six text columns from `first` on, in the order of
/// `schema::REQUIRED_COLUMNS` (NULL read as empty).
pub(super) fn stored_event(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<EventRecord> {
    let text = |i: usize| {
        r.get::<_, Option<String>>(first + i)
            .map(Option::unwrap_or_default)
    };
    Ok(EventRecord {
        event_id: text(0)?,
        tenant_id: text(1)?,
        ticket_id: text(2)?,
        action: text(3)?,
        occurred_at: text(4)?,
        payload: text(5)?,
    })
}

/// The event id an entry carries, when it decoded.
fn event_id<'e>(entry: &'e Entry<'_>) -> Option<&'e str> {
    entry.decoded.as_ref().ok().map(|e| e.event_id.as_str())
}

/// The batch operations on one open SQLite transaction.
struct SqliteTx<'c> {
    conn: &'c Connection,
    adoption: &'c Adoption,
}

/// Whether SQLite refused a row for its data (a constraint, a STRICT type, a value too big)
/// rather than for the file, the disk or a lock.
fn data_fault(e: rusqlite::Error) -> Fault {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::ConstraintViolation
                    | rusqlite::ErrorCode::TypeMismatch
                    | rusqlite::ErrorCode::TooBig
            ) =>
        {
            Fault::Data(e.to_string())
        }
        _ => Fault::Infra(e.into()),
    }
}

impl SqliteTx<'_> {
    /// The audit columns written, and each row's values for them.
    fn columns(&self) -> Vec<&'static str> {
        let mut columns = schema::REQUIRED_COLUMNS.to_vec();
        columns.extend(self.adoption.record_columns.iter().copied());
        columns
    }

    fn values(&self, entry: &Entry<'_>, event: &EventRecord) -> Vec<Value> {
        let mut values: Vec<Value> = event
            .columns()
            .iter()
            .map(|v| Value::Text((*v).to_owned()))
            .collect();
        for column in &self.adoption.record_columns {
            values.push(match *column {
                "record" => Value::Blob(entry.raw.to_vec()),
                "topic" => entry.topic.to_owned().into(),
                "partition" => Value::Integer(entry.partition.into()),
                "record_offset" => Value::Integer(entry.offset),
                _ => entry.timestamp.map_or(Value::Null, Value::Integer),
            });
        }
        values
    }
}

impl BatchTx for SqliteTx<'_> {
    fn savepoint(&mut self) -> Result<(), StoreError> {
        Ok(self.conn.execute_batch("SAVEPOINT lp_rows")?)
    }
    fn release(&mut self) -> Result<(), StoreError> {
        Ok(self.conn.execute_batch("RELEASE lp_rows")?)
    }
    fn rollback_to(&mut self) -> Result<(), StoreError> {
        Ok(self.conn.execute_batch("ROLLBACK TO lp_rows")?)
    }

    fn insert(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<bool>, Fault> {
        let columns = self.columns();
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "INSERT INTO audit_events ({}) VALUES ({}) ON CONFLICT (event_id) DO NOTHING",
                columns.join(", "),
                marks.join(", ")
            ))
            .map_err(|e| Fault::Infra(e.into()))?;
        // In key order: consecutive inserts land on neighbouring pages of the event_id index
        // instead of anywhere in it. The ids of one call are distinct (see batch::write), so
        // the order decides nothing about which version is stored.
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|&a, &b| event_id(rows[a]).cmp(&event_id(rows[b])));
        let mut out = vec![false; rows.len()];
        for i in order {
            let entry = rows[i];
            let Ok(event) = &entry.decoded else { continue };
            // Bound by reference: no copy of a row's text or bytes.
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![
                &event.event_id,
                &event.tenant_id,
                &event.ticket_id,
                &event.action,
                &event.occurred_at,
                &event.payload,
            ];
            for column in &self.adoption.record_columns {
                values.push(match *column {
                    "record" => &entry.raw,
                    "topic" => &entry.topic,
                    "partition" => &entry.partition,
                    "record_offset" => &entry.offset,
                    _ => &entry.timestamp,
                });
            }
            let n = stmt.execute(values.as_slice()).map_err(data_fault)?;
            out[i] = n == 1;
        }
        Ok(out)
    }

    fn stored(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<Option<StoredVersion>>, StoreError> {
        let located = ["topic", "partition", "record_offset"]
            .iter()
            .all(|c| self.adoption.record_columns.contains(c));
        let sql = format!(
            "SELECT CAST(event_id AS TEXT), CAST(tenant_id AS TEXT), CAST(ticket_id AS TEXT),
                    CAST(action AS TEXT), CAST(occurred_at AS TEXT), CAST(payload AS TEXT){}
             FROM audit_events WHERE event_id = ?1",
            if located {
                ", topic, partition, record_offset"
            } else {
                ", NULL, NULL, NULL"
            }
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let mut out = Vec::with_capacity(rows.len());
        for entry in rows {
            let Ok(event) = &entry.decoded else {
                out.push(None);
                continue;
            };
            let version = stmt
                .query_row([&event.event_id], |r| {
                    let location = match (r.get::<_, Option<String>>(6)?, r.get(7)?, r.get(8)?) {
                        (Some(topic), Some(partition), Some(offset)) => Some(Location {
                            topic,
                            partition,
                            offset,
                        }),
                        _ => None,
                    };
                    Ok(StoredVersion {
                        stored: stored_event(r, 0)?,
                        incoming: None,
                        location,
                    })
                })
                .optional()?;
            out.push(version);
        }
        Ok(out)
    }

    fn replace(&mut self, row: &Entry<'_>) -> Result<(), Fault> {
        let Ok(event) = &row.decoded else {
            return Ok(());
        };
        let columns = self.columns();
        let sets: Vec<String> = columns[1..]
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = ?{}", i + 2))
            .collect();
        self.conn
            .execute(
                &format!(
                    "UPDATE audit_events SET {} WHERE event_id = ?1",
                    sets.join(", ")
                ),
                params_from_iter(self.values(row, event)),
            )
            .map_err(data_fault)?;
        Ok(())
    }

    fn quarantine(&mut self, plan_id: &str, rows: &[Quarantine<'_, '_>]) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO lessonprobe_replay_quarantine (plan_id, topic, partition, record_offset,
                record, reason, quarantined_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        let at = now();
        for q in rows {
            stmt.execute(params![
                plan_id,
                q.entry.topic,
                q.entry.partition,
                q.entry.offset,
                q.entry.raw,
                q.reason,
                at
            ])?;
        }
        Ok(())
    }

    fn conflicts(&mut self, plan_id: &str, conflicts: &[Conflict]) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO lessonprobe_replay_conflicts (plan_id, event_id, stored_topic,
                stored_partition, stored_offset, stored_hash, incoming_topic, incoming_partition,
                incoming_offset, incoming_hash, found_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT DO NOTHING",
        )?;
        let at = now();
        for c in conflicts {
            stmt.execute(params![
                plan_id,
                c.event_id,
                c.stored.as_ref().map(|l| &l.topic),
                c.stored.as_ref().map(|l| l.partition),
                c.stored.as_ref().map(|l| l.offset),
                c.stored_hash,
                c.incoming.topic,
                c.incoming.partition,
                c.incoming.offset,
                c.incoming_hash,
                at
            ])?;
        }
        Ok(())
    }

    fn advance(
        &mut self,
        plan_id: &str,
        batch: &Batch<'_>,
        c: &Counters,
        owner: Option<&str>,
    ) -> Result<Option<Option<i64>>, StoreError> {
        let n = self.conn.execute(
            "UPDATE lessonprobe_replay_partitions SET next_offset = ?4, records = records + ?5,
                inserted = inserted + ?6, duplicates = duplicates + ?7, conflicts = conflicts + ?8,
                quarantined = quarantined + ?9, markers = markers + ?10, aborted = aborted + ?11,
                updated_at = ?12
             WHERE plan_id = ?1 AND partition = ?2 AND next_offset = ?3
               AND (?13 IS NULL OR owner = ?13)",
            params![
                plan_id,
                batch.partition,
                batch.first,
                batch.next,
                c.records as i64,
                c.inserted as i64,
                c.duplicates as i64,
                c.conflicts as i64,
                c.quarantined as i64,
                c.markers as i64,
                c.aborted as i64,
                now(),
                owner
            ],
        )?;
        if n == 1 {
            return Ok(None);
        }
        let found = self
            .conn
            .query_row(
                "SELECT next_offset FROM lessonprobe_replay_partitions WHERE plan_id = ?1 AND partition = ?2",
                params![plan_id, batch.partition],
                |r| r.get(0),
            )
            .optional()?;
        Ok(Some(found))
    }

    fn record_batch(
        &mut self,
        plan_id: &str,
        batch: &Batch<'_>,
        owner: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO lessonprobe_replay_batches (plan_id, partition, first_offset,
                    next_offset, records, owner, applied_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                plan_id,
                batch.partition,
                batch.first,
                batch.next,
                batch.entries.len() as i64,
                owner,
                now()
            ])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_apply_of_the_same_event_id_is_a_duplicate() {
        let mut store = SqliteAuditStore::in_memory().unwrap();
        assert!(store.apply_once(&AuditEvent::sample()).unwrap());
        assert!(!store.apply_once(&AuditEvent::sample()).unwrap());
        assert_eq!(store.audit_rows().unwrap(), 1);
    }

    #[test]
    fn check_and_not_null_failures_propagate_instead_of_reading_as_duplicates() {
        let mut store = SqliteAuditStore::in_memory().unwrap();
        let mut empty_tenant = AuditEvent::sample_with_id("evt-check");
        empty_tenant.tenant_id.clear();
        let err = store.apply_once(&empty_tenant).unwrap_err();
        assert!(err.to_string().contains("CHECK constraint failed"), "{err}");

        let mut null_payload = AuditEvent::sample_with_id("evt-null");
        null_payload.payload = serde_json::Value::Null;
        let err = store.apply_once(&null_payload).unwrap_err();
        assert!(
            err.to_string().contains("NOT NULL constraint failed"),
            "{err}"
        );
        assert_eq!(store.audit_rows().unwrap(), 0);
    }

    #[test]
    fn reopening_a_file_keeps_rows_and_creates_nothing_but_the_audit_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        SqliteAuditStore::open(&path)
            .unwrap()
            .apply_once(&AuditEvent::sample())
            .unwrap();
        let mut again = SqliteAuditStore::open(&path).unwrap();
        assert_eq!(again.audit_rows().unwrap(), 1);
        assert!(!again.apply_once(&AuditEvent::sample()).unwrap());
        let tables: Vec<String> = again
            .connection()
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(tables, ["audit_events"]);
    }
}
