//! Opening a SQLite file for writing: WAL, durable commits, a page cache sized for a replay,
//! a bounded wait for the file.

use std::time::Duration;

use rusqlite::Connection;

use crate::store::error::StoreError;

/// The page cache of a replay's connections together, in KiB.
pub(super) const PAGE_CACHE_KIB: i64 = 65_536;

/// WAL, durable commits, a bounded wait for the file.
pub(super) fn tune(conn: &Connection, busy: Duration) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // synchronous stays FULL: an offset is committed to Kafka right after the SQL commit,
    // so that commit must survive power loss too. A 64 MiB page cache keeps the event_id
    // index of a large replay in memory, where inserts in partition order land at random.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -PAGE_CACHE_KIB)?;
    // A batch dirties thousands of index pages, so with the default (1,000 pages) nearly
    // every commit also copied the WAL back into the file; a larger WAL is copied back less
    // often and each page once for many commits. Durability is the WAL's, unchanged.
    conn.pragma_update(None, "wal_autocheckpoint", 16_384)?;
    conn.busy_timeout(busy)?;
    Ok(())
}
