//! Databases on the command line. The probe runner's `--db` (`LESSONPROBE_DB`) names scratch
//! databases for probe cases; a replay's target (`--db` of `replay`, `LESSONPROBE_REPLAY_DB`) is
//! a real audit database. Both read `sqlite:PATH` and `postgres://URL` alike; no variable points
//! at both.

use std::path::PathBuf;
use std::str::FromStr;

use lessonprobe_probes::DbTarget;
use ticketflow::AuditDb;

/// One `--db` value of a probe run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbChoice {
    /// `sqlite`: in memory.
    Sqlite,
    /// `sqlite:DIR`: a database file per probe case in DIR, kept.
    SqliteDir(PathBuf),
    /// `postgres://URL`: a schema per probe case, dropped after.
    Postgres(String),
    /// `postgres`: the URL in `LESSONPROBE_POSTGRES`.
    PostgresFromEnv,
    /// `all`: SQLite in memory and the URL in `LESSONPROBE_POSTGRES`.
    All,
}

/// Why `--db` values do not name the databases of a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    #[error("{text:?}: expected sqlite, sqlite:DIR, postgres://URL, postgres or all")]
    Unknown { text: String },
    #[error("sqlite:DIR needs a folder")]
    NoFolder,
    #[error("{0}")]
    BadUrl(String),
    #[error("--db postgres/all: set LESSONPROBE_POSTGRES to a postgres:// URL, or give the URL")]
    NoPostgresUrl,
    #[error("--db names {backend} twice")]
    Twice { backend: &'static str },
    #[error("LESSONPROBE_DB is the probe runner's scratch database, never a replay's target: name the replay's database with --db or LESSONPROBE_REPLAY_DB")]
    RunnerDbForReplay,
    #[error("name the replay's target database with --db or LESSONPROBE_REPLAY_DB (sqlite:PATH or postgres://URL)")]
    NoReplayTarget,
}

impl FromStr for DbChoice {
    type Err = DbError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "sqlite" | "sqlite::memory:" => Ok(DbChoice::Sqlite),
            "sqlite:" => Err(DbError::NoFolder),
            "postgres" | "postgresql" => Ok(DbChoice::PostgresFromEnv),
            "all" => Ok(DbChoice::All),
            v if v.starts_with("postgres://") || v.starts_with("postgresql://") => {
                postgres_url(v).map(DbChoice::Postgres)
            }
            v => match v.strip_prefix("sqlite:") {
                Some(dir) => Ok(DbChoice::SqliteDir(PathBuf::from(dir))),
                None => Err(DbError::Unknown {
                    text: text.to_owned(),
                }),
            },
        }
    }
}

/// A PostgreSQL URL checked by the same grammar a replay's target uses.
fn postgres_url(text: &str) -> Result<String, DbError> {
    match text.parse::<AuditDb>() {
        Ok(AuditDb::Postgres(url)) => Ok(url),
        Ok(AuditDb::Sqlite(_)) => Err(DbError::Unknown {
            text: text.to_owned(),
        }),
        Err(e) => Err(DbError::BadUrl(e.to_string())),
    }
}

/// The databases of a probe run, one per backend: `postgres` and `all` take their URL from
/// `postgres_env` (`LESSONPROBE_POSTGRES`).
pub fn probe_databases(
    choices: &[DbChoice],
    postgres_env: Option<&str>,
) -> Result<Vec<DbTarget>, DbError> {
    let from_env = || match postgres_env.map(str::trim) {
        Some(url) if !url.is_empty() => postgres_url(url).map(DbTarget::Postgres),
        _ => Err(DbError::NoPostgresUrl),
    };
    let mut targets: Vec<DbTarget> = Vec::new();
    for choice in choices {
        let expanded = match choice {
            DbChoice::Sqlite => vec![DbTarget::SqliteMemory],
            DbChoice::SqliteDir(dir) => vec![DbTarget::SqliteFile(dir.clone())],
            DbChoice::Postgres(url) => vec![DbTarget::Postgres(url.clone())],
            DbChoice::PostgresFromEnv => vec![from_env()?],
            DbChoice::All => vec![DbTarget::SqliteMemory, from_env()?],
        };
        for target in expanded {
            let backend = backend_of(&target);
            if targets.iter().any(|t| backend_of(t) == backend) {
                return Err(DbError::Twice { backend });
            }
            targets.push(target);
        }
    }
    Ok(targets)
}

fn backend_of(target: &DbTarget) -> &'static str {
    match target {
        DbTarget::Postgres(_) => "postgres",
        DbTarget::SqliteMemory | DbTarget::SqliteFile(_) => "sqlite",
    }
}

/// A replay's target: given explicitly, or refused. `runner_db_set` says whether
/// `LESSONPROBE_DB` is set, which a replay never follows but names in its refusal.
pub fn replay_target(explicit: Option<AuditDb>, runner_db_set: bool) -> Result<AuditDb, DbError> {
    match explicit {
        Some(db) => Ok(db),
        None if runner_db_set => Err(DbError::RunnerDbForReplay),
        None => Err(DbError::NoReplayTarget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_choices_parse_and_expand_once_per_backend() {
        let parse = |s: &str| s.parse::<DbChoice>();
        assert_eq!(parse("sqlite"), Ok(DbChoice::Sqlite));
        assert_eq!(parse("sqlite:dbs"), Ok(DbChoice::SqliteDir("dbs".into())));
        assert_eq!(parse("sqlite:"), Err(DbError::NoFolder));
        assert_eq!(
            parse("oracle://x").unwrap_err().to_string(),
            "\"oracle://x\": expected sqlite, sqlite:DIR, postgres://URL, postgres or all"
        );
        let url = "postgres://u@h:5432/d";
        assert_eq!(
            probe_databases(&[DbChoice::All], Some(url)),
            Ok(vec![DbTarget::SqliteMemory, DbTarget::Postgres(url.into())])
        );
        assert_eq!(
            probe_databases(&[DbChoice::PostgresFromEnv], None),
            Err(DbError::NoPostgresUrl)
        );
        assert_eq!(
            probe_databases(&[DbChoice::Sqlite, DbChoice::All], Some(url)),
            Err(DbError::Twice { backend: "sqlite" })
        );
    }

    #[test]
    fn a_replay_never_takes_the_runners_database() {
        let db: AuditDb = "sqlite:audit.db".parse().unwrap();
        assert_eq!(replay_target(Some(db.clone()), true), Ok(db));
        let refused = replay_target(None, true).unwrap_err().to_string();
        assert!(
            refused.contains("LESSONPROBE_DB is the probe runner's scratch database")
                && refused.contains("--db")
                && refused.contains("LESSONPROBE_REPLAY_DB"),
            "{refused}"
        );
        assert_eq!(replay_target(None, false), Err(DbError::NoReplayTarget));
    }
}
