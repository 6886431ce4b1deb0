//! (i) the independent insert-only limit and (b) the replay's own write path alone.

use std::time::{Duration, Instant};

use ticketflow::event::EventRecord;
use ticketflow::store::{
    AuditDb, Backend, Batch, Counters, Entry, PartitionProgress, PlanScope, PlanStatus, PlanWindow,
    RecordedPlan, Timeouts,
};

use super::table::{column_list, Table};
use super::{BATCH_RECORDS, DEFAULT_BATCH, TOPIC};

/// A [`Row`]'s values in the order of the store's own table, as references of the type the
/// caller's binding names: rusqlite's and postgres's `ToSql` are different traits.
macro_rules! row_values {
    ($row:expr) => {{
        let r: &Row = $row;
        let e = &r.event;
        [
            &e.event_id,
            &e.tenant_id,
            &e.ticket_id,
            &e.action,
            &e.occurred_at,
            &e.payload,
            &r.raw,
            &TOPIC,
            &r.partition,
            &r.offset,
            &r.timestamp,
        ]
    }};
}

/// One event as the independent bulk insert writes it: every column of `audit_events`.
pub struct Row {
    pub event: EventRecord,
    pub raw: Vec<u8>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
}

/// (i) on SQLite: a fresh file with the store's own `audit_events`, WAL and synchronous=FULL
/// as the store opens it, every row through one prepared INSERT in one transaction.
pub fn independent_sqlite(path: &std::path::Path, table: Table, rows: &[&Row]) -> Duration {
    let conn = rusqlite::Connection::open(path).expect("sqlite file");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("full");
    conn.execute_batch(&table.create(Backend::Sqlite, "audit_events"))
        .expect("audit_events");
    let k = table.columns();
    let placeholders: Vec<String> = (1..=k).map(|i| format!("?{i}")).collect();
    let started = Instant::now();
    conn.execute_batch("BEGIN").expect("begin");
    {
        let mut insert = conn
            .prepare(&format!(
                "INSERT INTO audit_events ({}) VALUES ({})",
                column_list(k),
                placeholders.join(", ")
            ))
            .expect("prepare");
        for r in rows {
            let values: [&dyn rusqlite::ToSql; 11] = row_values!(r);
            insert.execute(&values[..k]).expect("insert");
        }
    }
    conn.execute_batch("COMMIT").expect("commit");
    started.elapsed()
}

/// (i) on PostgreSQL: a fresh schema with the store's own `audit_events`, every row through one
/// binary COPY in one transaction.
pub fn independent_postgres(url: &str, schema_name: &str, table: Table, rows: &[&Row]) -> Duration {
    use postgres::binary_copy::BinaryCopyInWriter;
    use postgres::types::Type;
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("postgres");
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema_name} CASCADE; CREATE SCHEMA {schema_name};
             SET search_path TO {schema_name}; {}",
            table.create(Backend::Postgres, "audit_events")
        ))
        .expect("audit_events");
    let k = table.columns();
    let started = Instant::now();
    let mut tx = client.transaction().expect("begin");
    {
        let sink = tx
            .copy_in(&format!(
                "COPY audit_events ({}) FROM STDIN BINARY",
                column_list(k)
            ))
            .expect("copy");
        let types = [
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::TEXT,
            Type::BYTEA,
            Type::TEXT,
            Type::INT4,
            Type::INT8,
            Type::INT8,
        ];
        let mut writer = BinaryCopyInWriter::new(sink, &types[..k]);
        for r in rows {
            let values: [&(dyn postgres::types::ToSql + Sync); 11] = row_values!(r);
            writer.write(&values[..k]).expect("copy row");
        }
        writer.finish().expect("copy end");
    }
    tx.commit().expect("commit");
    let elapsed = started.elapsed();
    let _ = client.batch_execute(&format!("DROP SCHEMA {schema_name} CASCADE"));
    elapsed
}

/// (b): the same records into the target through the replay's own write path (decoding,
/// conflict checks, checkpoint and batch row), in batches of the default size, no Kafka.
pub fn insert_only(db: &AuditDb, records: &[Vec<u8>]) -> Duration {
    let mut target = db
        .open_target(Timeouts::all(Duration::from_secs(3600)))
        .expect("target");
    let adoption = target
        .inspect()
        .expect("inspect")
        .adopt()
        .expect("adoptable");
    target.prepare(&adoption).expect("prepare");
    let n = records.len() as i64;
    target
        .record_plan(&RecordedPlan {
            plan_id: "bench-insert".into(),
            topic: TOPIC.into(),
            replay_group: "bench-insert".into(),
            live_group: "bench-live".into(),
            window: PlanWindow::Offsets { start: 0, stop: n },
            created_at: "bench".into(),
            created_by: "bench".into(),
            status: PlanStatus::Running,
            finished_at: None,
            partitions: vec![PartitionProgress {
                partition: 0,
                start: 0,
                stop: n,
                captured_end: n,
                next_offset: 0,
                owner: None,
                counters: Counters::default(),
                updated_at: "bench".into(),
            }],
        })
        .expect("record the plan");
    let ranges = [(0, 0, n)];
    let scope = PlanScope {
        plan_id: "bench-insert",
        topic: TOPIC,
        ranges: &ranges,
        owner: None,
        fail_on_refused: false,
    };
    let started = Instant::now();
    let mut first = 0i64;
    for (i, chunk) in records.chunks(BATCH_RECORDS).enumerate() {
        // As the replay does: batches share a transaction of DEFAULT_BATCH records.
        if i % (DEFAULT_BATCH / BATCH_RECORDS) == 0 {
            if i > 0 {
                target.commit().expect("commit");
            }
            target.begin().expect("begin");
        }
        let entries: Vec<Entry<'_>> = chunk
            .iter()
            .enumerate()
            .map(|(i, raw)| Entry {
                topic: TOPIC,
                partition: 0,
                offset: first + i as i64,
                timestamp: None,
                raw,
                decoded: EventRecord::decode(raw).map_err(|e| e.to_string()),
            })
            .collect();
        let next = first + entries.len() as i64;
        target
            .write_batch(
                &scope,
                &Batch {
                    partition: 0,
                    first,
                    next,
                    entries,
                    markers: 0,
                    aborted: 0,
                },
            )
            .expect("write_batch");
        first = next;
    }
    target.commit().expect("commit");
    started.elapsed()
}
