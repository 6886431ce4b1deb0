//! Per-case schemas on PostgreSQL: `lp_<hash>_<end of the case key>`, as the probe crate names
//! them, listed from the catalog and dropped with everything in them.

use std::time::Duration;

use ticketflow::store::schemas::Schemas;
use ticketflow::store::StoreError;

use super::{CleanError, Dropped, Kind, Leftover, Runs};

/// Every case schema name: `lp_`, sixteen hex digits of hash, `_`, the key's end.
const ANY_RUN: &str = "^lp_[0-9a-f]{16}_[a-z0-9_]+$";

pub fn find(url: &str, runs: &Runs, timeout: Duration) -> Result<Vec<Leftover>, CleanError> {
    let mut schemas = open(url, timeout)?;
    let names = match runs {
        Runs::All => schemas.matching(ANY_RUN),
        Runs::One { schemas: named, .. } => schemas.existing(named),
    }
    .map_err(|e| CleanError::Unlisted {
        place: schemas.place.clone(),
        reason: format!("listing schemas: {}", reason(&e)),
    })?;
    Ok(names
        .into_iter()
        .map(|name| Leftover {
            kind: Kind::Schema,
            name,
            place: schemas.place.clone(),
        })
        .collect())
}

pub fn drop_all(url: &str, leftovers: &[Leftover], timeout: Duration) -> Vec<Dropped> {
    let mut schemas = match open(url, timeout) {
        Ok(schemas) => schemas,
        Err(e) => {
            return leftovers
                .iter()
                .map(|l| Err(CleanError::not_dropped(l, &e)))
                .collect()
        }
    };
    leftovers
        .iter()
        .map(|leftover| match schemas.drop_schema(&leftover.name) {
            Ok(()) => Ok(leftover.clone()),
            Err(e) => Err(CleanError::not_dropped(leftover, reason(&e))),
        })
        .collect()
}

fn open(url: &str, timeout: Duration) -> Result<Schemas, CleanError> {
    Schemas::connect(url, timeout).map_err(|e| match e {
        StoreError::Connect { place, reason } => CleanError::Unlisted {
            place,
            reason: format!("cannot connect: {reason}"),
        },
        StoreError::Lost { place, reason } => CleanError::Unlisted { place, reason },
        other => CleanError::Unlisted {
            place: "postgres".into(),
            reason: other.to_string(),
        },
    })
}

/// The server's words for a failed statement (without the place, which the leftover names).
fn reason(e: &StoreError) -> String {
    match e {
        StoreError::Lost { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}
