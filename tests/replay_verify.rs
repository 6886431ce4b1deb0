//! `lessonprobe replay verify` against `lessonprobe broker` and a replayed audit table on SQLite
//! and PostgreSQL (a foreign, typed table there): a clean window, rows deleted and altered,
//! an action wrapped again under a new event_id, undecodable records in and out of the
//! quarantine — and, read back, not one consumer-group commit and not one row changed.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::*;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use serde_json::Value;

const LIVE: &str = "live-verify";
const GROUP: &str = "replay-verify";
const SINCE: &str = "2026-09-22T00:00:00Z";
const UNTIL: &str = "2026-09-23T00:00:00Z";
const IN_WINDOW_MS: i64 = 1_789_948_800_000 + 86_400_000 + 3_600_000;
const PARTITIONS: i32 = 4;
/// Every consumer group the replay, the verification and the test use.
const GROUPS: [&str; 4] = [
    LIVE,
    GROUP,
    "lessonprobe-verify",
    "lessonprobe-verify-no-live-group",
];

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn window(cmd: &mut Command, servers: &str, topic: &str, db: &str) {
    cmd.args([
        "--kafka", servers, "--topic", topic, "--db", db, "--since", SINCE, "--until", UNTIL,
    ]);
}

fn replay(servers: &str, topic: &str, db: &str) -> Output {
    let mut cmd = lessonprobe(&std::env::temp_dir());
    cmd.arg("replay");
    window(&mut cmd, servers, topic, db);
    cmd.args([
        "--live-group",
        LIVE,
        "--replay-group",
        GROUP,
        "--execute",
        "--allow-quarantine",
        "--deadline",
        "60s",
    ]);
    cmd.output().unwrap()
}

fn verify(servers: &str, topic: &str, db: &str, extra: &[&str]) -> Output {
    let mut cmd = lessonprobe(&std::env::temp_dir());
    cmd.args(["replay", "verify"]);
    window(&mut cmd, servers, topic, db);
    cmd.args(["--deadline", "60s"]).args(extra);
    cmd.output().unwrap()
}

/// `verify --format json`: the exit code and the document.
fn verify_json(servers: &str, topic: &str, db: &str) -> (Option<i32>, Value) {
    let out = verify(
        servers,
        topic,
        db,
        &["--format", "json", "--live-group", LIVE],
    );
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out)));
    (out.status.code(), doc)
}

fn event(id: &str, ticket: &str, payload: &str) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{id}","tenant_id":"tenant-a","ticket_id":"{ticket}","action":"ticket.updated","occurred_at":"2026-09-22T10:00:00+00:00","payload":{payload}}}"#
    )
    .into_bytes()
}

/// 200 events over the partitions, two records that are not events, and ticket 7's action
/// wrapped again under a new event_id.
fn sample() -> Vec<(i32, Vec<u8>)> {
    let mut records: Vec<(i32, Vec<u8>)> = (0..200)
        .map(|i| {
            (
                i % PARTITIONS,
                event(
                    &format!("e-{i}"),
                    &format!("t-{i}"),
                    &format!(r#"{{"version":{i}}}"#),
                ),
            )
        })
        .collect();
    records.push((1, b"not json".to_vec()));
    records.push((2, br#"{"event_id":"x"}"#.to_vec()));
    records.push((3, event("e-7-rewrapped", "t-7", r#"{"version": 7}"#)));
    records
}

fn produce(servers: &str, topic: &str, records: &[(i32, Vec<u8>)]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", servers)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for (i, (partition, payload)) in records.iter().enumerate() {
        let key = format!("k{i}");
        let record = BaseRecord::to(topic)
            .partition(*partition)
            .key(&key)
            .payload(payload)
            .timestamp(IN_WINDOW_MS + i as i64);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn committed_everywhere(servers: &str, topic: &str) -> Vec<Vec<Option<i64>>> {
    GROUPS
        .iter()
        .map(|g| committed(servers, g, topic, PARTITIONS))
        .collect()
}

/// The database a test reads and changes behind the verification's back.
trait Db {
    fn arg(&self) -> String;
    fn exec(&self, sql: &str);
    /// Every row of every table, as text: equal before and after means nothing changed.
    fn everything(&self) -> String;
}

struct Sqlite(std::path::PathBuf);

impl Db for Sqlite {
    fn arg(&self) -> String {
        format!("sqlite:{}", self.0.display())
    }
    fn exec(&self, sql: &str) {
        rusqlite::Connection::open(&self.0)
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    }
    fn everything(&self) -> String {
        let conn = rusqlite::Connection::open(&self.0).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut all = String::new();
        for t in tables {
            let mut stmt = conn
                .prepare(&format!("SELECT * FROM {t} ORDER BY 1, 2, 3"))
                .unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            all.push_str(&format!("[{t}]\n"));
            while let Some(r) = rows.next().unwrap() {
                for i in 0..n {
                    all.push_str(&format!("{:?}|", r.get_ref(i).unwrap()));
                }
                all.push('\n');
            }
        }
        all
    }
}

struct Postgres {
    admin: String,
    name: String,
}

impl Postgres {
    fn create(admin: &str) -> Postgres {
        let name = format!("lp_t_verify_{}", std::process::id());
        let mut client = postgres::Client::connect(admin, postgres::NoTls).unwrap();
        // One statement per call: DROP and CREATE DATABASE refuse a transaction block.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            client.batch_execute(&sql).unwrap();
        }
        let db = Postgres {
            admin: admin.to_owned(),
            name,
        };
        // A table a team made itself: typed columns, its own id, a unique index on event_id.
        db.exec(
            "CREATE TABLE audit_events (
                id          BIGSERIAL PRIMARY KEY,
                event_id    VARCHAR(64) NOT NULL,
                tenant_id   TEXT NOT NULL,
                ticket_id   TEXT NOT NULL,
                action      TEXT NOT NULL,
                occurred_at TIMESTAMPTZ NOT NULL,
                payload     JSONB NOT NULL,
                source      TEXT NOT NULL DEFAULT 'live'
            );
            CREATE UNIQUE INDEX audit_events_event_uq ON audit_events (event_id);",
        );
        db
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.arg(), postgres::NoTls).unwrap()
    }
}

impl Db for Postgres {
    fn arg(&self) -> String {
        let (base, _) = self.admin.rsplit_once('/').unwrap();
        format!("{base}/{}", self.name)
    }
    fn exec(&self, sql: &str) {
        self.client().batch_execute(sql).unwrap();
    }
    fn everything(&self) -> String {
        let mut client = self.client();
        let tables: Vec<String> = client
            .query(
                "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = current_schema() ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut all = String::new();
        for t in tables {
            let row = client
                .query_one(
                    &format!("SELECT COALESCE(string_agg(t::text, E'\\n' ORDER BY t::text), '') FROM {t} t"),
                    &[],
                )
                .unwrap();
            all.push_str(&format!("[{t}]\n{}\n", row.get::<_, String>(0)));
        }
        all
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

fn ids(doc: &Value, kind: &str) -> Vec<String> {
    let mut ids: Vec<String> = doc["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| d["event_id"].as_str().unwrap_or("-").to_owned())
        .collect();
    ids.sort();
    ids
}

fn total(doc: &Value, field: &str) -> u64 {
    doc["total"][field].as_u64().unwrap()
}

/// Runs `verify` and checks that it changed no row and committed no offset.
fn verify_read_only(servers: &str, topic: &str, db: &dyn Db) -> (Option<i32>, Value) {
    let (rows, offsets) = (db.everything(), committed_everywhere(servers, topic));
    let result = verify_json(servers, topic, &db.arg());
    assert_eq!(db.everything(), rows, "verify changed the database");
    assert_eq!(
        committed_everywhere(servers, topic),
        offsets,
        "verify committed offsets"
    );
    result
}

/// The whole story on one database: replayed and clean; then 3 rows deleted, 1 payload
/// altered and 1 quarantine row removed behind its back.
fn scenario(db: &dyn Db, altered_payload: &str) {
    let broker = BrokerProcess::start(&["--sample-day", "unused", "--events", "1"]);
    let s = &broker.servers;
    let topic = "verify";
    produce(s, topic, &sample());
    let out = replay(s, topic, &db.arg());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    commit(s, LIVE, topic, &[10, 10, 10, 10]);

    let (code, doc) = verify_read_only(s, topic, db);
    assert_eq!(code, Some(0), "{doc:#}");
    assert_eq!(doc["clean"], true);
    let counts: Vec<u64> = [
        "records",
        "decodable",
        "distinct_event_ids",
        "undecodable",
        "quarantined",
        "missing",
        "mismatched",
        "duplicated_facts",
    ]
    .iter()
    .map(|f| total(&doc, f))
    .collect();
    assert_eq!(counts, [203, 201, 201, 2, 2, 0, 0, 1], "{doc:#}");
    assert_eq!(ids(&doc, "duplicated_facts"), ["e-7-rewrapped"]);
    let rewrapped = doc["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "duplicated_facts")
        .unwrap();
    assert!(
        rewrapped["detail"]
            .as_str()
            .unwrap()
            .contains("as event_id e-7 "),
        "{rewrapped}"
    );
    assert_eq!(
        doc["discrepancies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"] == "undecodable" && d["quarantined"] == true)
            .count(),
        2
    );
    // The replay's plan covers every partition of the window, complete.
    let plans = doc["plans"].as_array().unwrap();
    assert_eq!(plans.len(), PARTITIONS as usize, "{doc:#}");
    assert!(plans
        .iter()
        .all(|p| p["covers"] == true && p["remaining"] == 0 && p["status"] == "complete"));
    // The live group's offsets and lag, against the partitions' ends.
    let ends: Vec<i64> = watermarks(s, topic).iter().map(|w| w.1).collect();
    for (p, live) in doc["live"].as_array().unwrap().iter().enumerate() {
        assert_eq!(live["committed"], 10);
        assert_eq!(live["lag"].as_i64(), Some(ends[p] - 10), "{live}");
    }
    let table = verify(s, topic, &db.arg(), &[]);
    assert_eq!(table.status.code(), Some(0), "{}", text(&table));
    assert!(
        text(&table).contains("CLEAN: every one of the 201 distinct events"),
        "{}",
        text(&table)
    );

    // Behind its back: three rows gone, one payload altered, one quarantine row gone.
    db.exec(&format!(
        "DELETE FROM audit_events WHERE event_id IN ('e-10', 'e-21', 'e-199');
         UPDATE audit_events SET payload = {altered_payload} WHERE event_id = 'e-42';
         DELETE FROM lessonprobe_replay_quarantine WHERE partition = 1;"
    ));
    let (code, doc) = verify_read_only(s, topic, db);
    assert_eq!(code, Some(6), "{doc:#}");
    assert_eq!(doc["clean"], false);
    assert_eq!(ids(&doc, "missing"), ["e-10", "e-199", "e-21"], "{doc:#}");
    assert_eq!(ids(&doc, "mismatched"), ["e-42"], "{doc:#}");
    let mismatch = doc["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "mismatched")
        .unwrap();
    assert!(
        mismatch["detail"]
            .as_str()
            .unwrap()
            .contains("differs in payload"),
        "{mismatch}"
    );
    assert_eq!(
        (
            total(&doc, "missing"),
            total(&doc, "mismatched"),
            total(&doc, "quarantined")
        ),
        (3, 1, 1)
    );
    let p1 = &doc["partitions"][1];
    assert_eq!(
        (p1["undecodable"].as_u64(), p1["quarantined"].as_u64()),
        (Some(1), Some(0))
    );
    let not_quarantined = doc["discrepancies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "undecodable" && d["partition"] == 1)
        .unwrap();
    assert_eq!(not_quarantined["quarantined"], false);
    assert!(not_quarantined["detail"]
        .as_str()
        .unwrap()
        .contains("not in the quarantine table"));

    // The table shows two examples per kind and says where the rest are; CSV lists them all.
    let table = verify(s, topic, &db.arg(), &["--limit", "2"]);
    let said = text(&table);
    assert_eq!(table.status.code(), Some(6), "{said}");
    assert!(
        said.contains("missing: 3 (the first 2; --format json or csv lists all)"),
        "{said}"
    );
    assert!(
        said.contains("DISCREPANCIES: 3 event(s) of the window missing"),
        "{said}"
    );
    let csv = verify(s, topic, &db.arg(), &["--format", "csv"]);
    assert_eq!(csv.status.code(), Some(6), "{}", text(&csv));
    let mut reader = ::csv::Reader::from_reader(csv.stdout.as_slice());
    assert_eq!(
        reader.headers().unwrap(),
        vec![
            "kind",
            "partition",
            "offset",
            "event_id",
            "quarantined",
            "detail"
        ]
    );
    let kinds: Vec<String> = reader.records().map(|r| r.unwrap()[0].to_owned()).collect();
    assert_eq!(
        kinds,
        [
            "missing",
            "missing",
            "missing",
            "mismatched",
            "duplicated_facts",
            "undecodable",
            "undecodable"
        ]
    );
}

#[test]
fn sqlite_a_replayed_window_verifies_clean_and_every_change_behind_its_back_is_found() {
    let dir = tempfile::tempdir().unwrap();
    scenario(
        &Sqlite(dir.path().join("audit.db")),
        r#"'{"version":4242}'"#,
    );
}

#[test]
fn postgres_a_foreign_typed_table_verifies_clean_and_every_change_behind_its_back_is_found() {
    let Some(admin) = service("LESSONPROBE_TEST_POSTGRES", "a PostgreSQL server") else {
        return;
    };
    let db = Postgres::create(&admin);
    scenario(&db, r#"'{"version": 4242}'::jsonb"#);
}

#[test]
fn a_table_it_cannot_compare_with_is_refused_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nokey.db");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "CREATE TABLE audit_events (event_id TEXT, tenant_id TEXT, ticket_id TEXT, action TEXT, occurred_at TEXT, payload TEXT)",
        )
        .unwrap();
    // No broker listens here: a refusal naming the table shows the table was looked at first.
    let nowhere = "127.0.0.1:1";
    let out = verify(nowhere, "t", &format!("sqlite:{}", file.display()), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        text(&out)
            .contains("CREATE UNIQUE INDEX audit_events_event_id_key ON audit_events (event_id);"),
        "{}",
        text(&out)
    );
    let missing = dir.path().join("absent.db");
    let out = verify(nowhere, "t", &format!("sqlite:{}", missing.display()), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        text(&out).contains("no such database file"),
        "{}",
        text(&out)
    );
    assert!(!missing.exists(), "verify created the database file");
}

#[test]
fn an_unreplayed_window_is_all_missing_and_the_exit_code_says_so() {
    let broker = BrokerProcess::start(&["--sample-day", "unused", "--events", "1"]);
    let s = &broker.servers;
    produce(s, "unreplayed", &sample()[..20]);
    let dir = tempfile::tempdir().unwrap();
    let db = Sqlite(dir.path().join("audit.db"));
    db.exec(
        "CREATE TABLE audit_events (event_id TEXT PRIMARY KEY, tenant_id TEXT, ticket_id TEXT, action TEXT, occurred_at TEXT, payload TEXT)",
    );
    let (code, doc) = verify_read_only(s, "unreplayed", &db);
    assert_eq!(code, Some(6), "{doc:#}");
    assert_eq!((total(&doc, "missing"), total(&doc, "records")), (20, 20));
    assert_eq!(doc["plans"], Value::Array(Vec::new()));
    assert!(Path::new(&db.0).exists());
}
