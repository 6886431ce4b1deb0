//! `lessonprobe replay` against the databases it meets in production: foreign audit tables
//! (adopted or refused before any read), exactly-once checkpoints under SIGKILL, conflicts,
//! records stored as received, quarantine, batch splitting, a black-hole server, TLS, and
//! the plan's identity — read back from SQLite, PostgreSQL and the broker; every test that
//! reads a topic runs on both brokers (the mock cluster and Apache Kafka).

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use lessonprobe_testkit::kafka::{committed, produce};
use lessonprobe_testkit::kills::kill_campaign;
use lessonprobe_testkit::postgres::OwnDatabase;
use lessonprobe_testkit::*;

const LIVE: &str = "live-audit";
const GROUP: &str = "replay-target";
/// A window around the records these tests produce.
const SINCE: &str = "2026-09-22T00:00:00Z";
const UNTIL: &str = "2026-09-23T00:00:00Z";
const IN_WINDOW_MS: i64 = 1_789_948_800_000 + 86_400_000 + 3_600_000;

/// `lessonprobe replay` of `topic` in the test window into `db`, as replay group `GROUP`
/// unless `extra` names another.
fn replay(servers: &str, topic: &str, db: &str, extra: &[&str]) -> Test {
    let mut test = lessonprobe().arg("replay");
    if !extra.contains(&"--replay-group") {
        test = test.args(["--replay-group", GROUP]);
    }
    test.args([
        "--kafka",
        servers,
        "--topic",
        topic,
        "--live-group",
        LIVE,
        "--db",
        db,
        "--since",
        SINCE,
        "--until",
        UNTIL,
        "--deadline",
        "60s",
    ])
    .args(extra)
}

fn event(id: &str, action: &str, ticket: &str) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{id}","tenant_id":"tenant-a","ticket_id":"{ticket}","action":"{action}","occurred_at":"2026-09-22T10:00:00+00:00","payload":{{"version":1}}}}"#
    )
    .into_bytes()
}

const BOOKKEEPING: [&str; 5] = [
    "lessonprobe_replay_batches",
    "lessonprobe_replay_conflicts",
    "lessonprobe_replay_partitions",
    "lessonprobe_replay_plans",
    "lessonprobe_replay_quarantine",
];

on_each_broker! {
    fn a_foreign_postgres_audit_table_is_adopted_and_only_bookkeeping_appears(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let db = OwnDatabase::create(&admin, "adopt");
        db.foreign_audit_table(true);
        let broker = kind.sample_day("adopt", 600, 3);
        replay(&broker.servers, "adopt", &db.url(), &[])
            .output_has("audit_events: found; adopted as it is (unique key audit_events_event_uq")
            .output_has("ALTER TABLE audit_events ADD COLUMN record BYTEA;")
            .output_has("bookkeeping: will create lessonprobe_replay_plans")
            .success();
        assert_eq!(db.tables(), ["audit_events"], "a dry run creates nothing");

        replay(
            &broker.servers,
            "adopt",
            &db.url(),
            &["--execute", "--allow-quarantine"],
        )
        .success();
        let mut want = vec!["audit_events".to_owned()];
        want.extend(BOOKKEEPING.iter().map(|t| t.to_string()));
        assert_eq!(
            db.tables(),
            want,
            "no table but the replay's own bookkeeping"
        );
        let mut client = db.client();
        let (rows, distinct, live): (i64, i64, i64) = {
            let r = client
                .query_one(
                    "SELECT COUNT(*), COUNT(DISTINCT event_id), COUNT(*) FILTER (WHERE source = 'live' AND noted_at IS NOT NULL) FROM audit_events",
                    &[],
                )
                .unwrap();
            (r.get(0), r.get(1), r.get(2))
        };
        assert!(rows > 100, "{rows}");
        assert_eq!(
            (rows, live),
            (distinct, rows),
            "one row per event, defaults filled"
        );
    }
}

#[test]
fn a_target_without_a_unique_key_on_event_id_is_refused_before_anything_is_read() {
    let Some(admin) = services::postgres() else {
        return;
    };
    let db = OwnDatabase::create(&admin, "nokey");
    db.foreign_audit_table(false);
    // No broker listens at this address: a refusal that names the target proves the target
    // was looked at before Kafka was.
    let nowhere = "127.0.0.1:1";
    for extra in [&[][..], &["--execute"][..]] {
        replay(nowhere, "t", &db.url(), extra)
            .output_has("no unique constraint or unique index on exactly (event_id)")
            .output_has("records every event twice")
            .output_has("ALTER TABLE audit_events ADD CONSTRAINT audit_events_event_id_key UNIQUE (event_id);")
            .status(4);
    }
    assert_eq!(db.tables(), ["audit_events"]);

    // The same on SQLite, with SQLite's statement.
    let dir = Dir::new();
    let file = dir.join("nokey.db");
    rusqlite::Connection::open(&file)
        .unwrap()
        .execute_batch(
            "CREATE TABLE audit_events (event_id TEXT, tenant_id TEXT, ticket_id TEXT, action TEXT, occurred_at TEXT, payload TEXT)",
        )
        .unwrap();
    replay(
        nowhere,
        "t",
        &format!("sqlite:{}", file.display()),
        &["--execute"],
    )
    .output_has("CREATE UNIQUE INDEX audit_events_event_id_key ON audit_events (event_id);")
    .status(4);
}

on_each_broker! {
    fn the_same_event_id_with_other_content_is_a_conflict_with_one_outcome_at_any_jobs(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let topic = "conflict";
        let mut records: Vec<(i32, Vec<u8>)> = (0..400)
            .map(|i| {
                (
                    i % 4,
                    event(&format!("e-{i}-filler"), "ticket.updated", "t"),
                )
            })
            .collect();
        records.push((3, event("e-2", "ticket.deleted", "t-2")));
        records.push((2, event("e-2", "ticket.updated", "t-2")));
        produce(s, topic, IN_WINDOW_MS, &records);
        for run in 0..3 {
            let dir = Dir::new();
            let file = dir.join("c.db");
            let db = format!("sqlite:{}", file.display());
            let group = format!("conflict-{run}");
            replay(
                s,
                topic,
                &db,
                &[
                    "--execute",
                    "--jobs",
                    "4",
                    "--batch",
                    "7",
                    "--replay-group",
                    &group,
                ],
            )
            .output_has("1 CONFLICT(S)")
            .status(5);
            let kept: Vec<String> = sqlite::rows(
                &file,
                "SELECT action FROM audit_events WHERE event_id = 'e-2'",
            );
            assert_eq!(
                kept,
                ["ticket.updated"],
                "run {run}: the version at the lowest partition stays"
            );
            let conflicts: Vec<String> = sqlite::rows(
                &file,
                "SELECT stored_partition || '>' || incoming_partition || ':' || (stored_hash <> incoming_hash) FROM lessonprobe_replay_conflicts WHERE event_id = 'e-2'",
            );
            assert_eq!(conflicts, ["2>3:1"], "run {run}");
        }
        let dir = Dir::new();
        let db = format!("sqlite:{}", dir.join("w.db").display());
        replay(
            s,
            topic,
            &db,
            &[
                "--execute",
                "--on-conflict",
                "warn",
                "--replay-group",
                "conflict-warn",
            ],
        )
        .output_has("1 CONFLICT(S)")
        .success();
    }
}

/// Records whose JSON a re-serialising replay would change, and one with a field unknown to
/// the audit schema.
fn as_received() -> Vec<Vec<u8>> {
    vec![
        br#"{"event_id":"raw-1","tenant_id":"t","ticket_id":"k","action":"a","occurred_at":"2026-09-22T10:00:00Z","payload":{"amount":12345678901234567890123,"price":1.10,"z":1,"a":2}}"#.to_vec(),
        br#"{"payload":{"dup":1,"dup":2},"action":"a","event_id":"raw-2","ticket_id":"k","tenant_id":"t","occurred_at":"2026-09-22T10:00:00Z"}"#.to_vec(),
        br#"{"event_id":"raw-3","trace_id":"4bf92f3577b34da6","tenant_id":"t","ticket_id":"k","action":"a","occurred_at":"2026-09-22T10:00:00Z","payload":{}}"#.to_vec(),
    ]
}

fn payload_text(raw: &[u8]) -> String {
    let text = std::str::from_utf8(raw).unwrap();
    let start = text.find("\"payload\":").unwrap() + "\"payload\":".len();
    let end = text[start..].find('}').unwrap() + start + 1;
    text[start..end].to_owned()
}

on_each_broker! {
    fn records_are_stored_as_received_and_unknown_fields_are_not_quarantined(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let raws = as_received();
        produce(
            s,
            "raw",
            IN_WINDOW_MS,
            &raws.iter().map(|r| (0, r.clone())).collect::<Vec<_>>(),
        );
        let dir = Dir::new();
        let file = dir.join("raw.db");
        replay(
            s,
            "raw",
            &format!("sqlite:{}", file.display()),
            &["--execute", "--partitions", "0"],
        )
        .success();
        let conn = rusqlite::Connection::open(&file).unwrap();
        for (offset, raw) in raws.iter().enumerate() {
            let (record, payload, topic, partition, ts): (Vec<u8>, String, String, i32, i64) = conn
                .query_row(
                    "SELECT record, payload, topic, partition, record_timestamp FROM audit_events WHERE record_offset = ?1",
                    [offset as i64],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .unwrap();
            assert_eq!(record, *raw, "offset {offset}: the record bit for bit");
            assert_eq!(
                payload,
                payload_text(raw),
                "offset {offset}: the payload's text as sent"
            );
            assert_eq!(
                (topic.as_str(), partition, ts),
                ("raw", 0, IN_WINDOW_MS + offset as i64)
            );
        }
        let quarantined: Vec<i64> =
            sqlite::rows(&file, "SELECT COUNT(*) FROM lessonprobe_replay_quarantine");
        assert_eq!(quarantined, [0]);

        let Some(admin) = services::postgres() else {
            return;
        };
        let db = OwnDatabase::create(&admin, "raw");
        replay(
            s,
            "raw",
            &db.url(),
            &["--execute", "--partitions", "0", "--replay-group", "raw-pg"],
        )
        .success();
        let mut client = db.client();
        for (offset, raw) in raws.iter().enumerate() {
            let row = client
                .query_one(
                    "SELECT record, payload FROM audit_events WHERE record_offset = $1",
                    &[&(offset as i64)],
                )
                .unwrap();
            assert_eq!(row.get::<_, Vec<u8>>(0), *raw);
            assert_eq!(row.get::<_, String>(1), payload_text(raw));
        }
    }
}

on_each_broker! {
    fn a_nul_in_a_field_is_quarantined_alike_on_sqlite_and_postgres(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let nul = br#"{"event_id":"nul-1","tenant_id":"t","ticket_id":"t\u0000x","action":"a","occurred_at":"2026-09-22T10:00:00Z","payload":{}}"#.to_vec();
        produce(
            s,
            "nul",
            IN_WINDOW_MS,
            &[
                (0, event("ok-1", "a", "k")),
                (0, nul.clone()),
                (0, event("ok-2", "a", "k")),
            ],
        );
        let dir = Dir::new();
        let file = dir.join("nul.db");
        let sqlite = format!("sqlite:{}", file.display());
        let mut targets = vec![(sqlite, None)];
        let pg = services::postgres().map(|admin| OwnDatabase::create(&admin, "nul"));
        if let Some(db) = &pg {
            targets.push((db.url(), Some(db)));
        }
        for (target, pg) in targets {
            let group = if pg.is_some() { "nul-pg" } else { "nul-sqlite" };
            replay(
                s,
                "nul",
                &target,
                &["--execute", "--partitions", "0", "--replay-group", group],
            )
            .output_has("1 RECORD(S) QUARANTINED")
            .status(5);
            let (offset, reason, record): (i64, String, Vec<u8>) = match pg {
                None => rusqlite::Connection::open(&file)
                    .unwrap()
                    .query_row(
                        "SELECT record_offset, reason, record FROM lessonprobe_replay_quarantine",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .unwrap(),
                Some(db) => {
                    let r = db
                        .client()
                        .query_one(
                            "SELECT record_offset, reason, record FROM lessonprobe_replay_quarantine",
                            &[],
                        )
                        .unwrap();
                    (r.get(0), r.get(1), r.get(2))
                }
            };
            assert_eq!((offset, record), (1, nul.clone()), "{target}");
            assert!(
                reason.contains("U+0000") && reason.contains("ticket_id"),
                "{reason}"
            );
        }
        let ids: Vec<String> = sqlite::rows(&file, "SELECT event_id FROM audit_events ORDER BY 1");
        assert_eq!(ids, ["ok-1", "ok-2"]);
    }
}

on_each_broker! {
    fn a_data_error_in_the_middle_of_a_10000_record_batch_quarantines_only_that_record(kind) {
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let records: Vec<(i32, Vec<u8>)> = (0..10_000)
            .map(|i| {
                let ticket = if i == 5_000 { "poison" } else { "t" };
                (0, event(&format!("b-{i}"), "ticket.updated", ticket))
            })
            .collect();
        produce(s, "split", IN_WINDOW_MS, &records);
        // The target refuses one value by a CHECK of its own: the database's reason is kept.
        let dir = Dir::new();
        let file = dir.join("split.db");
        rusqlite::Connection::open(&file)
            .unwrap()
            .execute_batch(
                "CREATE TABLE audit_events (event_id TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,
                   ticket_id TEXT NOT NULL CHECK (ticket_id <> 'poison'), action TEXT NOT NULL,
                   occurred_at TEXT NOT NULL, payload TEXT NOT NULL, record BLOB, topic TEXT,
                   partition INTEGER, record_offset BIGINT, record_timestamp BIGINT)",
            )
            .unwrap();
        let mut targets = vec![format!("sqlite:{}", file.display())];
        let pg = services::postgres().map(|admin| OwnDatabase::create(&admin, "split"));
        if let Some(db) = &pg {
            db.foreign_audit_table(true);
            db.client()
                .batch_execute("ALTER TABLE audit_events ADD CONSTRAINT no_poison CHECK (ticket_id <> 'poison'), ADD COLUMN record_offset BIGINT, ADD COLUMN topic TEXT, ADD COLUMN partition INTEGER")
                .unwrap();
            targets.push(db.url());
        }
        for target in targets {
            replay(
                s,
                "split",
                &target,
                &[
                    "--execute",
                    "--partitions",
                    "0",
                    "--batch",
                    "10000",
                    "--allow-quarantine",
                    "--replay-group",
                    if target.starts_with("sqlite:") {
                        "split-sqlite"
                    } else {
                        "split-pg"
                    },
                ],
            )
            .success();
            let read = |sql: &str| -> Vec<String> {
                if target.starts_with("sqlite:") {
                    sqlite::rows(&file, sql)
                } else {
                    postgres::strings(&pg.as_ref().unwrap().url(), sql)
                }
            };
            assert_eq!(
                read("SELECT CAST(record_offset AS TEXT) || ' ' || reason FROM lessonprobe_replay_quarantine")
                    .iter()
                    .map(|r| r.split(' ').next().unwrap_or("").to_owned())
                    .collect::<Vec<_>>(),
                ["5000"],
                "{target}"
            );
            let reason = read("SELECT reason FROM lessonprobe_replay_quarantine").join("");
            assert!(
                reason.contains("CHECK") || reason.contains("23514"),
                "{target}: {reason}"
            );
            assert_eq!(
                read("SELECT CAST(COUNT(*) AS TEXT) FROM audit_events"),
                ["9999"],
                "{target}"
            );
            // The reader may end a batch early when the broker pauses (a loaded machine), so
            // batches need not be one; they tile the range, and the split that found the bad
            // record is not recorded as batches of its own.
            let mut batches: Vec<(i64, i64)> = read(
                "SELECT CAST(first_offset AS TEXT) || '-' || CAST(next_offset AS TEXT) FROM lessonprobe_replay_batches",
            )
            .iter()
            .map(|b| {
                let (first, next) = b.split_once('-').unwrap();
                (first.parse().unwrap(), next.parse().unwrap())
            })
            .collect();
            batches.sort();
            let mut at = 0;
            for &(first, next) in &batches {
                assert_eq!(first, at, "{target}: batches tile the range: {batches:?}");
                at = next;
            }
            assert_eq!(at, 10_000, "{target}: {batches:?}");
            assert!(
                !batches.contains(&(5000, 5001)),
                "{target}: the bad record's split is inside its batch: {batches:?}"
            );
        }
    }
}

#[test]
fn a_black_hole_database_ends_the_run_within_the_connect_timeout_naming_it() {
    let hole = SilentListener::start();
    let url = format!(
        "postgres://audit:s3cret@127.0.0.1:{}/auditdb?connect_timeout=2",
        hole.port
    );
    let ran = replay("127.0.0.1:1", "t", &url, &["--execute"])
        .within(Duration::from_secs(3))
        .output_has(format!("127.0.0.1:{}/auditdb", hole.port))
        .status(4);
    assert!(!ran.text().contains("s3cret"), "{}", ran.text());

    // Probe runs against it: the preflight finds it once, as soon, and the SQL cases behind it
    // are NOT RUN.
    let dir = Dir::new();
    let junit = dir.join("r.xml");
    let ran = lessonprobe()
        .in_repo()
        .args([
            "--lesson",
            "30",
            "--select",
            "sql-audit-probe",
            "--select",
            "integrity-error-propagates",
            "--db",
        ])
        .arg(format!(
            "postgres://u@127.0.0.1:{}/auditdb?connect_timeout=1",
            hole.port
        ))
        .arg("--junit")
        .arg(&junit)
        .within(Duration::from_secs(15))
        .output_has(format!("127.0.0.1:{}/auditdb", hole.port))
        .failure();
    let said = ran.text();
    let report = parse_junit(&junit);
    let cases: Vec<_> = report
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .collect();
    assert_eq!(cases.len(), 3, "{said}");
    let verdicts: Vec<_> = cases
        .iter()
        .map(|c| (c.name.to_string(), verdict(c)))
        .collect();
    assert!(
        verdicts[0].0.starts_with("environment: postgres ") && verdicts[0].1 == "ERROR",
        "{verdicts:?}"
    );
    assert!(
        verdicts[1..].iter().all(|(_, v)| v == "NOT RUN"),
        "{verdicts:?}"
    );
    for case in cases {
        let time = case.time.map_or(0.0, |t| t.as_secs_f64());
        assert!(time < 2.0, "{:?} took {time} s", case.name);
    }
}

on_each_broker! {
    fn tls_require_and_verify_full_against_a_self_signed_server(kind) {
        let (Some(admin), Some(ca)) = (services::postgres(), services::postgres_ca()) else {
            return;
        };
        let db = OwnDatabase::create(&admin, "tls");
        let broker = kind.sample_day("tls", 300, 3);
        let secure = |query: &str| format!("{}?{query}", db.url());
        replay(
            &broker.servers,
            "tls",
            &secure("sslmode=require"),
            &["--execute", "--allow-quarantine"],
        )
        .success();
        for host in ["127.0.0.1", "localhost"] {
            let url =
                secure(&format!("sslmode=verify-full&sslrootcert={ca}")).replace("127.0.0.1", host);
            lessonprobe()
                .in_repo()
                .args(["replay", "status", "--db", &url])
                .output_has("complete")
                .success();
            // The connection really is TLS, with the certificate verified.
            let (mut client, _) =
                ticketflow::store::postgres::connect(&url, Duration::from_secs(10)).unwrap();
            let ssl: bool = client
                .query_one(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                    &[],
                )
                .unwrap()
                .get(0);
            assert!(ssl, "{host}");
        }
        // A CA that did not sign the server's certificate is refused by verify-ca.
        let dir = Dir::new();
        let other = dir.join("other.pem");
        assert!(Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=other"
            ])
            .arg("-keyout")
            .arg(dir.join("other.key"))
            .arg("-out")
            .arg(&other)
            .output()
            .unwrap()
            .status
            .success());
        let url = secure(&format!(
            "sslmode=verify-ca&sslrootcert={}",
            other.display()
        ));
        lessonprobe()
            .in_repo()
            .args(["replay", "status", "--db", &url])
            .output_has("certificate verify failed")
            .status(4);
    }
}

on_each_broker! {
    fn a_plan_has_an_identity_complete_plans_do_nothing_and_other_windows_are_refused(kind) {
        let broker = kind.sample_day("plans", 900, 3);
        let s = &broker.servers;
        let dir = Dir::new();
        let file = dir.join("plans.db");
        let db = format!("sqlite:{}", file.display());
        replay(s, "plans", &db, &["--execute", "--allow-quarantine"]).success();
        let rows: Vec<i64> = sqlite::rows(&file, "SELECT COUNT(*) FROM audit_events");
        let batches: Vec<i64> = sqlite::rows(&file, "SELECT COUNT(*) FROM lessonprobe_replay_batches");
        for extra in [&[][..], &["--execute"][..], &["--execute", "--resume"][..]] {
            replay(s, "plans", &db, extra)
                .output_has("nothing to do")
                .success();
        }
        assert_eq!(
            sqlite::rows::<i64>(&file, "SELECT COUNT(*) FROM audit_events"),
            rows
        );
        assert_eq!(
            sqlite::rows::<i64>(&file, "SELECT COUNT(*) FROM lessonprobe_replay_batches"),
            batches,
            "a complete plan applies nothing again"
        );
        // A wider window with the same replay group: refused, both plans shown.
        dir.lessonprobe()
            .args([
                "replay",
                "--kafka",
                s,
                "--topic",
                "plans",
                "--live-group",
                LIVE,
                "--replay-group",
                GROUP,
                "--db",
                &db,
                "--since",
                "2026-09-21T00:00:00Z",
                "--until",
                UNTIL,
                "--execute",
                "--resume",
            ])
            .output_has("recorded: plan p-")
            .output_has("this run: plan p-")
            .output_has("choose a new --replay-group")
            .status(4);
        // replay status lists the plan and each partition at its stop.
        let csv = dir
            .lessonprobe()
            .args(["replay", "status", "--db", &db, "--format", "csv"])
            .success()
            .stdout;
        let rows = csv_rows(&csv);
        for row in &rows {
            assert_eq!(row["status"], "complete");
            assert_eq!(row["checkpoint"], row["stop"]);
            assert_eq!(row["remaining"], "0");
        }
        assert_eq!(rows.len(), 3, "{csv}");
    }
}

/// Per partition, the SQL checkpoint of the only recorded plan.
fn checkpoints(client: &mut ::postgres::Client) -> HashMap<i32, i64> {
    client
        .query(
            "SELECT partition, next_offset FROM lessonprobe_replay_partitions",
            &[],
        )
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_default()
}

on_each_broker! {
    fn sigkill_at_random_moments_applies_no_batch_twice_and_kafka_never_runs_ahead_of_sql(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let db = OwnDatabase::create(&admin, "sigkill");
        // A window of ~16,700 records: thirty kills at random moments used ~9,600 of them
        // once batches needed fewer round trips.
        let events = 48_000;
        let broker = kind.sample_day("kills", events, 4);
        let s = &broker.servers;
        let mut client = db.client();
        let mut watching = db.client();
        kill_campaign(
            11,
            30,
            Duration::from_millis(150),
            |run| {
                replay(
                    s,
                    "kills",
                    &db.url(),
                    // Two records a transaction: the window outlasts thirty kills on either
                    // broker (with five, a fast run of the mock cluster's finished after 25).
                    &[
                        "--execute",
                        "--resume",
                        "--batch",
                        run.batch("2"),
                        "--allow-quarantine",
                    ],
                )
                .spawn()
            },
            || checkpoints(&mut watching).values().sum(),
            |kill| {
                // Visible progress never ahead of durable progress.
                let sql = checkpoints(&mut client);
                eprintln!("kill {kill}: SQL checkpoints {sql:?}");
                let kafka = committed(s, GROUP, "kills", 4);
                for (p, k) in kafka.iter().enumerate() {
                    if let Some(k) = k {
                        let c = sql.get(&(p as i32)).copied().unwrap_or(-1);
                        assert!(
                            *k <= c,
                            "kill {kill}: partition {p}: Kafka {k} ahead of SQL {c}"
                        );
                    }
                }
            },
        );
        // Batches tile each partition's range exactly: none applied twice, none missing.
        let plan: Vec<(i32, i64, i64, i64)> = client
            .query("SELECT partition, start_offset, stop_offset, next_offset FROM lessonprobe_replay_partitions ORDER BY 1", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        assert_eq!(plan.len(), 4);
        for (p, start, stop, next) in plan {
            assert_eq!(next, stop, "partition {p} complete");
            let batches: Vec<(i64, i64)> = client
                .query(
                    "SELECT first_offset, next_offset FROM lessonprobe_replay_batches WHERE partition = $1 ORDER BY first_offset",
                    &[&p],
                )
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            let mut at = start;
            for (first, next) in batches {
                assert_eq!(first, at, "partition {p}: batches contiguous, none twice");
                at = next;
            }
            assert_eq!(at, stop, "partition {p}");
        }
        let (rows, distinct, inserted): (i64, i64, i64) = {
            let r = client
                .query_one(
                    "SELECT (SELECT COUNT(*) FROM audit_events), (SELECT COUNT(DISTINCT event_id) FROM audit_events),
                            (SELECT SUM(inserted)::int8 FROM lessonprobe_replay_partitions)",
                    &[],
                )
                .unwrap();
            (r.get(0), r.get(1), r.get(2))
        };
        assert_eq!(rows, distinct);
        assert_eq!(
            rows, inserted,
            "every row counted once by the batch that inserted it"
        );
        let kafka = committed(s, GROUP, "kills", 4);
        let sql = checkpoints(&mut client);
        for (p, k) in kafka.iter().enumerate() {
            assert_eq!(
                *k,
                sql.get(&(p as i32)).copied(),
                "partition {p}: Kafka caught up"
            );
        }
    }
}

on_each_broker! {
    /// Two jobs replaying partitions that carry the same event ids, in halves of the other order
    /// (partition 1 crosses partition 0, partition 3 crosses partition 2): their transactions wait
    /// on each other's rows, and PostgreSQL ends one of them as a deadlock (SQLSTATE 40P01).
    /// Nothing of that transaction was written, so it is written again; the replay ends with every
    /// event once and every partition at its stop.
    fn jobs_that_deadlock_on_the_same_event_ids_write_again_and_finish_exactly(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let broker = kind.for_own_records();
        let s = &broker.servers;
        let topic = "crossed";
        // Each partition ~4 MiB: the mock keeps about 5 MiB of each.
        let block = 10_000;
        let id = |set: i32, half: usize, i: usize| format!("x-{set}-{half}-{i:06}");
        let mut records: Vec<(i32, Vec<u8>)> = Vec::new();
        for set in 0..2 {
            for (partition, halves) in [(2 * set, [0, 1]), (2 * set + 1, [1, 0])] {
                for half in halves {
                    records.extend(
                        (0..block)
                            .map(|i| (partition, event(&id(set, half, i), "ticket.updated", "t"))),
                    );
                }
            }
        }
        produce(s, topic, IN_WINDOW_MS, &records);
        let stop = 2 * block as i64;
        let mut retried = 0;
        for run in 0..2 {
            let db = OwnDatabase::create(&admin, &format!("crossed{run}"));
            let group = format!("crossed-{run}");
            let ran = replay(
                s,
                topic,
                &db.url(),
                &["--execute", "--jobs", "2", "--replay-group", &group],
            )
            .success();
            retried += usize::from(ran.stderr.contains("was rolled back (SQLSTATE 40P01"));
            let mut client = db.client();
            let rows: i64 = client
                .query_one("SELECT COUNT(DISTINCT event_id) FROM audit_events", &[])
                .unwrap()
                .get(0);
            let all: i64 = client
                .query_one("SELECT COUNT(*) FROM audit_events", &[])
                .unwrap()
                .get(0);
            assert_eq!(
                (rows, all),
                (2 * stop, 2 * stop),
                "run {run}: every event once"
            );
            let stops: HashMap<i32, i64> = (0..4).map(|p| (p, stop)).collect();
            assert_eq!(checkpoints(&mut client), stops, "run {run}");
            assert_eq!(
                committed(s, &group, topic, 4),
                [Some(stop); 4],
                "run {run}: the group's offsets at stop"
            );
        }
        // Two jobs start within milliseconds of each other and each half takes longer to write:
        // the deadlock comes in nearly every run (both runs, each time this was written).
        assert!(
            retried > 0,
            "neither run met a deadlock: the test did not test it"
        );
    }
}

on_each_broker! {
    /// A role that may not create temporary tables (TEMP revoked from PUBLIC, as on some hosted
    /// servers) replays a partition holding a redelivery, then replays it again as another group:
    /// the batches that meet existing event ids go in without a staging table, each event once.
    fn a_role_without_the_temp_privilege_replays_batches_that_meet_existing_rows(kind) {
        let Some(admin) = services::postgres() else {
            return;
        };
        let db = OwnDatabase::create(&admin, "notemp");
        let name = &db.name;
        let role = format!("{name}_role");
        let mut client = db.client();
        client
            .batch_execute(&format!(
                "DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
                 REVOKE TEMPORARY ON DATABASE {name} FROM PUBLIC;
                 GRANT CONNECT ON DATABASE {name} TO {role};
                 GRANT USAGE, CREATE ON SCHEMA public TO {role};"
            ))
            .unwrap();
        let temp: bool = client
            .query_one(
                "SELECT has_database_privilege($1, current_database(), 'TEMP')",
                &[&role],
            )
            .unwrap()
            .get(0);
        assert!(!temp, "the role must not have TEMP");
        let own = db.url();
        let (scheme, rest) = own.split_once("://").unwrap();
        let (_, host) = rest.split_once('@').unwrap();
        let url = format!("{scheme}://{role}@{host}");

        let broker = kind.for_own_records();
        let s = &broker.servers;
        let topic = "notemp";
        let mut records: Vec<(i32, Vec<u8>)> = (0..200)
            .map(|i| (0, event(&format!("n-{i:03}"), "ticket.updated", "t")))
            .collect();
        // An undecodable record before most of them: the rows keep their places in the batch.
        records.insert(50, (0, b"not an event".to_vec()));
        records.push((0, event("n-000", "ticket.updated", "t")));
        produce(s, topic, IN_WINDOW_MS, &records);
        for group in ["notemp-1", "notemp-2"] {
            replay(
                s,
                topic,
                &url,
                &[
                    "--execute",
                    "--partitions",
                    "0",
                    "--allow-quarantine",
                    "--replay-group",
                    group,
                ],
            )
            .success();
            let rows: i64 = client
                .query_one("SELECT COUNT(*) FROM audit_events", &[])
                .unwrap()
                .get(0);
            assert_eq!(rows, 200, "{group}: each event once");
            let misplaced: i64 = client
                .query_one(
                    "SELECT COUNT(*) FROM audit_events
                     WHERE record_offset <> substr(event_id, 3)::int + (substr(event_id, 3)::int >= 50)::int",
                    &[],
                )
                .unwrap()
                .get(0);
            assert_eq!(misplaced, 0, "{group}: every row from its own record");
            let counts: Vec<(i64, i64, i64)> = client
                .query(
                    "SELECT p.inserted, p.duplicates, p.quarantined
                     FROM lessonprobe_replay_partitions p JOIN lessonprobe_replay_plans USING (plan_id)
                     WHERE replay_group = $1",
                    &[&group],
                )
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            // The second run finds every row but the one deleted after the first, which follows
            // the undecodable record: each row's place in the batch tells which one went in.
            let expected = if group == "notemp-1" {
                (200, 1, 1)
            } else {
                (1, 200, 1)
            };
            assert_eq!(
                counts,
                [expected],
                "{group}: inserted, duplicates, quarantined"
            );
            client
                .execute("DELETE FROM audit_events WHERE event_id = 'n-050'", &[])
                .unwrap();
            assert_eq!(committed(s, group, topic, 1), [Some(202)], "{group}");
        }
    }
}
