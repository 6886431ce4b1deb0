//! A batch written on SQLite, inside the target's open transaction: rows in by one prepared
//! `INSERT … ON CONFLICT (event_id) DO NOTHING` each, in key order and with no savepoint; the
//! stored versions read back, and the batch's bookkeeping rows.

use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

use crate::event::EventRecord;
use crate::store::batch::{
    self, Advance, BatchTx, Conflict, Fault, InsertedEach, Location, Quarantine, StoredVersion,
    Written,
};
use crate::store::bookkeeping_sql::SQLITE as SQL;
use crate::store::error::StoreError;
use crate::store::inspect::Adoption;
use crate::store::ledger::{now, Entry};

/// The event a row stores in six text columns from `first` on, in the order of
/// `schema::REQUIRED_COLUMNS` (NULL read as empty).
pub(crate) fn stored_event(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<EventRecord> {
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
pub(super) struct SqliteTx<'c> {
    pub(super) conn: &'c Connection,
    pub(super) adoption: &'c Adoption,
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

impl BatchTx for SqliteTx<'_> {
    /// One prepared statement a row, with no savepoint: a statement SQLite refuses for its
    /// data undoes only itself and leaves the transaction open, so the other rows go in as
    /// they would after a split, and a savepoint would only cost copies of every page the rows
    /// change (see `write_unguarded` in `target.rs`).
    fn insert_each(&mut self, rows: &[&Entry<'_>]) -> Result<InsertedEach, StoreError> {
        let columns = self.adoption.written_columns();
        let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
        let mut stmt = self.conn.prepare_cached(&format!(
            "INSERT INTO audit_events ({}) VALUES ({}) ON CONFLICT (event_id) DO NOTHING",
            columns.join(", "),
            marks.join(", ")
        ))?;
        // In key order: consecutive inserts land on neighbouring pages of the event_id index
        // instead of anywhere in it. The ids of one call are distinct (see batch::write), so
        // the order decides nothing about which version is stored, and the caller reads the
        // results in the rows' order, so the first refused row is found in offset order.
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|&a, &b| event_id(rows[a]).cmp(&event_id(rows[b])));
        let mut out = vec![Ok(false); rows.len()];
        for i in order {
            let entry = rows[i];
            let Ok(event) = &entry.decoded else { continue };
            // Bound by reference: no copy of a row's text or bytes.
            let values = batch::row(self.adoption, entry, event);
            out[i] = match stmt.execute(params_from_iter(&values)).map_err(data_fault) {
                Ok(n) => Ok(n == 1),
                Err(Fault::Infra(e)) => return Err(e),
                // SQLite may end the whole transaction on some errors; a refusal must not.
                Err(Fault::Data(reason)) if self.conn.is_autocommit() => {
                    return Err(StoreError::Unavailable(format!(
                        "the transaction was rolled back on a refused row: {reason}"
                    )))
                }
                Err(Fault::Data(reason)) => Err(reason),
            };
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
        let columns = self.adoption.written_columns();
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
                params_from_iter(batch::row(self.adoption, row, event)),
            )
            .map_err(data_fault)?;
        Ok(())
    }

    fn quarantine(&mut self, plan_id: &str, rows: &[Quarantine<'_, '_>]) -> Result<(), StoreError> {
        let mut stmt = self.conn.prepare_cached(&SQL.quarantine)?;
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
        let mut stmt = self.conn.prepare_cached(&SQL.insert_conflict)?;
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

    fn advance(&mut self, written: Written<'_>) -> Result<Advance, StoreError> {
        let at = now();
        let n = self
            .conn
            .execute(&SQL.advance, written.advance_params(&at))?;
        if n == 1 {
            return Ok(Advance::Moved);
        }
        let (plan_id, partition) = (written.scope.plan_id, written.batch.partition);
        let found = self
            .conn
            .query_row(&SQL.checkpoint, params![plan_id, partition], |r| r.get(0))
            .optional()?;
        Ok(Advance::Refused { found })
    }

    fn record_batch(&mut self, written: Written<'_>) -> Result<(), StoreError> {
        let at = now();
        self.conn
            .prepare_cached(&SQL.insert_batch)?
            .execute(written.batch_params(&at))?;
        Ok(())
    }
}
