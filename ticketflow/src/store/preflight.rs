//! The check a run makes of each PostgreSQL server its probes use, before any probe waits on
//! one: where the server is, as the check is named, and whether it answers in time.

pub use super::postgres::{answers, place_of};
