//! A replay target opened to read only — a SQLite file opened read-only, a PostgreSQL session in
//! one `READ ONLY` transaction — and the lookups that compare a topic with it: the stored version
//! of a batch of events, and which records a replay quarantined.

use postgres::types::ToSql;
use postgres::Statement;

use super::batch::postgres_data_error;
use super::inspect::{Adoption, Inspection};
use super::ledger::RecordedPlan;
use super::postgres::{stored_event as postgres_event, PostgresTarget};
use super::schema::REQUIRED_COLUMNS;
use super::sqlite::{stored_event as sqlite_event, SqliteTarget};
use super::target::{AuditDb, ReplayTarget, Timeouts};
use super::StoreError;
use crate::event::EventRecord;

/// The quarantine table the replay writes.
const QUARANTINE: &str = "lessonprobe_replay_quarantine";

/// A target that is only ever read.
pub struct Snapshot {
    inner: Inner,
    /// Whether the target has the replay's quarantine table (known after [`Snapshot::inspect`]).
    quarantine: bool,
    /// PostgreSQL: the lookup statement, prepared once for every batch.
    prepared: Option<(String, Statement)>,
}

enum Inner {
    Sqlite(SqliteTarget),
    Postgres(PostgresTarget),
}

/// Where a stored row came from in the log, when the table keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAt {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// What the table holds for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// A row with the event's id: its fields as the database renders them, and the incoming
    /// event rendered through the same column types where a column is not text (so a
    /// `timestamptz` or `jsonb` column compares as the database would have stored the event).
    /// Boxed: a batch holds one lookup per event, and nearly all of them are `Same`.
    Row {
        stored: Box<EventRecord>,
        incoming: Option<Box<EventRecord>>,
        at: Option<StoredAt>,
    },
    /// A row holds exactly the event's text (found without copying the row out).
    Same,
    /// No row has the event's id.
    Absent,
    /// The table's column types cannot hold the event (the database's words): no row can have
    /// it, and a replay quarantines it.
    Refused(String),
}

impl Snapshot {
    /// Opens `db` to read only; a SQLite file that does not exist is an error, not created.
    pub fn open(db: &AuditDb, timeouts: Timeouts) -> Result<Snapshot, StoreError> {
        let inner = match db {
            AuditDb::Sqlite(path) if !path.exists() => {
                // The caller names the database.
                return Err(StoreError::Unavailable("no such database file".into()));
            }
            AuditDb::Sqlite(path) => {
                let target = SqliteTarget::open(path, timeouts, true)?;
                // A page cache as large as the replay's keeps the event_id index in memory
                // while lookups land all over it; one read transaction: every lookup sees the
                // same state of the file.
                target
                    .connection()
                    .execute_batch("PRAGMA cache_size = -65536; BEGIN")?;
                Inner::Sqlite(target)
            }
            AuditDb::Postgres(url) => {
                Inner::Postgres(PostgresTarget::open_read_only(url, timeouts)?)
            }
        };
        Ok(Snapshot {
            inner,
            quarantine: false,
            prepared: None,
        })
    }

    /// Another session that sees exactly what this one sees, for lookups in parallel:
    /// PostgreSQL imports this session's snapshot into a read-only transaction of its own.
    /// `None` where that cannot be had (SQLite, whose readers cannot share a snapshot, or a
    /// server that refuses to export one): this session alone then does every lookup.
    pub fn beside(&mut self, db: &AuditDb, timeouts: Timeouts) -> Option<Snapshot> {
        let (Inner::Postgres(first), AuditDb::Postgres(url)) = (&mut self.inner, db) else {
            return None;
        };
        let exported: String = first
            .client()
            .query_one("SELECT pg_export_snapshot()", &[])
            .ok()?
            .get(0);
        let mut target = PostgresTarget::open(url, timeouts).ok()?;
        target
            .client()
            .batch_execute(&format!(
                "SET default_transaction_read_only = on;
                 BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;
                 SET TRANSACTION SNAPSHOT '{}'",
                exported.replace('\'', "''")
            ))
            .ok()?;
        Some(Snapshot {
            inner: Inner::Postgres(target),
            quarantine: self.quarantine,
            prepared: None,
        })
    }

    fn target(&mut self) -> &mut dyn ReplayTarget {
        match &mut self.inner {
            Inner::Sqlite(t) => t,
            Inner::Postgres(t) => t,
        }
    }

    /// The database, without a password.
    pub fn place(&mut self) -> String {
        self.target().place().to_owned()
    }

    /// What the target holds, as a replay would inspect it.
    pub fn inspect(&mut self) -> Result<Inspection, StoreError> {
        let inspection = self.target().inspect()?;
        self.quarantine = inspection.bookkeeping.iter().any(|t| t == QUARANTINE);
        Ok(inspection)
    }

    /// Every plan recorded in the target.
    pub fn plans(&mut self) -> Result<Vec<RecordedPlan>, StoreError> {
        self.target().plans()
    }

    /// What the table holds for each of `events`, in order.
    pub fn stored(
        &mut self,
        adoption: &Adoption,
        events: &[&EventRecord],
    ) -> Result<Vec<Lookup>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let located = ["topic", "partition", "record_offset"]
            .iter()
            .all(|c| adoption.record_columns.contains(c));
        match &mut self.inner {
            Inner::Sqlite(t) => sqlite_stored(t, located, events),
            Inner::Postgres(t) => postgres_stored(t, &mut self.prepared, adoption, located, events),
        }
    }

    /// The offsets among `offsets` of `topic[partition]` that a replay quarantined, each with
    /// its reason (none when the target has no quarantine table).
    pub fn quarantined(
        &mut self,
        topic: &str,
        partition: i32,
        offsets: &[i64],
    ) -> Result<Vec<(i64, String)>, StoreError> {
        if !self.quarantine || offsets.is_empty() {
            return Ok(Vec::new());
        }
        match &mut self.inner {
            Inner::Sqlite(t) => {
                let list = serde_json::to_string(offsets).unwrap_or_default();
                let mut stmt = t.connection().prepare_cached(
                    "SELECT record_offset, MIN(reason) FROM lessonprobe_replay_quarantine
                     WHERE topic = ?1 AND partition = ?2
                       AND record_offset IN (SELECT value FROM json_each(?3))
                     GROUP BY record_offset ORDER BY record_offset",
                )?;
                let rows = stmt.query_map(rusqlite::params![topic, partition, list], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
            Inner::Postgres(t) => {
                let place = t.place().to_owned();
                Ok(t.client()
                    .query(
                        "SELECT record_offset, MIN(reason) FROM lessonprobe_replay_quarantine
                         WHERE topic = $1 AND partition = $2 AND record_offset = ANY($3)
                         GROUP BY record_offset ORDER BY record_offset",
                        &[&topic, &partition, &offsets],
                    )
                    .map_err(|e| StoreError::postgres(&place, e))?
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect())
            }
        }
    }
}

fn location(
    topic: Option<String>,
    partition: Option<i32>,
    offset: Option<i64>,
) -> Option<StoredAt> {
    Some(StoredAt {
        topic: topic?,
        partition: partition?,
        offset: offset?,
    })
}

/// SQLite stores what it is given: the stored text compares with the record as it is.
fn sqlite_stored(
    target: &SqliteTarget,
    located: bool,
    events: &[&EventRecord],
) -> Result<Vec<Lookup>, StoreError> {
    let ids = serde_json::to_string(&events.iter().map(|e| &e.event_id).collect::<Vec<_>>())
        .unwrap_or_default();
    let sql = format!(
        "SELECT j.key, CAST(a.event_id AS TEXT), CAST(a.tenant_id AS TEXT),
                CAST(a.ticket_id AS TEXT), CAST(a.action AS TEXT), CAST(a.occurred_at AS TEXT),
                CAST(a.payload AS TEXT), {location}
         FROM (SELECT key, value FROM json_each(?1) ORDER BY value) AS j
         JOIN audit_events a ON a.event_id = j.value",
        location = if located {
            "CAST(a.topic AS TEXT), a.partition, a.record_offset"
        } else {
            "NULL, NULL, NULL"
        }
    );
    let mut out = vec![Lookup::Absent; events.len()];
    let mut stmt = target.connection().prepare_cached(&sql)?;
    let mut rows = stmt.query([ids])?;
    while let Some(r) = rows.next()? {
        let i: usize = r.get::<_, i64>(0)?.try_into().unwrap_or(usize::MAX);
        let Some(event) = events.get(i) else { continue };
        // The common case, a row that holds the event's very text, is decided on the
        // database's own bytes; only a row that differs is copied out.
        let same = event
            .columns()
            .iter()
            .enumerate()
            .all(|(c, v)| matches!(r.get_ref(c + 1), Ok(rusqlite::types::ValueRef::Text(t)) if t == v.as_bytes()));
        if same {
            out[i] = Lookup::Same;
            continue;
        }
        let row = Lookup::Row {
            stored: Box::new(sqlite_event(r, 1)?),
            incoming: None,
            at: location(r.get(7)?, r.get(8)?, r.get(9)?),
        };
        out[i] = row;
    }
    Ok(out)
}

/// PostgreSQL renders typed columns its own way: the incoming event goes through the same
/// column types. The database compares each row with its event byte for byte (collation "C")
/// and sends back only the rows that differ and the ids it does not hold: nearly every row is
/// the same, and copying it out only to find so costs more than the lookup. An event a column
/// type refuses fails the statement; halves of the batch are looked up until it stands alone,
/// and it is [`Lookup::Refused`].
fn postgres_stored(
    target: &mut PostgresTarget,
    prepared: &mut Option<(String, Statement)>,
    adoption: &Adoption,
    located: bool,
    events: &[&EventRecord],
) -> Result<Vec<Lookup>, StoreError> {
    let value = |c: &str| match adoption.casts.iter().find(|(column, _)| column == c) {
        Some((_, ty)) => format!("u.{c}::{ty}"),
        None => format!("u.{c}"),
    };
    let any_cast = !adoption.casts.is_empty();
    let incoming: Vec<String> = REQUIRED_COLUMNS
        .iter()
        .map(|c| format!("({})::text", value(c)))
        .collect();
    let same = REQUIRED_COLUMNS
        .iter()
        .zip(&incoming)
        .map(|(c, theirs)| {
            format!(r#"(a.{c}::text COLLATE "C") IS NOT DISTINCT FROM ({theirs} COLLATE "C")"#)
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    let arrays: Vec<String> = (1..=REQUIRED_COLUMNS.len())
        .map(|i| format!("${i}::text[]"))
        .collect();
    // CASE fixes the order: an id with no row never has its other columns cast, so it is
    // missing, not refused, as when only its row could be compared.
    let sql = format!(
        "SELECT u.ord, a.event_id IS NOT NULL, a.event_id::text, a.tenant_id::text,
                a.ticket_id::text, a.action::text, a.occurred_at::text, a.payload::text,
                {location}, {incoming}
         FROM unnest({arrays}) WITH ORDINALITY AS u({columns}, ord)
         LEFT JOIN audit_events a ON a.event_id = {key}
         WHERE CASE WHEN a.event_id IS NULL THEN true ELSE NOT ({same}) END",
        location = if located {
            "a.topic::text, a.partition::int4, a.record_offset::int8"
        } else {
            "NULL::text, NULL::int4, NULL::int8"
        },
        incoming = if any_cast {
            incoming
                .iter()
                .map(|i| format!("CASE WHEN a.event_id IS NULL THEN NULL ELSE {i} END"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            "NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text".to_owned()
        },
        arrays = arrays.join(", "),
        columns = REQUIRED_COLUMNS.join(", "),
        key = value("event_id"),
    );
    let place = target.place().to_owned();
    let statement = match prepared {
        Some((text, statement)) if *text == sql => statement.clone(),
        _ => {
            let statement = target
                .client()
                .prepare(&sql)
                .map_err(|e| StoreError::postgres(&place, e))?;
            *prepared = Some((sql, statement.clone()));
            statement
        }
    };
    lookup_splitting(target, &statement, any_cast, events)
}

fn lookup_splitting(
    target: &mut PostgresTarget,
    statement: &Statement,
    any_cast: bool,
    events: &[&EventRecord],
) -> Result<Vec<Lookup>, StoreError> {
    let place = target.place().to_owned();
    let mut columns: [Vec<&str>; 6] = Default::default();
    for e in events {
        for (column, v) in columns.iter_mut().zip(e.columns()) {
            column.push(v);
        }
    }
    let params: Vec<&(dyn ToSql + Sync)> =
        columns.iter().map(|c| c as &(dyn ToSql + Sync)).collect();
    // Inside the session's one read-only transaction: a failed statement must not end it.
    let client = target.client();
    let result = client
        .batch_execute("SAVEPOINT lp_lookup")
        .and_then(|()| client.query(statement, &params));
    let rows = match result {
        Ok(rows) => {
            client
                .batch_execute("RELEASE SAVEPOINT lp_lookup")
                .map_err(|e| StoreError::postgres(&place, e))?;
            rows
        }
        Err(e) => {
            let data = e.as_db_error().map(|db| {
                (
                    postgres_data_error(db.code().code()),
                    db.code().code().to_owned(),
                    db.message().to_owned(),
                )
            });
            client
                .batch_execute("ROLLBACK TO SAVEPOINT lp_lookup; RELEASE SAVEPOINT lp_lookup")
                .map_err(|e| StoreError::postgres(&place, e))?;
            return match data {
                Some((true, code, message)) if events.len() == 1 => {
                    Ok(vec![Lookup::Refused(format!("SQLSTATE {code}: {message}"))])
                }
                Some((true, _, _)) => {
                    let (left, right) = events.split_at(events.len() / 2);
                    let mut out = lookup_splitting(target, statement, any_cast, left)?;
                    out.extend(lookup_splitting(target, statement, any_cast, right)?);
                    Ok(out)
                }
                _ => Err(StoreError::postgres(&place, e)),
            };
        }
    };
    // What the database did not send back is a row that holds the event as it is.
    let mut out = vec![Lookup::Same; events.len()];
    for r in rows {
        let ord: i64 = r.get(0);
        let found: bool = r.get(1);
        let row = if found {
            Lookup::Row {
                stored: Box::new(postgres_event(&r, 2)),
                incoming: any_cast.then(|| Box::new(postgres_event(&r, 11))),
                at: location(r.get(8), r.get(9), r.get(10)),
            }
        } else {
            Lookup::Absent
        };
        if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| out.get_mut(i)) {
            *slot = row;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lessonprobe_testkit::postgres::OwnDatabase;
    use lessonprobe_testkit::services;

    use super::*;
    use crate::store::{schema, Backend};

    fn event(id: &str) -> EventRecord {
        EventRecord {
            event_id: id.into(),
            tenant_id: "t".into(),
            ticket_id: "k".into(),
            action: "a".into(),
            occurred_at: "2026-09-22T10:00:00+00:00".into(),
            payload: "{}".into(),
        }
    }

    #[test]
    fn a_session_beside_sees_what_the_first_sees_and_nothing_written_since() {
        let Some(admin) = services::postgres() else {
            return;
        };
        let own = OwnDatabase::create(&admin, "snapshot_beside");
        let mut client = own.client();
        client
            .batch_execute(&schema::audit_events(Backend::Postgres))
            .unwrap();
        let insert = |client: &mut postgres::Client, e: &EventRecord| {
            let c = e.columns();
            client
                .execute(
                    "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action,
                        occurred_at, payload) VALUES ($1, $2, $3, $4, $5, $6)",
                    &[&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]],
                )
                .unwrap();
        };
        let (before, after) = (event("before"), event("after"));
        insert(&mut client, &before);
        let db = AuditDb::Postgres(own.url());
        let mut first = Snapshot::open(&db, Timeouts::all(Duration::from_secs(10))).unwrap();
        // The first statement fixes the session's snapshot.
        let adoption = first.inspect().unwrap().adopt().unwrap();
        insert(&mut client, &after);
        let mut beside = first
            .beside(&db, Timeouts::all(Duration::from_secs(10)))
            .expect("a second session on PostgreSQL");
        for session in [&mut first, &mut beside] {
            assert_eq!(
                session.stored(&adoption, &[&before, &after]).unwrap(),
                [Lookup::Same, Lookup::Absent]
            );
        }
        // What differs comes back as the row; what is absent stays absent.
        let mut changed = before.clone();
        changed.payload = r#"{"a":1}"#.into();
        match &beside.stored(&adoption, &[&changed]).unwrap()[..] {
            [Lookup::Row { stored, .. }] => assert_eq!(**stored, before),
            other => panic!("{other:?}"),
        }
    }
}
