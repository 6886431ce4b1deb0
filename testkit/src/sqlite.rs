//! SQLite files read back through a connection of the test's own.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::types::FromSql;

/// The one integer `sql` answers (a `COUNT(*)`, a `SUM`).
#[track_caller]
pub fn count(db: &Path, sql: &str) -> i64 {
    let conn = open(db);
    conn.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql} on {}: {e}", db.display()))
}

/// The first column of every row `sql` answers.
#[track_caller]
pub fn rows<T: FromSql>(db: &Path, sql: &str) -> Vec<T> {
    let conn = open(db);
    let mut stmt = conn
        .prepare(sql)
        .unwrap_or_else(|e| panic!("{sql} on {}: {e}", db.display()));
    let rows = stmt
        .query_map([], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql} on {}: {e}", db.display()));
    rows.map(|r| r.unwrap_or_else(|e| panic!("{sql} on {}: {e}", db.display())))
        .collect()
}

/// The first column of every row `sql` answers, as text.
#[track_caller]
pub fn strings(db: &Path, sql: &str) -> Vec<String> {
    rows(db, sql)
}

/// A replay's SQL checkpoint of each partition, with its stop: partition → (next offset, stop).
#[track_caller]
pub fn checkpoints(db: &Path) -> BTreeMap<i32, (i64, i64)> {
    strings(
        db,
        "SELECT partition || ' ' || next_offset || ' ' || stop_offset
         FROM lessonprobe_replay_partitions",
    )
    .iter()
    .map(|row| {
        let v: Vec<i64> = row.split(' ').map(|x| x.parse().unwrap()).collect();
        (v[0] as i32, (v[1], v[2]))
    })
    .collect()
}

/// Every table of the database, by name.
#[track_caller]
pub fn tables(db: &Path) -> Vec<String> {
    strings(
        db,
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
    )
}

#[track_caller]
fn open(db: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(db).unwrap_or_else(|e| panic!("open {}: {e}", db.display()))
}

/// Waits until the replay `running` into `db` has made at least `batches` batches durable
/// (rows of `lessonprobe_replay_batches`), within 60 s; fails if it ends before.
#[track_caller]
pub fn wait_for_durable_batches(db: &Path, batches: i64, running: &mut crate::Running) {
    let durable = || -> i64 {
        rusqlite::Connection::open(db)
            .and_then(|c| {
                c.query_row("SELECT COUNT(*) FROM lessonprobe_replay_batches", [], |r| {
                    r.get(0)
                })
            })
            .unwrap_or(0) // no table yet
    };
    let waiting = std::time::Instant::now();
    while durable() < batches {
        assert!(
            running.is_running(),
            "the replay ended before {batches} durable batches"
        );
        assert!(
            waiting.elapsed() < std::time::Duration::from_secs(60),
            "fewer than {batches} durable batches after 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
