//! A replay target opened to read only — a SQLite file opened read-only, a PostgreSQL session in
//! one `READ ONLY` transaction — and the lookups that compare a topic with it: the stored version
//! of a batch of events, and which records a replay quarantined.

use postgres::types::ToSql;

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
                return Err(StoreError::Unavailable(format!(
                    "{db}: no such database file"
                )))
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
            Inner::Postgres(t) => postgres_stored(t, adoption, located, events),
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
/// column types. An event a column type refuses fails the statement; halves of the batch are
/// looked up until it stands alone, and it is [`Lookup::Refused`].
fn postgres_stored(
    target: &mut PostgresTarget,
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
    let arrays: Vec<String> = (1..=REQUIRED_COLUMNS.len())
        .map(|i| format!("${i}::text[]"))
        .collect();
    let sql = format!(
        "SELECT u.ord, a.event_id::text, a.tenant_id::text, a.ticket_id::text, a.action::text,
                a.occurred_at::text, a.payload::text, {location}, {incoming}
         FROM unnest({arrays}) WITH ORDINALITY AS u({columns}, ord)
         JOIN audit_events a ON a.event_id = {key}",
        location = if located {
            "a.topic::text, a.partition::int4, a.record_offset::int8"
        } else {
            "NULL::text, NULL::int4, NULL::int8"
        },
        incoming = if any_cast {
            incoming.join(", ")
        } else {
            "NULL::text, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text".to_owned()
        },
        arrays = arrays.join(", "),
        columns = REQUIRED_COLUMNS.join(", "),
        key = value("event_id"),
    );
    lookup_splitting(target, &sql, any_cast, events)
}

fn lookup_splitting(
    target: &mut PostgresTarget,
    sql: &str,
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
        .and_then(|()| client.query(sql, &params));
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
                    let mut out = lookup_splitting(target, sql, any_cast, left)?;
                    out.extend(lookup_splitting(target, sql, any_cast, right)?);
                    Ok(out)
                }
                _ => Err(StoreError::postgres(&place, e)),
            };
        }
    };
    let mut out = vec![Lookup::Absent; events.len()];
    for r in rows {
        let ord: i64 = r.get(0);
        let row = Lookup::Row {
            stored: Box::new(postgres_event(&r, 1)),
            incoming: any_cast.then(|| Box::new(postgres_event(&r, 10))),
            at: location(r.get(7), r.get(8), r.get(9)),
        };
        if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| out.get_mut(i)) {
            *slot = row;
        }
    }
    Ok(out)
}
