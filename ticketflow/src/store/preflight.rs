//! The check a run makes of each PostgreSQL server its probes use, before any probe waits on
//! one: where the server is, as the check is named, and whether it answers in time.

pub use super::postgres::{answers, place_of};

/// What to do when the server does not answer, said to a user whose option naming a database's
/// URL is `option`.
pub fn fix(option: &str) -> String {
    format!(
        "start the server, or give {option} the URL of one that accepts this user (host, port, \
         database, password)"
    )
}
