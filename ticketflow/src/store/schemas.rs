//! Whole PostgreSQL schemas: listing them by name or pattern and dropping them with everything
//! in them, on a connection whose statements give up rather than wait behind a holder of their
//! locks.

use std::time::Duration;

use postgres::Client;

use super::error::StoreError;
use super::postgres::{connect, quote_ident};

/// A connection for listing and dropping schemas.
pub struct Schemas {
    client: Client,
    /// Host, port and database, never a password.
    pub place: String,
}

impl Schemas {
    /// Connects within `timeout`; a lock is waited for at most `timeout`, a statement three
    /// times that.
    pub fn connect(url: &str, timeout: Duration) -> Result<Schemas, StoreError> {
        let (mut client, place) = connect(url, timeout)?;
        let millis = timeout.as_millis().max(1);
        client
            .batch_execute(&format!(
                "SET lock_timeout = {millis}; SET statement_timeout = {}",
                millis * 3
            ))
            .map_err(|e| StoreError::postgres(&place, e))?;
        Ok(Schemas { client, place })
    }

    /// The schemas whose name matches the POSIX regular expression `pattern`, in name order.
    pub fn matching(&mut self, pattern: &str) -> Result<Vec<String>, StoreError> {
        self.names(
            "SELECT nspname FROM pg_namespace WHERE nspname ~ $1 ORDER BY nspname",
            &pattern,
        )
    }

    /// Those of `names` that exist, in name order.
    pub fn existing(&mut self, names: &[String]) -> Result<Vec<String>, StoreError> {
        self.names(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY($1) ORDER BY nspname",
            &names,
        )
    }

    /// Drops `schema` and everything in it; a schema that is gone already is no error.
    pub fn drop_schema(&mut self, schema: &str) -> Result<(), StoreError> {
        self.client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote_ident(schema)
            ))
            .map_err(|e| StoreError::postgres(&self.place, e))
    }

    fn names(
        &mut self,
        sql: &str,
        param: &(dyn postgres::types::ToSql + Sync),
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .client
            .query(sql, &[param])
            .map_err(|e| StoreError::postgres(&self.place, e))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }
}

/// A PostgreSQL URL as messages name it: host, port and database, never a password (`postgres`
/// when it does not parse).
pub fn describe_url(url: &str) -> String {
    url.parse::<postgres::Config>()
        .map_or_else(|_| "postgres".to_owned(), |c| super::postgres::describe(&c))
}
