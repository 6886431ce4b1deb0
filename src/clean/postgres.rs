//! Scratch schemas on PostgreSQL: `lp_<hash>_<end of the case key>`, as the probe crate names
//! them, listed from the catalog and dropped with everything in them.

use std::time::Duration;

use postgres::Client;
use ticketflow::store::postgres::{connect, quote_ident};
use ticketflow::store::StoreError;

use super::{CleanError, Dropped, Kind, Leftover, Runs};

/// Every scratch schema name: `lp_`, sixteen hex digits of hash, `_`, the key's end.
const ANY_RUN: &str = "^lp_[0-9a-f]{16}_[a-z0-9_]+$";

pub fn find(url: &str, runs: &Runs, timeout: Duration) -> Result<Vec<Leftover>, CleanError> {
    let (mut client, place) = open(url, timeout)?;
    let rows = match runs {
        Runs::All => client.query(
            "SELECT nspname FROM pg_namespace WHERE nspname ~ $1 ORDER BY nspname",
            &[&ANY_RUN],
        ),
        Runs::One { schemas, .. } => client.query(
            "SELECT nspname FROM pg_namespace WHERE nspname = ANY($1) ORDER BY nspname",
            &[schemas],
        ),
    }
    .map_err(|e| CleanError::Unlisted {
        place: place.clone(),
        reason: format!("listing schemas: {e}"),
    })?;
    Ok(rows
        .iter()
        .map(|row| Leftover {
            kind: Kind::Schema,
            name: row.get(0),
            place: place.clone(),
        })
        .collect())
}

pub fn drop_all(url: &str, leftovers: &[Leftover], timeout: Duration) -> Vec<Dropped> {
    let mut client = match open(url, timeout) {
        Ok((client, _)) => client,
        Err(e) => {
            return leftovers
                .iter()
                .map(|l| Err(CleanError::not_dropped(l, &e)))
                .collect()
        }
    };
    leftovers
        .iter()
        .map(|leftover| {
            let sql = format!(
                "DROP SCHEMA IF EXISTS {} CASCADE",
                quote_ident(&leftover.name)
            );
            match client.batch_execute(&sql) {
                Ok(()) => Ok(leftover.clone()),
                Err(e) => Err(CleanError::not_dropped(leftover, e)),
            }
        })
        .collect()
}

/// A connection whose statements give up rather than wait behind a probe that still holds a
/// schema's locks.
fn open(url: &str, timeout: Duration) -> Result<(Client, String), CleanError> {
    let (mut client, place) = connect(url, timeout).map_err(|e| match e {
        StoreError::Connect { place, reason } => CleanError::Unlisted {
            place,
            reason: format!("cannot connect: {reason}"),
        },
        other => CleanError::Unlisted {
            place: "postgres".into(),
            reason: other.to_string(),
        },
    })?;
    let millis = timeout.as_millis().max(1);
    client
        .batch_execute(&format!(
            "SET lock_timeout = {millis}; SET statement_timeout = {}",
            millis * 3
        ))
        .map_err(|e| CleanError::Unlisted {
            place: place.clone(),
            reason: e.to_string(),
        })?;
    Ok((client, place))
}
