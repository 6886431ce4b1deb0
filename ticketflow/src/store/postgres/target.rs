//! A PostgreSQL database as a replay's target, adopted as found: what it holds, what is
//! created in it, and the replay's bookkeeping there (plans, claims, checkpoints, conflicts);
//! each batch is handed to the batch writer inside the transaction opened here.

use postgres::{Client, Transaction};

use super::batch::{copy_type, PgTx, Session, STAGE};
use super::connect::connect_bounded;
use crate::store::backend::Backend;
use crate::store::batch::{self, PlanScope};
use crate::store::bookkeeping_sql::POSTGRES as SQL;
use crate::store::error::StoreError;
use crate::store::inspect::{Adoption, AuditTable, Column, Inspection};
use crate::store::ledger::{
    now, Batch, Claim, Counters, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
use crate::store::replay_target::{PartitionClaim, ReplayTarget, Timeouts};
use crate::store::schema::{self, BOOKKEEPING, LEGACY};

/// A PostgreSQL database as a replay's target.
pub struct PostgresTarget {
    client: Client,
    place: String,
    adoption: Option<Adoption>,
    session: Session,
    /// A transaction opened by `begin` is open.
    shared: bool,
}

impl PostgresTarget {
    pub fn open(url: &str, timeouts: Timeouts) -> Result<Self, StoreError> {
        let (client, place) = connect_bounded(url, timeouts.connect, timeouts.statement)?;
        Ok(PostgresTarget {
            client,
            place,
            adoption: None,
            session: Session::default(),
            shared: false,
        })
    }

    /// Opens the target to read only: every statement runs in one `REPEATABLE READ READ ONLY`
    /// transaction (one snapshot for the whole session, and any write refused by the server),
    /// which ends with the connection.
    pub fn open_read_only(url: &str, timeouts: Timeouts) -> Result<Self, StoreError> {
        let mut target = Self::open(url, timeouts)?;
        target
            .client
            .batch_execute(
                "SET default_transaction_read_only = on;
                 BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY",
            )
            .map_err(|e| StoreError::postgres(&target.place, e))?;
        Ok(target)
    }

    /// The connection, for read-only lookups in the same session.
    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    fn existing(&mut self, names: &[&str]) -> Result<Vec<String>, StoreError> {
        let names: Vec<&str> = names.to_vec();
        let rows = self
            .client
            .query(
                "SELECT t FROM unnest($1::text[]) AS t WHERE to_regclass(quote_ident(t)) IS NOT NULL",
                &[&names],
            )
            .map_err(|e| StoreError::postgres(&self.place, e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

/// Inserts `plan` and its partitions inside the caller's transaction.
fn insert_plan(
    tx: &mut Transaction<'_>,
    plan: &RecordedPlan,
    place: &str,
) -> Result<(), StoreError> {
    let wrap = |e| StoreError::postgres(place, e);
    let (kind, w) = plan.window.columns();
    tx.execute(
        SQL.insert_plan.as_str(),
        &[
            &plan.plan_id,
            &plan.topic,
            &plan.replay_group,
            &plan.live_group,
            &kind,
            &w[0],
            &w[1],
            &w[2],
            &w[3],
            &plan.partition_list(),
            &plan.created_at,
            &plan.created_by,
            &plan.status.as_str(),
        ],
    )
    .map_err(wrap)?;
    for p in &plan.partitions {
        tx.execute(
            SQL.insert_partition.as_str(),
            &[
                &plan.plan_id,
                &p.partition,
                &p.start,
                &p.stop,
                &p.captured_end,
                &p.next_offset,
                &p.owner,
                &p.updated_at,
            ],
        )
        .map_err(wrap)?;
    }
    Ok(())
}

impl PostgresTarget {
    /// Whether every column the replay writes has exactly the type the store creates it with
    /// (and no other column needs a value), so binary COPY can write the table itself.
    fn copies_directly(&mut self, adoption: &Adoption) -> Result<bool, StoreError> {
        if !adoption.casts.is_empty() {
            return Ok(false);
        }
        let columns = adoption.written_columns();
        let types: Vec<String> = columns
            .iter()
            .map(|c| copy_type(c).name().to_owned())
            .collect();
        let row = self
            .client
            .query_one(
                "SELECT count(*) FROM unnest($1::text[], $2::text[]) AS w(name, type)
                 JOIN pg_attribute a ON a.attrelid = to_regclass('audit_events')
                   AND a.attname = w.name AND NOT a.attisdropped
                 WHERE a.atttypid = to_regtype(w.type)",
                &[&columns, &types],
            )
            .map_err(|e| StoreError::postgres(&self.place, e))?;
        Ok(row.get::<_, i64>(0) == columns.len() as i64)
    }
}

impl ReplayTarget for PostgresTarget {
    fn place(&self) -> &str {
        &self.place
    }

    fn inspect(&mut self) -> Result<Inspection, StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let schema: Option<String> = self
            .client
            .query_one("SELECT current_schema()::text", &[])
            .map_err(wrap)?
            .get(0);
        let table: Option<u32> = self
            .client
            .query_opt(
                "SELECT c.oid FROM pg_class c WHERE c.oid = to_regclass('audit_events') AND c.relkind IN ('r', 'p')",
                &[],
            )
            .map_err(wrap)?
            .map(|r| r.get(0));
        let audit_events = match table {
            None => None,
            Some(oid) => {
                let columns = self
                    .client
                    .query(
                        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                                (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '')
                         FROM pg_attribute a
                         WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
                         ORDER BY a.attnum",
                        &[&oid],
                    )
                    .map_err(wrap)?
                    .iter()
                    .map(|r| Column {
                        name: r.get(0),
                        sql_type: r.get(1),
                        not_null: r.get(2),
                        filled: r.get(3),
                    })
                    .collect();
                // Keys ON CONFLICT can use: unique, valid, not deferrable, no predicate, no
                // expressions; INCLUDE columns are not part of the key.
                let unique_keys = self
                    .client
                    .query(
                        "SELECT ic.relname::text,
                                ARRAY(SELECT a.attname::text
                                      FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
                                      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                                      WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
                         FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                         WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indimmediate
                           AND i.indpred IS NULL AND i.indexprs IS NULL
                         ORDER BY 1",
                        &[&oid],
                    )
                    .map_err(wrap)?
                    .iter()
                    .map(|r| (r.get::<_, String>(0), r.get::<_, Vec<String>>(1)))
                    .collect();
                Some(AuditTable {
                    columns,
                    unique_keys,
                })
            }
        };
        Ok(Inspection {
            backend: Backend::Postgres,
            place: self.place.clone(),
            schema,
            exists: true,
            audit_events,
            bookkeeping: self.existing(&BOOKKEEPING)?,
            legacy: self.existing(&LEGACY)?,
        })
    }

    fn prepare(&mut self, adoption: &Adoption) -> Result<(), StoreError> {
        let mut sql = String::new();
        if adoption.create_audit_events {
            sql.push_str(&schema::audit_events(Backend::Postgres).replacen(
                "CREATE TABLE",
                "CREATE TABLE IF NOT EXISTS",
                1,
            ));
            sql.push_str(";\n");
        }
        for table in &adoption.create_bookkeeping {
            sql.push_str(&schema::bookkeeping(table, Backend::Postgres).replacen(
                "CREATE TABLE",
                "CREATE TABLE IF NOT EXISTS",
                1,
            ));
            sql.push_str(";\n");
        }
        if !sql.is_empty() {
            let place = self.place.clone();
            let mut tx = self
                .client
                .transaction()
                .map_err(|e| StoreError::postgres(&place, e))?;
            // Runs preparing at once (workers of one plan) take turns: concurrent CREATE TABLE
            // IF NOT EXISTS of one name can fail on PostgreSQL's catalog.
            sql.insert_str(
                0,
                "SELECT pg_advisory_xact_lock(hashtext('lessonprobe_replay_prepare'));\n",
            );
            tx.batch_execute(&sql)
                .map_err(|e| StoreError::postgres(&place, e))?;
            tx.commit().map_err(|e| StoreError::postgres(&place, e))?;
        }
        let staging = match self.client.batch_execute(STAGE) {
            Ok(()) => true,
            // insufficient_privilege: this role may not create temporary tables.
            Err(e) if e.code().is_some_and(|c| c.code() == "42501") => {
                tracing::debug!("{}: no TEMP privilege; rows are sent as arrays", self.place);
                false
            }
            Err(e) => return Err(StoreError::postgres(&self.place, e)),
        };
        self.session = Session {
            direct_fits: self.copies_directly(adoption)?,
            staging,
            ..Session::default()
        };
        self.adoption = Some(adoption.clone());
        Ok(())
    }

    fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError> {
        if self.existing(&BOOKKEEPING[..2])?.len() < 2 {
            return Ok(Vec::new());
        }
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut plans: Vec<RecordedPlan> = self
            .client
            .query(SQL.plans.as_str(), &[])
            .map_err(wrap)?
            .iter()
            .map(|r| RecordedPlan {
                plan_id: r.get(0),
                topic: r.get(1),
                replay_group: r.get(2),
                live_group: r.get(3),
                window: PlanWindow::from_columns(
                    r.get(4),
                    [r.get(5), r.get(6), r.get(7), r.get(8)],
                ),
                created_at: r.get(9),
                created_by: r.get(10),
                status: PlanStatus::parse(r.get(11)),
                finished_at: r.get(12),
                partitions: Vec::new(),
            })
            .collect();
        for plan in &mut plans {
            plan.partitions = self
                .client
                .query(SQL.partitions.as_str(), &[&plan.plan_id])
                .map_err(wrap)?
                .iter()
                .map(|r| {
                    let n = |i: usize| r.get::<_, i64>(i) as u64;
                    PartitionProgress {
                        partition: r.get(0),
                        start: r.get(1),
                        stop: r.get(2),
                        captured_end: r.get(3),
                        next_offset: r.get(4),
                        owner: r.get(5),
                        counters: Counters {
                            records: n(6),
                            inserted: n(7),
                            duplicates: n(8),
                            conflicts: n(9),
                            quarantined: n(10),
                            markers: n(11),
                            aborted: n(12),
                        },
                        updated_at: r.get(13),
                    }
                })
                .collect();
        }
        Ok(plans)
    }

    fn record_plan(&mut self, plan: &RecordedPlan) -> Result<(), StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.client.transaction().map_err(wrap)?;
        insert_plan(&mut tx, plan, &place)?;
        tx.commit().map_err(wrap)
    }

    fn record_plan_once(&mut self, plan: &RecordedPlan) -> Result<Recording, StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.client.transaction().map_err(wrap)?;
        // This lock mode conflicts with itself: one run at a time looks and inserts, while
        // readers of the plans go on.
        tx.batch_execute("LOCK TABLE lessonprobe_replay_plans IN SHARE ROW EXCLUSIVE MODE")
            .map_err(wrap)?;
        let found: Option<String> = tx
            .query_opt(
                SQL.plan_or_group.as_str(),
                &[&plan.plan_id, &plan.replay_group],
            )
            .map_err(wrap)?
            .map(|r| r.get(0));
        let recording = match found {
            Some(id) if id == plan.plan_id => Recording::Present,
            Some(plan_id) => Recording::OtherPlan { plan_id },
            None => {
                insert_plan(&mut tx, plan, &place)?;
                Recording::Recorded
            }
        };
        tx.commit().map_err(wrap)?;
        Ok(recording)
    }

    fn claim_partition(&mut self, claim: PartitionClaim<'_>) -> Result<Option<Claim>, StoreError> {
        // A finished partition keeps the owner that finished it. The row lock waits for a
        // batch of the partition in flight, so the checkpoint read is the one after it.
        let place = self.place.clone();
        Ok(self
            .client
            .query_opt(
                SQL.claim_partition.as_str(),
                &[&claim.plan_id, &claim.partition, &claim.owner, &now()],
            )
            .map_err(|e| StoreError::postgres(&place, e))?
            .map(|r| Claim {
                next_offset: r.get(0),
                stop: r.get(1),
            }))
    }

    fn release_partition(&mut self, claim: PartitionClaim<'_>) -> Result<(), StoreError> {
        let place = self.place.clone();
        self.client
            .execute(
                SQL.release_partition.as_str(),
                &[&claim.plan_id, &claim.partition, &claim.owner, &now()],
            )
            .map(drop)
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.client.transaction().map_err(wrap)?;
        tx.execute(SQL.claim_all.as_str(), &[&plan_id, &owner, &now()])
            .map_err(wrap)?;
        tx.execute(SQL.running.as_str(), &[&plan_id])
            .map_err(wrap)?;
        tx.commit().map_err(wrap)
    }

    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError> {
        let place = self.place.clone();
        self.client
            .execute(SQL.finish.as_str(), &[&plan_id, &status.as_str(), &now()])
            .map(drop)
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError> {
        let place = self.place.clone();
        Ok(self
            .client
            .query(SQL.conflicts_by_partition.as_str(), &[&plan_id])
            .map_err(|e| StoreError::postgres(&place, e))?
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
            .collect())
    }

    fn write_batch(
        &mut self,
        scope: &PlanScope<'_>,
        batch: &Batch<'_>,
    ) -> Result<Counters, WriteError> {
        let adoption = self.adoption.clone().ok_or_else(|| {
            StoreError::Unavailable(format!("{}: the target was not prepared", self.place))
        })?;
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let shared = self.shared;
        self.client
            .batch_execute(if shared {
                "SAVEPOINT lp_batch"
            } else {
                "BEGIN"
            })
            .map_err(wrap)?;
        let written = batch::write(
            &mut PgTx {
                tx: &mut self.client,
                adoption: &adoption,
                place: &place,
                session: &mut self.session,
            },
            scope,
            batch,
        );
        let end = match (&written, shared) {
            (Ok(_), true) => "RELEASE SAVEPOINT lp_batch",
            (Ok(_), false) => "COMMIT",
            (Err(_), true) => "ROLLBACK TO SAVEPOINT lp_batch; RELEASE SAVEPOINT lp_batch",
            (Err(_), false) => "ROLLBACK",
        };
        let ended = self.client.batch_execute(end);
        let counters = written?;
        ended.map_err(wrap)?;
        Ok(counters)
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.client
            .batch_execute("BEGIN")
            .map_err(|e| StoreError::postgres(&self.place, e))?;
        self.shared = true;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.shared = false;
        self.client
            .batch_execute("COMMIT")
            .map_err(|e| StoreError::postgres(&self.place, e))
    }
}
