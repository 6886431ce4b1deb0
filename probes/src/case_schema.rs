//! Per-case PostgreSQL schemas: one per probe case, named after the run, created before the
//! case's store opens and dropped after it, so parallel runs never see each other's rows; and
//! the characters such per-run names keep.

use std::time::Duration;

use postgres::Client;
use ticketflow::store::postgres::{connect, quote_ident};
use ticketflow::store::StoreError;

/// A schema this case created; dropping the value drops the schema and everything in it.
pub struct CaseSchema {
    client: Client,
    name: String,
    place: String,
}

impl CaseSchema {
    /// Connects to `url` (within `timeout`) and creates the schema `name`.
    pub fn create(url: &str, name: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        client
            .batch_execute(&format!("CREATE SCHEMA {}", quote_ident(name)))
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(CaseSchema {
            client,
            name: name.to_owned(),
            place,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for CaseSchema {
    fn drop(&mut self) {
        if self.client.is_closed() {
            return;
        }
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", quote_ident(&self.name));
        if let Err(e) = self.client.batch_execute(&sql) {
            tracing::warn!("{}: dropping schema {}: {e}", self.place, self.name);
        }
    }
}

/// A schema name for a run: `lp_`, a hash of the whole run id, and as much of it as fits.
pub fn schema_for_run(run_id: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in run_id.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let tail: String = lower_alphanumeric(run_id, '_')
        .chars()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("lp_{hash:016x}_{tail}")
}

/// `text` as a name of services that take few characters: ASCII letters and digits, in lower
/// case, every other character as `other`.
pub fn lower_alphanumeric(text: &str, other: char) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                other
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_safe_distinct_and_fit_postgres_identifiers() {
        let a = schema_for_run("20261130-1234-l30-01-postgres");
        let b = schema_for_run("20261130-1235-l30-01-postgres");
        assert_ne!(a, b);
        assert!(
            a.len() <= 63 && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{a}"
        );
        assert!(schema_for_run(&"x".repeat(200)).len() <= 63);
    }
}
