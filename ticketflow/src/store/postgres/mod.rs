//! The audit store on PostgreSQL — the same rule as SQLite: only the conflict on `event_id` is
//! a duplicate — and a PostgreSQL database as a replay target, adopted as found. Every
//! connection is bounded in time from the first byte (a server that accepts and never
//! answers included) and speaks TLS as the URL's `sslmode` says.

use std::error::Error as _;
use std::sync::mpsc;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, Config, GenericClient, NoTls, Transaction};

use super::audit_db::{ReplayTarget, Timeouts};
use super::batch::{
    self, BatchTx, Conflict, Fault, Location, PlanScope, Quarantine, StoredVersion,
};
use super::inspect::{Adoption, AuditTable, Column, Inspection};
use super::ledger::{
    now, Batch, Claim, Counters, Entry, PartitionProgress, PlanStatus, PlanWindow, RecordedPlan,
    Recording, WriteError,
};
use super::schema::{self, payload_column, BOOKKEEPING, LEGACY, RECORD_COLUMNS, REQUIRED_COLUMNS};
use super::tls::ConnectSpec;
use super::{AuditStore, Backend, StoreError};
use crate::event::{AuditEvent, EventRecord};

/// Where a PostgreSQL target lives, without its password: for messages.
pub fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgres {host}:{port}/{db}")
}

/// The error and its causes in one line (a TLS failure says why the handshake failed).
fn chain(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} {}", db.code().code(), db.message());
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Connects to `url` within `timeout` — TCP, TLS and the server's first answers together:
/// the client library bounds only the TCP connect, so the attempt runs on a thread of its own
/// and is abandoned (its socket closed when the attempt ends) when the time is up. Then
/// statements and lock waits are bounded by `statement`. Returns the client and where it is.
pub fn connect_bounded(
    url: &str,
    timeout: Duration,
    statement: Duration,
) -> Result<(Client, String), StoreError> {
    let spec = ConnectSpec::parse(url).map_err(|e| StoreError::InvalidUrl {
        reason: e.to_string(),
    })?;
    let place = describe(&spec.config);
    let fail = |reason: String| StoreError::Connect {
        place: place.clone(),
        reason,
    };
    let timeout = spec
        .config
        .get_connect_timeout()
        .map_or(timeout, |asked| timeout.min(*asked))
        .max(Duration::from_millis(100));
    let connector = spec.connector().map_err(|e| fail(e.to_string()))?;
    let mut config = spec.config.clone();
    config
        .connect_timeout(timeout)
        .tcp_user_timeout(timeout)
        .keepalives_idle(Duration::from_secs(30))
        .application_name("lessonprobe");
    let (send, receive) = mpsc::channel();
    std::thread::Builder::new()
        .name("postgres-connect".into())
        .spawn(move || {
            let result = match connector {
                Some(tls) => config.connect(tls),
                None => config.connect(NoTls),
            };
            // The receiver is gone when the attempt outlived its time: the client drops here.
            let _ = send.send(result);
        })
        .map_err(|e| fail(format!("starting the connection: {e}")))?;
    let mut client = match receive.recv_timeout(timeout) {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => return Err(fail(chain(&e))),
        Err(_) => {
            return Err(fail(format!(
                "no answer within {} s: the server accepted the connection but did not answer (is a PostgreSQL server listening there, and is it alive?)",
                timeout.as_secs_f64()
            )))
        }
    };
    let ms = statement.as_millis().clamp(1, i32::MAX as u128);
    client
        .batch_execute(&format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {ms}; SET idle_in_transaction_session_timeout = {}",
            ms.max(60_000)
        ))
        .map_err(|e| StoreError::postgres(&place, e))?;
    Ok((client, place))
}

/// Connects to `url` within `timeout`; statements are bounded by the same time.
pub fn connect(url: &str, timeout: Duration) -> Result<(Client, String), StoreError> {
    connect_bounded(url, timeout, Duration::from_secs(300).max(timeout))
}

pub struct PostgresAuditStore {
    client: Client,
    place: String,
}

/// Creates `audit_events` in the current schema unless the search path finds one.
fn ensure_audit_table(client: &mut Client, place: &str) -> Result<(), StoreError> {
    client
        .batch_execute(&schema::audit_events(Backend::Postgres).replacen(
            "CREATE TABLE",
            "CREATE TABLE IF NOT EXISTS",
            1,
        ))
        .map_err(|e| StoreError::postgres(place, e))
}

impl PostgresAuditStore {
    /// Connects to an existing database (its default search_path) and creates `audit_events`
    /// when it is absent; nothing else is created and nothing is dropped.
    pub fn open(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        ensure_audit_table(&mut client, &place)?;
        Ok(PostgresAuditStore { client, place })
    }

    /// As [`open`](Self::open), inside `schema`, which must exist: the store's table and
    /// every statement it runs live there.
    pub fn open_in_schema(url: &str, schema: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        client
            .batch_execute(&format!("SET search_path TO {}", quote_ident(schema)))
            .map_err(|e| StoreError::postgres(&place, e))?;
        ensure_audit_table(&mut client, &place)?;
        Ok(PostgresAuditStore { client, place })
    }

    /// The connection, for effects a caller adds in the same transaction as an audit row.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }

    /// Host, port and database, without the password: for messages.
    pub fn place(&self) -> &str {
        &self.place
    }
}

impl AuditStore for PostgresAuditStore {
    fn apply_once(&mut self, event: &AuditEvent) -> Result<bool, StoreError> {
        let place = self.place.clone();
        // Its own transaction (autocommit); ON CONFLICT (event_id) only: every other
        // constraint error (23502 NOT NULL, 23514 CHECK, ...) propagates.
        insert_audit(&mut self.client, event).map_err(|e| StoreError::postgres(&place, e))
    }

    fn audit_rows(&mut self) -> Result<u64, StoreError> {
        let place = self.place.clone();
        let row = self
            .client
            .query_one("SELECT COUNT(*) FROM audit_events", &[])
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(row.get::<_, i64>(0) as u64)
    }
}

/// Inserts the audit row unless its `event_id` exists (ON CONFLICT (event_id) only); `true`
/// when inserted. Public so a caller may add effects of its own in the same transaction.
pub fn insert_audit(
    client: &mut impl GenericClient,
    event: &AuditEvent,
) -> Result<bool, postgres::Error> {
    let payload = payload_column(event);
    let n = client.execute(
        "INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (event_id) DO NOTHING",
        &[
            &event.event_id,
            &event.tenant_id,
            &event.ticket_id,
            &event.action,
            &event.occurred_at,
            &payload,
        ],
    )?;
    Ok(n == 1)
}

/// `name` as a PostgreSQL identifier, quoted.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl StoreError {
    /// A failure of the PostgreSQL client at `place`: the server's SQLSTATE when it answered.
    pub fn postgres(place: &str, e: postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(db) => StoreError::Postgres {
                code: db.code().code().to_owned(),
                message: format!("{}: {}", place, db.message()),
            },
            None => StoreError::Lost {
                place: place.to_owned(),
                reason: chain(&e),
            },
        }
    }
}

/// A PostgreSQL database as a replay's target.
pub struct PostgresTarget {
    client: Client,
    place: String,
    adoption: Option<Adoption>,
    copy: CopyState,
    /// A transaction opened by `begin` is open.
    shared: bool,
}

/// How the rows of a batch reach `audit_events`, kept across the connection's batches.
#[derive(Debug, Default)]
struct CopyState {
    /// Every written column has exactly the type the store would create, so the rows may be
    /// copied in directly (binary COPY carries no conversions).
    direct_fits: bool,
    /// A number per staged call, so rows of earlier calls in the same transaction stay apart.
    calls: i32,
    /// Direct copies to leave out after one met an existing row, and how many the next miss
    /// leaves out (doubling to 64): a topic with redeliveries goes the staged way.
    skip: u32,
    backoff: u32,
    /// The session may create the temporary staging table. A role without the TEMP privilege
    /// sends the rows as arrays instead (`unnest`), a little slower.
    staging: bool,
}

impl PostgresTarget {
    pub fn open(url: &str, timeouts: Timeouts) -> Result<Self, StoreError> {
        let (client, place) = connect_bounded(url, timeouts.connect, timeouts.statement)?;
        Ok(PostgresTarget {
            client,
            place,
            adoption: None,
            copy: CopyState::default(),
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
        "INSERT INTO lessonprobe_replay_plans (plan_id, topic, replay_group, live_group,
            window_kind, since_ms, until_ms, start_offset, stop_offset, partitions, created_at,
            created_by, status, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULL)",
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
            "INSERT INTO lessonprobe_replay_partitions (plan_id, partition, start_offset,
                stop_offset, captured_end, next_offset, owner, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
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
        let mut columns: Vec<&str> = REQUIRED_COLUMNS.to_vec();
        columns.extend(adoption.record_columns.iter().copied());
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
        self.copy = CopyState {
            direct_fits: self.copies_directly(adoption)?,
            staging,
            ..CopyState::default()
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
            .query(
                "SELECT plan_id, topic, replay_group, live_group, window_kind, since_ms, until_ms,
                        start_offset, stop_offset, created_at, created_by, status, finished_at
                 FROM lessonprobe_replay_plans ORDER BY created_at, plan_id",
                &[],
            )
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
                .query(
                    "SELECT partition, start_offset, stop_offset, captured_end, next_offset, owner,
                            records, inserted, duplicates, conflicts, quarantined, markers, aborted,
                            updated_at
                     FROM lessonprobe_replay_partitions WHERE plan_id = $1 ORDER BY partition",
                    &[&plan.plan_id],
                )
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
                "SELECT plan_id FROM lessonprobe_replay_plans WHERE plan_id = $1 OR replay_group = $2
                 ORDER BY plan_id = $1 DESC LIMIT 1",
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

    fn claim_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<Option<Claim>, StoreError> {
        // A finished partition keeps the owner that finished it. The row lock waits for a
        // batch of the partition in flight, so the checkpoint read is the one after it.
        let place = self.place.clone();
        Ok(self
            .client
            .query_opt(
                "UPDATE lessonprobe_replay_partitions
                 SET owner = CASE WHEN next_offset < stop_offset THEN $3 ELSE owner END,
                     updated_at = CASE WHEN next_offset < stop_offset THEN $4 ELSE updated_at END
                 WHERE plan_id = $1 AND partition = $2
                 RETURNING next_offset, stop_offset",
                &[&plan_id, &partition, &owner, &now()],
            )
            .map_err(|e| StoreError::postgres(&place, e))?
            .map(|r| Claim {
                next_offset: r.get(0),
                stop: r.get(1),
            }))
    }

    fn release_partition(
        &mut self,
        plan_id: &str,
        partition: i32,
        owner: &str,
    ) -> Result<(), StoreError> {
        let place = self.place.clone();
        self.client
            .execute(
                "UPDATE lessonprobe_replay_partitions SET owner = NULL, updated_at = $4
                 WHERE plan_id = $1 AND partition = $2 AND owner = $3 AND next_offset < stop_offset",
                &[&plan_id, &partition, &owner, &now()],
            )
            .map(drop)
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn claim(&mut self, plan_id: &str, owner: &str) -> Result<(), StoreError> {
        let place = self.place.clone();
        let wrap = |e| StoreError::postgres(&place, e);
        let mut tx = self.client.transaction().map_err(wrap)?;
        tx.execute(
            "UPDATE lessonprobe_replay_partitions SET owner = $2, updated_at = $3 WHERE plan_id = $1",
            &[&plan_id, &owner, &now()],
        )
        .map_err(wrap)?;
        tx.execute(
            "UPDATE lessonprobe_replay_plans SET status = 'running', finished_at = NULL WHERE plan_id = $1",
            &[&plan_id],
        )
        .map_err(wrap)?;
        tx.commit().map_err(wrap)
    }

    fn finish(&mut self, plan_id: &str, status: PlanStatus) -> Result<(), StoreError> {
        let place = self.place.clone();
        self.client
            .execute(
                "UPDATE lessonprobe_replay_plans SET status = $2, finished_at = $3 WHERE plan_id = $1",
                &[&plan_id, &status.as_str(), &now()],
            )
            .map(drop)
            .map_err(|e| StoreError::postgres(&place, e))
    }

    fn conflicts_by_partition(&mut self, plan_id: &str) -> Result<Vec<(i32, u64)>, StoreError> {
        let place = self.place.clone();
        Ok(self
            .client
            .query(
                "SELECT incoming_partition, COUNT(*) FROM lessonprobe_replay_conflicts
                 WHERE plan_id = $1 GROUP BY incoming_partition ORDER BY 1",
                &[&plan_id],
            )
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
                copy: &mut self.copy,
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

/// The batch operations on one open PostgreSQL transaction.
struct PgTx<'c, 's> {
    tx: &'c mut Client,
    adoption: &'s Adoption,
    place: &'s str,
    copy: &'s mut CopyState,
}

/// Rows on their way in, in the types the replay sends: COPY has no ON CONFLICT, so a batch is
/// copied here and moved on with one `INSERT … SELECT … ON CONFLICT (event_id) DO NOTHING`.
/// Temporary (no WAL, this session only) and emptied by every commit.
const STAGE: &str = "CREATE TEMPORARY TABLE IF NOT EXISTS lessonprobe_replay_stage (
    call int4 NOT NULL, ord int8 NOT NULL, event_id text, tenant_id text, ticket_id text,
    action text, occurred_at text, payload text, record bytea, topic text, partition int4,
    record_offset int8, record_timestamp int8) ON COMMIT DELETE ROWS";

/// The type a written column has in the table the store creates, as binary COPY sends it.
fn copy_type(column: &str) -> postgres::types::Type {
    use postgres::types::Type;
    match column {
        "record" => Type::BYTEA,
        "partition" => Type::INT4,
        "record_offset" | "record_timestamp" => Type::INT8,
        _ => Type::TEXT,
    }
}

/// Each record's values for the audit columns, as arrays for `unnest`.
struct Columns {
    text: [Vec<String>; 6],
    record: Vec<Vec<u8>>,
    topic: Vec<String>,
    partition: Vec<i32>,
    offset: Vec<i64>,
    timestamp: Vec<Option<i64>>,
}

impl Columns {
    fn of(rows: &[&Entry<'_>]) -> Columns {
        let mut c = Columns {
            text: Default::default(),
            record: Vec::with_capacity(rows.len()),
            topic: Vec::with_capacity(rows.len()),
            partition: Vec::with_capacity(rows.len()),
            offset: Vec::with_capacity(rows.len()),
            timestamp: Vec::with_capacity(rows.len()),
        };
        for entry in rows {
            let Ok(e) = &entry.decoded else { continue };
            for (column, v) in c.text.iter_mut().zip(e.columns()) {
                column.push(v.to_owned());
            }
            c.record.push(entry.raw.to_vec());
            c.topic.push(entry.topic.to_owned());
            c.partition.push(entry.partition);
            c.offset.push(entry.offset);
            c.timestamp.push(entry.timestamp);
        }
        c
    }

    /// The parameters in the order of [`PgTx::unnest`]'s placeholders.
    fn params<'a>(&'a self, adoption: &Adoption) -> Vec<&'a (dyn ToSql + Sync)> {
        let mut params: Vec<&(dyn ToSql + Sync)> =
            self.text.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        for column in &adoption.record_columns {
            params.push(match *column {
                "record" => &self.record,
                "topic" => &self.topic,
                "partition" => &self.partition,
                "record_offset" => &self.offset,
                _ => &self.timestamp,
            });
        }
        params
    }
}

/// The event a row holds in six text columns from `first` on, in the order of
/// `schema::REQUIRED_COLUMNS` (NULL read as empty).
pub(super) fn stored_event(r: &postgres::Row, first: usize) -> EventRecord {
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

    /// Binary COPY of the decoded rows: into `audit_events` itself (`call` is `None`), or into
    /// the staging table under `call`, each with its 1-based position in `rows`.
    fn copy_rows(&mut self, call: Option<i32>, rows: &[&Entry<'_>]) -> Result<(), Fault> {
        use postgres::binary_copy::BinaryCopyInWriter;
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
        for c in REQUIRED_COLUMNS
            .iter()
            .chain(adoption.record_columns.iter())
        {
            columns.push(c);
            types.push(copy_type(c));
        }
        let table = match call {
            Some(_) => "pg_temp.lessonprobe_replay_stage",
            None => "audit_events",
        };
        let sink = self
            .tx
            .copy_in(&format!(
                "COPY {table} ({}) FROM STDIN BINARY",
                columns.join(", ")
            ))
            .map_err(fault)?;
        let mut writer = BinaryCopyInWriter::new(sink, &types);
        let call = call.unwrap_or_default();
        for (i, entry) in rows.iter().enumerate() {
            let Ok(e) = &entry.decoded else { continue };
            let ord = i as i64 + 1;
            let mut values: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(columns.len());
            if columns[0] == "call" {
                values.extend([&call as &(dyn ToSql + Sync), &ord]);
            }
            values.extend([
                &e.event_id as &(dyn ToSql + Sync),
                &e.tenant_id,
                &e.ticket_id,
                &e.action,
                &e.occurred_at,
                &e.payload,
            ]);
            for column in &adoption.record_columns {
                values.push(match *column {
                    "record" => &entry.raw,
                    "topic" => &entry.topic,
                    "partition" => &entry.partition,
                    "record_offset" => &entry.offset,
                    _ => &entry.timestamp,
                });
            }
            writer.write(&values).map_err(fault)?;
        }
        writer.finish().map_err(fault)?;
        Ok(())
    }

    fn columns(&self) -> Vec<&'static str> {
        let mut columns = REQUIRED_COLUMNS.to_vec();
        columns.extend(self.adoption.record_columns.iter().copied());
        columns
    }

    /// `unnest($1::text[], …) WITH ORDINALITY AS u(event_id, …, ord)` over the written columns;
    /// with `places`, each row's `ord` is one more array (its place in the batch) instead of
    /// counted: `unnest($1::text[], …, $N::int8[]) AS u(event_id, …, ord)`.
    fn unnest(&self, places: bool) -> String {
        let columns = self.columns();
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

impl BatchTx for PgTx<'_, '_> {
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
        if self.copy.direct_fits && self.copy.skip == 0 {
            self.tx
                .batch_execute("SAVEPOINT lp_copy")
                .map_err(|e| Fault::Infra(self.err(e)))?;
            match self.copy_rows(None, rows) {
                Ok(()) => {
                    self.tx
                        .batch_execute("RELEASE SAVEPOINT lp_copy")
                        .map_err(|e| Fault::Infra(self.err(e)))?;
                    self.copy.backoff = 0;
                    return Ok(decoded);
                }
                Err(Fault::Infra(e)) => return Err(Fault::Infra(e)),
                Err(Fault::Data(_)) => {
                    self.tx
                        .batch_execute("ROLLBACK TO SAVEPOINT lp_copy; RELEASE SAVEPOINT lp_copy")
                        .map_err(|e| Fault::Infra(self.err(e)))?;
                    self.copy.backoff = (self.copy.backoff * 2).clamp(1, 64);
                    self.copy.skip = self.copy.backoff;
                }
            }
        } else {
            self.copy.skip = self.copy.skip.saturating_sub(1);
        }
        // The rows, numbered by their place in `rows`: staged by binary COPY under a call
        // number, or (without the TEMP privilege) sent as arrays with their places.
        let columns = self.columns();
        let call = if self.copy.staging {
            self.copy.calls += 1;
            self.copy_rows(Some(self.copy.calls), rows)?;
            Some(self.copy.calls)
        } else {
            None
        };
        let (data, places): (Columns, Vec<i64>);
        let (source, mut params): (String, Vec<&(dyn ToSql + Sync)>) = match &call {
            Some(call) => (
                "pg_temp.lessonprobe_replay_stage u WHERE u.call = $1".to_owned(),
                vec![call],
            ),
            None => {
                data = Columns::of(rows);
                places = (1..)
                    .zip(rows)
                    .filter(|(_, e)| e.decoded.is_ok())
                    .map(|(i, _)| i)
                    .collect();
                let mut params = data.params(self.adoption);
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
        let data = Columns::of(rows);
        let params = data.params(self.adoption);
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
        let columns = self.columns();
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
        let data = Columns::of(&[row]);
        let params = data.params(self.adoption);
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
                "INSERT INTO lessonprobe_replay_quarantine (plan_id, topic, partition,
                    record_offset, record, reason, quarantined_at)
                 SELECT $1::text, u.*, $7::text FROM unnest($2::text[], $3::int4[], $4::int8[], $5::bytea[], $6::text[]) AS u",
                &[&plan_id, &topics, &partitions, &offsets, &raws, &reasons, &now()],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn conflicts(&mut self, plan_id: &str, conflicts: &[Conflict]) -> Result<(), StoreError> {
        let at = now();
        for c in conflicts {
            self.tx
                .execute(
                    "INSERT INTO lessonprobe_replay_conflicts (plan_id, event_id, stored_topic,
                        stored_partition, stored_offset, stored_hash, incoming_topic,
                        incoming_partition, incoming_offset, incoming_hash, found_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT DO NOTHING",
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

    fn advance(
        &mut self,
        plan_id: &str,
        batch: &Batch<'_>,
        c: &Counters,
        owner: Option<&str>,
    ) -> Result<Option<Option<i64>>, StoreError> {
        let n = self
            .tx
            .execute(
                "UPDATE lessonprobe_replay_partitions SET next_offset = $4, records = records + $5,
                    inserted = inserted + $6, duplicates = duplicates + $7,
                    conflicts = conflicts + $8, quarantined = quarantined + $9,
                    markers = markers + $10, aborted = aborted + $11, updated_at = $12
                 WHERE plan_id = $1 AND partition = $2 AND next_offset = $3
                   AND ($13::text IS NULL OR owner = $13)",
                &[
                    &plan_id,
                    &batch.partition,
                    &batch.first,
                    &batch.next,
                    &(c.records as i64),
                    &(c.inserted as i64),
                    &(c.duplicates as i64),
                    &(c.conflicts as i64),
                    &(c.quarantined as i64),
                    &(c.markers as i64),
                    &(c.aborted as i64),
                    &now(),
                    &owner,
                ],
            )
            .map_err(|e| self.err(e))?;
        if n == 1 {
            return Ok(None);
        }
        let found = self
            .tx
            .query_opt(
                "SELECT next_offset FROM lessonprobe_replay_partitions WHERE plan_id = $1 AND partition = $2",
                &[&plan_id, &batch.partition],
            )
            .map_err(|e| self.err(e))?
            .map(|r| r.get(0));
        Ok(Some(found))
    }

    fn record_batch(
        &mut self,
        plan_id: &str,
        batch: &Batch<'_>,
        owner: Option<&str>,
    ) -> Result<(), StoreError> {
        self.tx
            .execute(
                "INSERT INTO lessonprobe_replay_batches (plan_id, partition, first_offset,
                    next_offset, records, owner, applied_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &plan_id,
                    &batch.partition,
                    &batch.first,
                    &batch.next,
                    &(batch.entries.len() as i64),
                    &owner,
                    &now(),
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/audit"
            .parse()
            .unwrap();
        assert_eq!(describe(&config), "postgres db.example:6543/audit");
    }
}
