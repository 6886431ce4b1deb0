//! What probe runs leave on shared services — PostgreSQL schemas, Kafka topics and consumer
//! groups, SQLite files — found by the naming rule of [`crate::case_key`] and dropped: by
//! `lessonprobe clean` for earlier runs, and after an interruption for the run interrupted.

mod files;
mod kafka;
mod schemas;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ticketflow::KafkaTarget;

use crate::case_key::case_key;
use crate::checkpoint::{Backend, Checkpoint};

/// A service runs leave things on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A PostgreSQL database: case schemas.
    Postgres(String),
    /// A `sqlite:DIR` folder: database files.
    SqliteDir(PathBuf),
    /// A broker: topics and consumer groups (none on the embedded one).
    Kafka(KafkaTarget),
}

/// Whose leftovers: every run's, or one run's.
#[derive(Debug, Clone)]
pub enum Runs {
    All,
    /// The run with this id; `schemas` are the exact names its SQL probes use on PostgreSQL
    /// (see [`run_schemas`]), since a schema name keeps only the end of a long key.
    One {
        run_id: String,
        schemas: Vec<String>,
    },
}

/// What kind of thing a leftover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Schema,
    Topic,
    Group,
    File,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Schema => "schema",
            Kind::Topic => "topic",
            Kind::Group => "consumer group",
            Kind::File => "file",
        }
    }
}

/// One thing a run left, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub kind: Kind,
    pub name: String,
    /// The service, without passwords (`postgres host:port/db`, `kafka HOST:PORT`, a folder).
    pub place: String,
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.kind.label(), self.name, self.place)
    }
}

/// Why leftovers could not be listed or dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanError {
    /// The service could not be reached or refused to list.
    #[error("{place}: {reason}")]
    Unlisted { place: String, reason: String },
    /// A leftover stays: the service refused or did not answer.
    #[error("{leftover}: not dropped: {reason}")]
    NotDropped { leftover: Leftover, reason: String },
}

/// What a service holds of the runs asked about.
#[derive(Debug, Default)]
pub struct Found {
    pub leftovers: Vec<Leftover>,
    /// What could not be listed although the service answered (a broker without ListGroups).
    pub unlisted: Vec<CleanError>,
}

/// The leftovers of `runs` on `place`, each service asked within `timeout`.
pub fn find(place: &Place, runs: &Runs, timeout: Duration) -> Result<Found, CleanError> {
    let (place, runs) = (place.clone(), runs.clone());
    let described = describe(&place);
    bounded(&described, 2 * timeout, move || {
        let all = |leftovers| Found {
            leftovers,
            unlisted: Vec::new(),
        };
        match &place {
            Place::Postgres(url) => schemas::find(url, &runs, timeout).map(all),
            Place::SqliteDir(dir) => files::find(dir, &runs).map(all),
            // The embedded broker lives and dies with each run: it holds nothing.
            Place::Kafka(KafkaTarget::Embedded) => Ok(Found::default()),
            Place::Kafka(target) => kafka::find(target, &runs, timeout),
        }
    })
}

/// What became of one leftover: dropped, or why it stays.
pub type Dropped = Result<Leftover, CleanError>;

/// Drops `leftovers` (found on `place`), each service asked within `timeout`.
pub fn drop_all(place: &Place, leftovers: &[Leftover], timeout: Duration) -> Vec<Dropped> {
    if leftovers.is_empty() {
        return Vec::new();
    }
    let (place, owned) = (place.clone(), leftovers.to_vec());
    // Each leftover may take its own statement or request, after connecting.
    let limit = timeout * (leftovers.len() as u32 + 2);
    let dropped = bounded(&describe(&place), limit, move || {
        Ok(match &place {
            Place::Postgres(url) => schemas::drop_all(url, &owned, timeout),
            Place::SqliteDir(_) => files::remove_all(&owned),
            Place::Kafka(KafkaTarget::Embedded) => Vec::new(),
            Place::Kafka(target) => kafka::drop_all(target, &owned, timeout),
        })
    });
    dropped.unwrap_or_else(|e| {
        leftovers
            .iter()
            .map(|l| Err(CleanError::not_dropped(l, &e)))
            .collect()
    })
}

/// A service as messages name it before it answered, without passwords.
fn describe(place: &Place) -> String {
    match place {
        Place::Postgres(url) => ticketflow::store::schemas::describe_url(url),
        Place::SqliteDir(dir) => dir.display().to_string(),
        Place::Kafka(KafkaTarget::Embedded) => "kafka embedded".to_owned(),
        Place::Kafka(KafkaTarget::Bootstrap { servers, .. }) => format!("kafka {servers}"),
    }
}

/// Runs `work` on a thread of its own and waits for it at most `limit`: a server that accepts
/// connections and never answers (its client would wait for ever) must not hold `clean` or an
/// interrupted run. What does not answer in time is left to finish on its own.
fn bounded<T: Send + 'static>(
    place: &str,
    limit: Duration,
    work: impl FnOnce() -> Result<T, CleanError> + Send + 'static,
) -> Result<T, CleanError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("clean".into())
        .spawn(move || {
            let _ = tx.send(work());
        });
    let unanswered = |reason: String| CleanError::Unlisted {
        place: place.to_owned(),
        reason,
    };
    if let Err(e) = spawned {
        return Err(unanswered(format!("cannot start a thread: {e}")));
    }
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        Err(unanswered(format!(
            "no answer within {}",
            humantime::format_duration(limit)
        )))
    })
}

impl CleanError {
    fn not_dropped(leftover: &Leftover, reason: impl fmt::Display) -> CleanError {
        CleanError::NotDropped {
            leftover: leftover.clone(),
            reason: reason.to_string(),
        }
    }
}

/// The PostgreSQL schemas the SQL probes of `checkpoints` use in run `run_id`.
pub fn run_schemas<'a>(
    checkpoints: impl IntoIterator<Item = &'a Checkpoint>,
    run_id: &str,
) -> Vec<String> {
    checkpoints
        .into_iter()
        .flat_map(|c| c.probes.iter().map(move |p| (c.lesson, p)))
        .filter(|(_, p)| p.backends.contains(&Backend::Postgres))
        .map(|(lesson, p)| {
            let key = case_key(run_id, lesson, &p.id, Some(Backend::Postgres.label()));
            lessonprobe_probes::case_schema::schema_for_run(&key)
        })
        .collect()
}
