//! A replay target opened to read only — a SQLite file opened read-only, a PostgreSQL session in
//! one `READ ONLY` transaction — and the reads that compare a topic with it: the stored version
//! of a batch of events, a scan of every row, and which records a replay quarantined.

use postgres::types::ToSql;
use postgres::Statement;

use super::audit_db::AuditDb;
use super::batch::postgres_data_error;
use super::error::StoreError;
use super::inspect::{Adoption, Inspection};
use super::ledger::RecordedPlan;
use super::postgres::{stored_event as postgres_event, PostgresTarget};
use super::replay_target::{ReplayTarget, Timeouts};
use super::schema::REQUIRED_COLUMNS;
use super::sqlite::{stored_event as sqlite_event, SqliteTarget};
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

// One per verify session (two with a snapshot beside it): the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
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

/// A table that can be compared by scanning it whole: its rows hold the events' own text, and
/// its `event_id` compares byte for byte, as the window's ids are sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scannable {
    /// About how many rows the table holds (the database's own estimate where it keeps one).
    pub rows: u64,
}

impl Snapshot {
    /// Whether the table can be compared by a scan, and about how many rows such a scan reads:
    /// `None` for a table with typed columns (PostgreSQL renders them its own way) or an
    /// `event_id` under a collation that is not byte for byte.
    pub fn scannable(&mut self, adoption: &Adoption) -> Result<Option<Scannable>, StoreError> {
        if !adoption.casts.is_empty() {
            return Ok(None);
        }
        match &mut self.inner {
            Inner::Sqlite(t) => {
                let conn = t.connection();
                let sql: String = conn.query_row(
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit_events'",
                    [],
                    |r| r.get(0),
                )?;
                if sql.to_ascii_uppercase().contains("COLLATE") {
                    return Ok(None);
                }
                // The largest rowid bounds the rows; a table without rowids is counted.
                let rows: Option<i64> = conn
                    .query_row("SELECT max(rowid) FROM audit_events", [], |r| r.get(0))
                    .or_else(|_| {
                        conn.query_row("SELECT count(*) FROM audit_events", [], |r| r.get(0))
                    })?;
                Ok(Some(Scannable {
                    rows: rows.unwrap_or(0).max(0) as u64,
                }))
            }
            Inner::Postgres(t) => {
                let place = t.place().to_owned();
                // The statistics' live rows, else rows per page as last analyzed times the
                // pages there are now, else a count.
                let row = t
                    .client()
                    .query_one(
                        "SELECT a.attcollation IN (0, 100, 950, 951),
                                COALESCE(NULLIF(s.n_live_tup, 0),
                                         CASE WHEN c.relpages > 0 AND c.reltuples > 0
                                              THEN (c.reltuples / c.relpages
                                                    * (pg_relation_size(c.oid)
                                                       / current_setting('block_size')::int8))::int8
                                         END)
                         FROM pg_class c
                         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'event_id'
                         LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
                         WHERE c.oid = 'audit_events'::regclass",
                        &[],
                    )
                    .map_err(|e| StoreError::postgres(&place, e))?;
                let bytewise: bool = row.get(0);
                let rows: i64 = match row.get::<_, Option<i64>>(1) {
                    Some(rows) => rows,
                    None => t
                        .client()
                        .query_one("SELECT count(*) FROM audit_events", &[])
                        .map_err(|e| StoreError::postgres(&place, e))?
                        .get(0),
                };
                Ok(bytewise.then_some(Scannable {
                    rows: rows.max(0) as u64,
                }))
            }
        }
    }

    /// Reads every row of the table once, in no particular order, and hands `each` its
    /// required columns as text (a NULL as empty text, as a lookup renders it).
    pub fn scan<E: From<StoreError>>(
        &mut self,
        mut each: impl FnMut([&str; 6]) -> Result<(), E>,
    ) -> Result<(), E> {
        let columns = REQUIRED_COLUMNS
            .iter()
            .map(|c| format!("CAST({c} AS TEXT)"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT {columns} FROM audit_events");
        match &mut self.inner {
            Inner::Sqlite(t) => {
                let mut stmt = t.connection().prepare(&sql).map_err(StoreError::from)?;
                let mut rows = stmt.query([]).map_err(StoreError::from)?;
                while let Some(r) = rows.next().map_err(StoreError::from)? {
                    let cells: [std::borrow::Cow<str>; 6] =
                        std::array::from_fn(|i| match r.get_ref(i) {
                            Ok(rusqlite::types::ValueRef::Text(t)) => {
                                match std::str::from_utf8(t) {
                                    Ok(text) => std::borrow::Cow::Borrowed(text),
                                    Err(_) => String::from_utf8_lossy(t),
                                }
                            }
                            _ => std::borrow::Cow::Borrowed(""),
                        });
                    let text: [&str; 6] = std::array::from_fn(|i| &*cells[i]);
                    each(text)?;
                }
                Ok(())
            }
            Inner::Postgres(t) => {
                let place = t.place().to_owned();
                let fail = |e| StoreError::postgres(&place, e);
                let mut rows = t
                    .client()
                    .query_raw(sql.as_str(), std::iter::empty::<&str>())
                    .map_err(fail)?;
                use postgres::fallible_iterator::FallibleIterator;
                while let Some(r) = rows.next().map_err(fail)? {
                    let mut text: [&str; 6] = [""; 6];
                    for (i, slot) in text.iter_mut().enumerate() {
                        *slot = r
                            .try_get::<_, Option<&str>>(i)
                            .map_err(fail)?
                            .unwrap_or_default();
                    }
                    each(text)?;
                }
                Ok(())
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
    use crate::store::backend::Backend;
    use crate::store::schema;

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
    fn a_sqlite_table_is_scannable_unless_its_event_id_compares_by_a_collation() {
        let dir = tempfile::tempdir().unwrap();
        for (name, event_id, scannable) in [
            (
                "plain.db",
                "event_id TEXT NOT NULL UNIQUE",
                Some(Scannable { rows: 3 }),
            ),
            (
                "nocase.db",
                "event_id TEXT NOT NULL UNIQUE COLLATE NOCASE",
                None,
            ),
        ] {
            let path = dir.path().join(name);
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.execute_batch(&format!(
                "CREATE TABLE audit_events ({event_id}, tenant_id TEXT, ticket_id TEXT,
                    action TEXT, occurred_at TEXT, payload TEXT);
                 INSERT INTO audit_events (event_id, payload) VALUES ('a', '{{}}'), ('b', NULL), ('c', '[]');"
            ))
            .unwrap();
            let db = AuditDb::Sqlite(path);
            let mut snapshot = Snapshot::open(&db, Timeouts::all(Duration::from_secs(10))).unwrap();
            let adoption = snapshot.inspect().unwrap().adopt().unwrap();
            assert_eq!(snapshot.scannable(&adoption).unwrap(), scannable, "{name}");
            // Every row, a NULL as empty text.
            let mut rows = Vec::new();
            snapshot
                .scan(|r| -> Result<(), StoreError> {
                    rows.push((r[0].to_owned(), r[5].to_owned()));
                    Ok(())
                })
                .unwrap();
            rows.sort();
            assert_eq!(
                rows,
                [
                    ("a".into(), "{}".into()),
                    ("b".into(), String::new()),
                    ("c".into(), "[]".into())
                ]
            );
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
