//! `lessonprobe replay verify` against each broker (the mock cluster and Apache Kafka) and a
//! replayed audit table on SQLite and PostgreSQL (a foreign, typed table there): a clean window,
//! rows deleted and altered,
//! an action wrapped again under a new event_id, undecodable records in and out of the
//! quarantine — and, read back, not one consumer-group commit and not one row changed.

use std::path::PathBuf;

use lessonprobe_testkit::kafka::{commit, committed, produce, watermarks};
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::*;
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

/// The window of `topic` on `servers` against `db`, as `replay` and `replay verify` take it.
fn window<'a>(servers: &'a str, topic: &'a str, db: &'a str) -> [&'a str; 10] {
    [
        "--kafka", servers, "--topic", topic, "--db", db, "--since", SINCE, "--until", UNTIL,
    ]
}

/// `lessonprobe replay --execute` of the window, quarantining what does not decode.
fn replay(servers: &str, topic: &str, db: &str) -> Test {
    lessonprobe()
        .arg("replay")
        .args(window(servers, topic, db))
        .args(["--live-group", LIVE, "--replay-group", GROUP])
        .args(["--execute", "--allow-quarantine", "--deadline", "60s"])
}

/// `lessonprobe replay verify` of the window, with `extra` arguments.
fn verify(servers: &str, topic: &str, db: &str, extra: &[&str]) -> Test {
    lessonprobe()
        .args(["replay", "verify"])
        .args(window(servers, topic, db))
        .args(["--deadline", "60s"])
        .args(extra)
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

struct Sqlite(PathBuf);

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
        let mut all = String::new();
        for t in sqlite::tables(&self.0) {
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

/// A database of the test's own holding an `audit_events` a team made itself.
struct Postgres(OwnDatabase);

impl Postgres {
    fn create(admin: &str) -> Postgres {
        let db = OwnDatabase::create(admin, "verify");
        db.foreign_audit_table(true);
        Postgres(db)
    }
}

impl Db for Postgres {
    fn arg(&self) -> String {
        self.0.url()
    }

    fn exec(&self, sql: &str) {
        self.0.client().batch_execute(sql).unwrap();
    }

    fn everything(&self) -> String {
        let mut client = self.0.client();
        let mut all = String::new();
        for t in self.0.tables() {
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

fn discrepancies(doc: &Value) -> &[Value] {
    doc["discrepancies"]
        .as_array()
        .expect("a discrepancies array")
}

/// The event_ids of the discrepancies of `kind`, sorted.
fn ids(doc: &Value, kind: &str) -> Vec<String> {
    let mut ids: Vec<String> = discrepancies(doc)
        .iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| d["event_id"].as_str().unwrap_or("-").to_owned())
        .collect();
    ids.sort();
    ids
}

/// The one discrepancy `is` picks out.
#[track_caller]
fn the_one(doc: &Value, is: impl Fn(&Value) -> bool) -> &Value {
    let found: Vec<&Value> = discrepancies(doc).iter().filter(|d| is(d)).collect();
    assert_eq!(found.len(), 1, "{doc:#}");
    found[0]
}

/// What a discrepancy says it found must include `words`.
#[track_caller]
fn assert_detail(discrepancy: &Value, words: &str) {
    let detail = discrepancy["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(words), "{words:?} not in {discrepancy}");
}

fn total(doc: &Value, field: &str) -> u64 {
    doc["total"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no total {field}"))
}

/// `verify --format json` with the live group and `--compare compare`, which must exit `code`:
/// the document, after checking that it changed no row and committed no offset.
#[track_caller]
fn verify_read_only(servers: &str, topic: &str, db: &dyn Db, code: i32, compare: &str) -> Value {
    let (rows, offsets) = (db.everything(), committed_everywhere(servers, topic));
    let doc = verify(
        servers,
        topic,
        &db.arg(),
        &[
            "--format",
            "json",
            "--live-group",
            LIVE,
            "--compare",
            compare,
        ],
    )
    .status(code)
    .json();
    assert_eq!(db.everything(), rows, "verify changed the database");
    assert_eq!(
        committed_everywhere(servers, topic),
        offsets,
        "verify committed offsets"
    );
    doc
}

/// The whole story on one database, every verification with `--compare compare`, which must
/// end up comparing as `compared` says: replayed and clean; then 3 rows deleted, 1 payload
/// altered and 1 quarantine row removed behind its back.
fn scenario(kind: BrokerKind, db: &dyn Db, altered_payload: &str, compare: &str, compared: &str) {
    let broker = kind.for_own_records();
    let s = &broker.servers;
    let topic = "verify";
    produce(s, topic, IN_WINDOW_MS, &sample());
    replay(s, topic, &db.arg()).success();
    commit(s, LIVE, topic, &[10, 10, 10, 10]);

    let doc = verify_read_only(s, topic, db, 0, compare);
    assert_eq!(doc["clean"], true);
    assert_eq!(doc["compared"], compared);
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
    let rewrapped = the_one(&doc, |d| d["kind"] == "duplicated_facts");
    assert_detail(rewrapped, "as event_id e-7 ");
    let quarantined = discrepancies(&doc)
        .iter()
        .filter(|d| d["kind"] == "undecodable" && d["quarantined"] == true)
        .count();
    assert_eq!(quarantined, 2, "{doc:#}");
    // The replay's plan covers every partition of the window, complete.
    let plans = doc["plans"].as_array().unwrap();
    assert_eq!(plans.len(), PARTITIONS as usize, "{doc:#}");
    assert!(
        plans
            .iter()
            .all(|p| p["covers"] == true && p["remaining"] == 0 && p["status"] == "complete"),
        "{doc:#}"
    );
    // The live group's offsets and lag, against the partitions' ends.
    let ends: Vec<i64> = watermarks(s, topic).iter().map(|w| w.1).collect();
    let live = doc["live"].as_array().unwrap();
    assert_eq!(live.len(), PARTITIONS as usize, "{doc:#}");
    for (p, live) in live.iter().enumerate() {
        assert_eq!(live["committed"], 10, "{live}");
        assert_eq!(live["lag"].as_i64(), Some(ends[p] - 10), "{live}");
    }
    verify(s, topic, &db.arg(), &["--compare", compare])
        .output_has("CLEAN: every one of the 201 distinct events")
        .success();

    // Behind its back: three rows gone, one payload altered, one quarantine row gone.
    db.exec(&format!(
        "DELETE FROM audit_events WHERE event_id IN ('e-10', 'e-21', 'e-199');
         UPDATE audit_events SET payload = {altered_payload} WHERE event_id = 'e-42';
         DELETE FROM lessonprobe_replay_quarantine WHERE partition = 1;"
    ));
    let doc = verify_read_only(s, topic, db, 6, compare);
    assert_eq!(doc["clean"], false);
    assert_eq!(doc["compared"], compared);
    assert_eq!(ids(&doc, "missing"), ["e-10", "e-199", "e-21"], "{doc:#}");
    assert_eq!(ids(&doc, "mismatched"), ["e-42"], "{doc:#}");
    let mismatch = the_one(&doc, |d| d["kind"] == "mismatched");
    assert_detail(mismatch, "differs in payload");
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
        (Some(1), Some(0)),
        "{p1}"
    );
    let not_quarantined = the_one(&doc, |d| d["kind"] == "undecodable" && d["partition"] == 1);
    assert_eq!(not_quarantined["quarantined"], false);
    assert_detail(not_quarantined, "not in the quarantine table");

    // The table shows two examples per kind and says where the rest are; CSV lists them all.
    verify(s, topic, &db.arg(), &["--limit", "2", "--compare", compare])
        .output_has("missing: 3 (the first 2; --format json or csv lists all)")
        .output_has("DISCREPANCIES: 3 event(s) of the window missing")
        .status(6);
    let csv = verify(
        s,
        topic,
        &db.arg(),
        &["--format", "csv", "--compare", compare],
    )
    .status(6);
    let mut reader = ::csv::Reader::from_reader(csv.stdout.as_bytes());
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

on_each_broker! {
    fn sqlite_a_replayed_window_verifies_clean_and_every_change_behind_its_back_is_found(kind) {
        let dir = Dir::new();
        scenario(
            kind,
            &Sqlite(dir.join("audit.db")),
            r#"'{"version":4242}'"#,
            "auto",
            "scan",
        );
    }

    fn sqlite_looking_each_event_id_up_finds_what_the_scan_finds(kind) {
        let dir = Dir::new();
        scenario(
            kind,
            &Sqlite(dir.join("audit.db")),
            r#"'{"version":4242}'"#,
            "lookup",
            "lookup",
        );
    }

    fn postgres_a_foreign_typed_table_verifies_clean_and_every_change_behind_its_back_is_found(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        // Typed columns render the event PostgreSQL's way: a scan cannot compare them, so asking
        // for one looks each event_id up instead.
        scenario(
            kind,
            &Postgres::create(&admin),
            r#"'{"version": 4242}'::jsonb"#,
            "scan",
            "lookup",
        );
    }

    fn postgres_a_table_the_replay_created_is_scanned_and_every_change_is_found(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        scenario(
            kind,
            &Postgres(OwnDatabase::create(&admin, "verify_scan")),
            r#"'{"version":4242}'"#,
            "auto",
            "scan",
        );
    }

    fn a_table_much_larger_than_the_window_is_looked_up_unless_a_scan_is_asked_for(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let topic = "small-window";
        produce(s, topic, IN_WINDOW_MS, &sample()[..20]);
        let dir = Dir::new();
        let db = Sqlite(dir.join("audit.db"));
        replay(s, topic, &db.arg()).success();
        // 150,000 rows of other days beside the window's 20, and one of the 20 gone.
        db.exec(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
             INSERT INTO audit_events (event_id, tenant_id, ticket_id, action, occurred_at, payload)
             SELECT 'old-' || i, 'tenant-a', 't-' || i, 'ticket.updated', '2026-09-01T00:00:00+00:00', '{}'
             FROM n;
             DELETE FROM audit_events WHERE event_id = 'e-3';",
        );
        for (compare, compared) in [("auto", "lookup"), ("scan", "scan"), ("lookup", "lookup")] {
            let doc = verify_read_only(s, topic, &db, 6, compare);
            assert_eq!(doc["compared"], compared, "--compare {compare}");
            assert_eq!(
                ids(&doc, "missing"),
                ["e-3"],
                "--compare {compare}: {doc:#}"
            );
            assert_eq!(
                (total(&doc, "records"), total(&doc, "mismatched")),
                (20, 0),
                "--compare {compare}"
            );
        }
    }
}

#[test]
fn a_table_it_cannot_compare_with_is_refused_before_anything_is_read() {
    let dir = Dir::new();
    let file = dir.join("nokey.db");
    Sqlite(file.clone()).exec(
        "CREATE TABLE audit_events (event_id TEXT, tenant_id TEXT, ticket_id TEXT, action TEXT, occurred_at TEXT, payload TEXT)",
    );
    // Nothing listens here: a refusal naming the table shows the table was looked at first.
    let nowhere = format!("127.0.0.1:{}", net::free_port());
    verify(&nowhere, "t", &format!("sqlite:{}", file.display()), &[])
        .output_has("CREATE UNIQUE INDEX audit_events_event_id_key ON audit_events (event_id);")
        .status(4);
    let missing = dir.join("absent.db");
    // One line that names the file once.
    verify(&nowhere, "t", &format!("sqlite:{}", missing.display()), &[])
        .output_has(format!(
            "lessonprobe: sqlite {}: no such database file\n",
            missing.display()
        ))
        .status(4);
    assert!(!missing.exists(), "verify created the database file");
}

#[test]
fn an_unknown_way_to_compare_is_a_usage_error_naming_the_flag_and_its_values() {
    let dir = Dir::new();
    let file = dir.join("audit.db");
    let nowhere = format!("127.0.0.1:{}", net::free_port());
    verify(
        &nowhere,
        "t",
        &format!("sqlite:{}", file.display()),
        &["--compare", "sideways"],
    )
    .stdout("")
    .stderr_has("invalid value 'sideways' for '--compare <COMPARE>'")
    .stderr_has("[possible values: auto, scan, lookup]")
    .stderr_lacks("panicked")
    .status(2);
    assert!(!file.exists(), "verify created the database file");
}

on_each_broker! {
    fn an_unreplayed_window_is_all_missing_and_the_exit_code_says_so(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        produce(s, "unreplayed", IN_WINDOW_MS, &sample()[..20]);
        let dir = Dir::new();
        let db = Sqlite(dir.join("audit.db"));
        db.exec(
            "CREATE TABLE audit_events (event_id TEXT PRIMARY KEY, tenant_id TEXT, ticket_id TEXT, action TEXT, occurred_at TEXT, payload TEXT)",
        );
        let doc = verify_read_only(s, "unreplayed", &db, 6, "auto");
        assert_eq!((total(&doc, "missing"), total(&doc, "records")), (20, 20));
        assert_eq!(doc["plans"], Value::Array(Vec::new()));
        assert_eq!(
            sqlite::tables(&db.0),
            ["audit_events"],
            "verify created no table"
        );
    }
}
