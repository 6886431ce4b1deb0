//! A batch written on PostgreSQL, inside the target's open transaction: rows in by binary
//! COPY (straight into `audit_events`, or staged and moved on with `ON CONFLICT`), or as
//! arrays through `unnest` where the role may not create a temporary table; the stored
//! versions read back, and the batch's bookkeeping rows.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::copy::{CopyError, RowCopy};
use crate::event::EventRecord;
use crate::store::batch::{
    self, Advance, BatchTx, Conflict, Fault, InsertedEach, Location, Quarantine, SplitInsert,
    StoredVersion, Written,
};
use crate::store::bookkeeping_sql::POSTGRES as SQL;
use crate::store::error::StoreError;
use crate::store::inspect::Adoption;
use crate::store::ledger::{now, Entry};
use crate::store::param::Param;
use crate::store::schema::{RECORD_COLUMNS, REQUIRED_COLUMNS};

/// The batch operations on one open PostgreSQL transaction.
pub(super) struct PgTx<'c, 's> {
    pub(super) tx: &'c mut Client,
    pub(super) adoption: &'s Adoption,
    pub(super) place: &'s str,
    pub(super) session: &'s mut Session,
}

/// What a connection keeps across its batches: how the rows of a batch reach
/// `audit_events`, and the statements it has prepared.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// Statements prepared on this connection, by their text: every batch runs the same few,
    /// and a statement given as text is prepared anew each time (a round trip more).
    pub(super) statements: HashMap<String, Statement>,
    /// Every written column has exactly the type the store would create, so the rows may be
    /// copied in directly (binary COPY carries no conversions).
    pub(super) direct_fits: bool,
    /// A number per staged call, so rows of earlier calls in the same transaction stay apart.
    pub(super) calls: i32,
    /// Direct copies to leave out after one met an existing row, and how many the next miss
    /// leaves out (doubling to 64): a topic with redeliveries goes the staged way.
    pub(super) skip: u32,
    pub(super) backoff: u32,
    /// The session may create the temporary staging table. A role without the TEMP privilege
    /// sends the rows as arrays instead (`unnest`), a little slower.
    pub(super) staging: bool,
}

/// Rows on their way in, in the types the replay sends: COPY has no ON CONFLICT, so a batch is
/// copied here and moved on with one `INSERT … SELECT … ON CONFLICT (event_id) DO NOTHING`.
/// Temporary (no WAL, this session only) and emptied by every commit.
pub(super) const STAGE: &str = "CREATE TEMPORARY TABLE IF NOT EXISTS lessonprobe_replay_stage (
    call int4 NOT NULL, ord int8 NOT NULL, event_id text, tenant_id text, ticket_id text,
    action text, occurred_at text, payload text, record bytea, topic text, partition int4,
    record_offset int8, record_timestamp int8) ON COMMIT DELETE ROWS";

/// The type a written column has in the table the store creates, as binary COPY sends it.
pub(super) fn copy_type(column: &str) -> postgres::types::Type {
    use postgres::types::Type;
    match column {
        "record" => Type::BYTEA,
        "partition" => Type::INT4,
        "record_offset" | "record_timestamp" => Type::INT8,
        _ => Type::TEXT,
    }
}

/// The decoded rows' values for the written columns, a column at a time: the arrays `unnest`
/// takes, in the order of [`PgTx::unnest`]'s placeholders.
fn arrays<'e>(adoption: &Adoption, rows: &[&'e Entry<'_>]) -> Vec<Vec<Param<'e>>> {
    let mut arrays = vec![Vec::with_capacity(rows.len()); adoption.written_columns().len()];
    for entry in rows {
        let Ok(event) = &entry.decoded else { continue };
        for (array, value) in arrays.iter_mut().zip(batch::row(adoption, entry, event)) {
            array.push(value);
        }
    }
    arrays
}

/// Values as the driver takes them.
fn bound<T: ToSql + Sync>(values: &[T]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// The event a row holds in six text columns from `first` on, in the order of
/// `schema::REQUIRED_COLUMNS` (NULL read as empty).
pub(crate) fn stored_event(r: &postgres::Row, first: usize) -> EventRecord {
    let text = |i: usize| r.get::<_, Option<String>>(first + i).unwrap_or_default();
    EventRecord {
        event_id: text(0),
        tenant_id: text(1),
        ticket_id: text(2),
        action: text(3),
        occurred_at: text(4),
        payload: text(5),
    }
}

fn array_type(column: &str) -> &'static str {
    match column {
        "record" => "bytea[]",
        "topic" => "text[]",
        "partition" => "int4[]",
        _ if RECORD_COLUMNS.contains(&column) => "int8[]",
        _ => "text[]",
    }
}

impl PgTx<'_, '_> {
    fn fault(&self, e: postgres::Error) -> Fault {
        match e.as_db_error() {
            Some(db) if batch::postgres_data_error(db.code().code()) => {
                Fault::Data(format!("SQLSTATE {}: {}", db.code().code(), db.message()))
            }
            _ => Fault::Infra(StoreError::postgres(self.place, e)),
        }
    }

    fn err(&self, e: postgres::Error) -> StoreError {
        StoreError::postgres(self.place, e)
    }

    /// `sql` prepared on this connection: once, then taken from [`Session::statements`].
    fn prepared(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        if let Some(statement) = self.session.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.tx.prepare(sql)?;
        self.session
            .statements
            .insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Binary COPY of the decoded rows: into `audit_events` itself (`call` is `None`), or into
    /// the staging table under `call`, each with its 1-based position in `rows`.
    fn copy_rows(&mut self, call: Option<i32>, rows: &[&Entry<'_>]) -> Result<(), Fault> {
        use postgres::types::Type;
        let (adoption, place) = (self.adoption, self.place);
        let fault = |e: postgres::Error| match e.as_db_error() {
            Some(db) if batch::postgres_data_error(db.code().code()) => {
                Fault::Data(format!("SQLSTATE {}: {}", db.code().code(), db.message()))
            }
            _ => Fault::Infra(StoreError::postgres(place, e)),
        };
        let mut columns: Vec<&str> = Vec::new();
        let mut types: Vec<Type> = Vec::new();
        if call.is_some() {
            columns.extend(["call", "ord"]);
            types.extend([Type::INT4, Type::INT8]);
        }
        let written = adoption.written_columns();
        types.extend(written.iter().map(|c| copy_type(c)));
        columns.extend(written);
        let table = match call {
            Some(_) => "pg_temp.lessonprobe_replay_stage",
            None => "audit_events",
        };
        let statement = self
            .prepared(&format!(
                "COPY {table} ({}) FROM STDIN BINARY",
                columns.join(", ")
            ))
            .map_err(fault)?;
        let sink = self.tx.copy_in(&statement).map_err(fault)?;
        let copy_fault = |e: CopyError| match e {
            CopyError::Postgres(e) => fault(e),
            CopyError::Value(reason) => Fault::Data(reason),
            CopyError::Connection(reason) => {
                Fault::Infra(StoreError::Unavailable(format!("{place}: {reason}")))
            }
        };
        let mut writer = RowCopy::new(sink, &types);
        let mut values: Vec<Param<'_>> = Vec::with_capacity(columns.len());
        for (ord, entry) in (1..).zip(rows) {
            let Ok(event) = &entry.decoded else { continue };
            values.clear();
            if let Some(call) = call {
                values.extend([Param::Int4(call), Param::Int8(ord)]);
            }
            values.extend(batch::row(adoption, entry, event));
            writer.write(&values).map_err(copy_fault)?;
        }
        writer.finish().map_err(copy_fault)?;
        Ok(())
    }

    /// `unnest($1::text[], …) WITH ORDINALITY AS u(event_id, …, ord)` over the written columns;
    /// with `places`, each row's `ord` is one more array (its place in the batch) instead of
    /// counted: `unnest($1::text[], …, $N::int8[]) AS u(event_id, …, ord)`.
    fn unnest(&self, places: bool) -> String {
        let columns = self.adoption.written_columns();
        let mut arrays: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("${}::{}", i + 1, array_type(c)))
            .collect();
        if places {
            arrays.push(format!("${}::int8[]", columns.len() + 1));
        }
        format!(
            "unnest({}){} AS u({}, ord)",
            arrays.join(", "),
            if places { "" } else { " WITH ORDINALITY" },
            columns.join(", ")
        )
    }

    /// `u.column`, converted to the adopted column's type where it is not text.
    fn value(&self, column: &str) -> String {
        match self.adoption.casts.iter().find(|(c, _)| c == column) {
            Some((_, ty)) => format!("u.{column}::{ty}"),
            None => format!("u.{column}"),
        }
    }
}

impl SplitInsert for PgTx<'_, '_> {
    fn savepoint(&mut self) -> Result<(), StoreError> {
        self.tx
            .batch_execute("SAVEPOINT lp_rows")
            .map_err(|e| self.err(e))
    }
    fn release(&mut self) -> Result<(), StoreError> {
        self.tx
            .batch_execute("RELEASE SAVEPOINT lp_rows")
            .map_err(|e| self.err(e))
    }
    fn rollback_to(&mut self) -> Result<(), StoreError> {
        self.tx
            .batch_execute("ROLLBACK TO SAVEPOINT lp_rows")
            .map_err(|e| self.err(e))
    }

    fn insert(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<bool>, Fault> {
        let decoded: Vec<bool> = rows.iter().map(|e| e.decoded.is_ok()).collect();
        let n = decoded.iter().filter(|&&d| d).count() as i64;
        if n == 0 {
            return Ok(decoded);
        }
        // Straight in when nothing stands in the way: COPY refuses every row of a batch that
        // meets an existing event id (or any other constraint), and is then undone and
        // followed by the staged way, which decides row by row.
        if self.session.direct_fits && self.session.skip == 0 {
            match self.copy_rows(None, rows) {
                Ok(()) => {
                    self.session.backoff = 0;
                    return Ok(decoded);
                }
                Err(Fault::Infra(e)) => return Err(Fault::Infra(e)),
                Err(Fault::Data(_)) => {
                    // Undone to the savepoint the caller made (`SplitInsert::insert`), which
                    // stays for the staged way.
                    self.tx
                        .batch_execute("ROLLBACK TO SAVEPOINT lp_rows")
                        .map_err(|e| Fault::Infra(self.err(e)))?;
                    self.session.backoff = (self.session.backoff * 2).clamp(1, 64);
                    self.session.skip = self.session.backoff;
                }
            }
        } else {
            self.session.skip = self.session.skip.saturating_sub(1);
        }
        // The rows, numbered by their place in `rows`: staged by binary COPY under a call
        // number, or (without the TEMP privilege) sent as arrays with their places.
        let columns = self.adoption.written_columns();
        let call = if self.session.staging {
            self.session.calls += 1;
            self.copy_rows(Some(self.session.calls), rows)?;
            Some(self.session.calls)
        } else {
            None
        };
        let (data, places): (Vec<Vec<Param<'_>>>, Vec<i64>);
        let (source, mut params): (String, Vec<&(dyn ToSql + Sync)>) = match &call {
            Some(call) => (
                "pg_temp.lessonprobe_replay_stage u WHERE u.call = $1".to_owned(),
                vec![call],
            ),
            None => {
                data = arrays(self.adoption, rows);
                places = (1..)
                    .zip(rows)
                    .filter(|(_, e)| e.decoded.is_ok())
                    .map(|(i, _)| i)
                    .collect();
                let mut params = bound(&data);
                params.push(&places);
                (self.unnest(true), params)
            }
        };
        let values: Vec<String> = columns.iter().map(|c| self.value(c)).collect();
        // The count, and the ids inserted only when some were not: matched back by the text
        // of the key in the column's own type.
        let sql = format!(
            "WITH ins AS (
                INSERT INTO audit_events ({cols})
                SELECT {values} FROM {source}
                ORDER BY u.ord
                ON CONFLICT (event_id) DO NOTHING RETURNING event_id
             )
             SELECT count(*), CASE WHEN count(*) < ${n_at} THEN array_agg(ins.event_id::text) END
             FROM ins",
            cols = columns.join(", "),
            values = values.join(", "),
            n_at = params.len() + 1,
        );
        params.push(&n);
        let row = self
            .tx
            .query_one(&sql, &params)
            .map_err(|e| self.fault(e))?;
        if row.get::<_, i64>(0) == n {
            return Ok(decoded);
        }
        let inserted: std::collections::HashSet<String> = row
            .get::<_, Option<Vec<String>>>(1)
            .unwrap_or_default()
            .into_iter()
            .collect();
        params.pop();
        let keys = self
            .tx
            .query(
                &format!(
                    "SELECT u.ord, ({})::text FROM {source}",
                    self.value("event_id")
                ),
                &params,
            )
            .map_err(|e| Fault::Infra(self.err(e)))?;
        let mut out = vec![false; rows.len()];
        for r in keys {
            let ord: i64 = r.get(0);
            let key: Option<String> = r.get(1);
            if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| out.get_mut(i)) {
                *slot = key.is_some_and(|k| inserted.contains(&k));
            }
        }
        Ok(out)
    }
}

impl BatchTx for PgTx<'_, '_> {
    /// One COPY (or one statement of arrays) for all the rows, split on a refused one.
    fn insert_each(&mut self, rows: &[&Entry<'_>]) -> Result<InsertedEach, StoreError> {
        batch::insert_splitting(self, rows)
    }

    fn stored(&mut self, rows: &[&Entry<'_>]) -> Result<Vec<Option<StoredVersion>>, StoreError> {
        let located = ["topic", "partition", "record_offset"]
            .iter()
            .all(|c| self.adoption.record_columns.contains(c));
        let incoming: Vec<String> = REQUIRED_COLUMNS
            .iter()
            .map(|c| format!("({})::text", self.value(c)))
            .collect();
        let sql = format!(
            "SELECT u.ord, a.event_id::text, a.tenant_id::text, a.ticket_id::text, a.action::text,
                    a.occurred_at::text, a.payload::text, {location}, {incoming}
             FROM {unnest} JOIN audit_events a ON a.event_id = {key}",
            location = if located {
                "a.topic::text, a.partition::int4, a.record_offset::int8"
            } else {
                "NULL::text, NULL::int4, NULL::int8"
            },
            incoming = incoming.join(", "),
            unnest = self.unnest(false),
            key = self.value("event_id"),
        );
        let data = arrays(self.adoption, rows);
        let params = bound(&data);
        let mut out: Vec<Option<StoredVersion>> = vec![None; rows.len()];
        let any_cast = !self.adoption.casts.is_empty();
        for r in self.tx.query(&sql, &params).map_err(|e| self.err(e))? {
            let ord: i64 = r.get(0);
            let location = match (r.get(7), r.get(8), r.get(9)) {
                (Some(topic), Some(partition), Some(offset)) => Some(Location {
                    topic,
                    partition,
                    offset,
                }),
                _ => None,
            };
            let version = StoredVersion {
                stored: stored_event(&r, 1),
                incoming: any_cast.then(|| stored_event(&r, 10)),
                location,
            };
            if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| out.get_mut(i)) {
                *slot = Some(version);
            }
        }
        Ok(out)
    }

    fn replace(&mut self, row: &Entry<'_>) -> Result<(), Fault> {
        let columns = self.adoption.written_columns();
        let sets: Vec<String> = columns[1..]
            .iter()
            .map(|c| format!("{c} = {}", self.value(c)))
            .collect();
        let sql = format!(
            "UPDATE audit_events a SET {} FROM {} WHERE a.event_id = {}",
            sets.join(", "),
            self.unnest(false),
            self.value("event_id")
        );
        let data = arrays(self.adoption, &[row]);
        let params = bound(&data);
        self.tx
            .execute(&sql, &params)
            .map(drop)
            .map_err(|e| self.fault(e))
    }

    fn quarantine(&mut self, plan_id: &str, rows: &[Quarantine<'_, '_>]) -> Result<(), StoreError> {
        let topics: Vec<&str> = rows.iter().map(|q| q.entry.topic).collect();
        let partitions: Vec<i32> = rows.iter().map(|q| q.entry.partition).collect();
        let offsets: Vec<i64> = rows.iter().map(|q| q.entry.offset).collect();
        let raws: Vec<&[u8]> = rows.iter().map(|q| q.entry.raw).collect();
        let reasons: Vec<&str> = rows.iter().map(|q| q.reason.as_str()).collect();
        self.tx
            .execute(
                SQL.quarantine.as_str(),
                &[
                    &plan_id,
                    &topics,
                    &partitions,
                    &offsets,
                    &raws,
                    &reasons,
                    &now(),
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn conflicts(&mut self, plan_id: &str, conflicts: &[Conflict]) -> Result<(), StoreError> {
        let at = now();
        for c in conflicts {
            self.tx
                .execute(
                    SQL.insert_conflict.as_str(),
                    &[
                        &plan_id,
                        &c.event_id,
                        &c.stored.as_ref().map(|l| l.topic.as_str()),
                        &c.stored.as_ref().map(|l| l.partition),
                        &c.stored.as_ref().map(|l| l.offset),
                        &c.stored_hash,
                        &c.incoming.topic,
                        &c.incoming.partition,
                        &c.incoming.offset,
                        &c.incoming_hash,
                        &at,
                    ],
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    fn advance(&mut self, written: Written<'_>) -> Result<Advance, StoreError> {
        let at = now();
        let advance = self.prepared(&SQL.advance).map_err(|e| self.err(e))?;
        let n = self
            .tx
            .execute(&advance, &bound(&written.advance_params(&at)))
            .map_err(|e| self.err(e))?;
        if n == 1 {
            return Ok(Advance::Moved);
        }
        let (plan_id, partition) = (written.scope.plan_id, written.batch.partition);
        let found = self
            .tx
            .query_opt(SQL.checkpoint.as_str(), &[&plan_id, &partition])
            .map_err(|e| self.err(e))?
            .map(|r| r.get(0));
        Ok(Advance::Refused { found })
    }

    fn record_batch(&mut self, written: Written<'_>) -> Result<(), StoreError> {
        let at = now();
        let insert_batch = self.prepared(&SQL.insert_batch).map_err(|e| self.err(e))?;
        self.tx
            .execute(&insert_batch, &bound(&written.batch_params(&at)))
            .map(drop)
            .map_err(|e| self.err(e))
    }
}
