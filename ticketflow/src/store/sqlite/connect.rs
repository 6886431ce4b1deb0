//! Opening a SQLite file for writing: WAL, durable commits, a page cache sized for a replay,
//! savepoints journaled in memory, a bounded wait for the file.

use std::time::Duration;

use rusqlite::Connection;

use crate::store::error::StoreError;

/// The page cache of a replay's connections together, in KiB, at the least: a replay sizes
/// it for its plan on its first batch (`target::page_cache_kib`).
pub(super) const PAGE_CACHE_KIB: i64 = 65_536;

/// WAL, durable commits, a bounded wait for the file.
pub(super) fn tune(conn: &Connection, busy: Duration) -> Result<(), StoreError> {
    // First: switching a new file to WAL, which the workers of one plan may do at once,
    // waits for the run's time too, not rusqlite's default of 5 s.
    conn.busy_timeout(busy)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // synchronous stays FULL: an offset is committed to Kafka right after the SQL commit,
    // so that commit must survive power loss too. The page cache keeps the event_id index
    // in memory, where inserts in partition order land at random.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
    // A batch dirties thousands of index pages, so with the default (1,000 pages) nearly
    // every commit also copied the WAL back into the file; a larger WAL is copied back less
    // often and each page once for many commits. Durability is the WAL's, unchanged. At
    // 16,384 pages (64 MiB) a replay of 3M events, whose transactions each dirty more than
    // that, still copied it back after every commit (0.16 reads a record; 0.07 at 256 MiB).
    conn.pragma_update(None, "wal_autocheckpoint", 65_536)?;
    // A savepoint (a batch's own, where a refused row must stop the run) makes SQLite keep
    // the first version of every page it changes in a sub-journal: in a temporary file, one
    // write system call per page (1.5 GB in 779,000 writes for a replay of 1M events when
    // every batch had one, four times what went to the WAL). In memory it is one copy per
    // page, freed when the savepoint is released: at most the pages of one batch.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rusqlite::Connection;

    use crate::store::{AuditDb, PlanStatus, Timeouts};

    /// Another process holding the file's write lock longer than rusqlite's default busy
    /// timeout (5 s): a target opened meanwhile reads at once (opening takes no write lock),
    /// and its write waits for the lock, then succeeds — contention is waiting, not failure.
    #[test]
    fn a_target_opened_while_another_writer_holds_the_file_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("contended.db");
        let db = AuditDb::Sqlite(path.clone());
        {
            let mut target = db
                .open_target(Timeouts::all(Duration::from_secs(5)))
                .unwrap();
            let adoption = target.inspect().unwrap().adopt().unwrap();
            target.prepare(&adoption).unwrap();
        }
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let opening = Instant::now();
        let mut target = db
            .open_target(Timeouts::all(Duration::from_secs(30)))
            .unwrap();
        assert!(
            opening.elapsed() < Duration::from_secs(1),
            "opening waited {:?} for the other writer",
            opening.elapsed()
        );
        assert!(target.plans().unwrap().is_empty());
        let held = Duration::from_millis(5_500);
        let release = std::thread::spawn(move || {
            std::thread::sleep(held);
            holder.execute_batch("COMMIT").unwrap();
        });
        let writing = Instant::now();
        target.finish("no-such-plan", PlanStatus::Complete).unwrap();
        assert!(writing.elapsed() >= held - Duration::from_millis(600));
        release.join().unwrap();
    }
}
