//! Connecting to PostgreSQL: bounded in time from the first byte (a server that accepts and
//! never answers included), TLS as the URL's `sslmode` says, the place described without its
//! password, and the client's failures mapped to a [`StoreError`].

use std::error::Error as _;
use std::sync::mpsc;
use std::time::Duration;

use postgres::{Client, Config, NoTls};

use crate::store::error::StoreError;
use crate::store::tls::ConnectSpec;

/// Where a PostgreSQL target lives, without its password: for messages.
pub fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(name) => name.clone(),
            postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgres {host}:{port}/{db}")
}

/// The error and its causes in one line (a TLS failure says why the handshake failed).
fn chain(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{} {}", db.code().code(), db.message());
    }
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// Connects to `url` within `timeout` — TCP, TLS and the server's first answers together:
/// the client library bounds only the TCP connect, so the attempt runs on a thread of its own
/// and is abandoned (its socket closed when the attempt ends) when the time is up. Then
/// statements are bounded by `statement` and lock waits by half of it. Returns the client and
/// where it is.
pub fn connect_bounded(
    url: &str,
    timeout: Duration,
    statement: Duration,
) -> Result<(Client, String), StoreError> {
    let spec = ConnectSpec::parse(url).map_err(|e| StoreError::InvalidUrl {
        reason: e.to_string(),
    })?;
    let place = describe(&spec.config);
    let fail = |reason: String| StoreError::Connect {
        place: place.clone(),
        reason,
    };
    let timeout = spec
        .config
        .get_connect_timeout()
        .map_or(timeout, |asked| timeout.min(*asked))
        .max(Duration::from_millis(100));
    let connector = spec.connector().map_err(|e| fail(e.to_string()))?;
    let mut config = spec.config.clone();
    config
        .connect_timeout(timeout)
        .tcp_user_timeout(timeout)
        .keepalives_idle(Duration::from_secs(30))
        .application_name("lessonprobe");
    let (send, receive) = mpsc::channel();
    std::thread::Builder::new()
        .name("postgres-connect".into())
        .spawn(move || {
            let result = match connector {
                Some(tls) => config.connect(tls),
                None => config.connect(NoTls),
            };
            // The receiver is gone when the attempt outlived its time: the client drops here.
            let _ = send.send(result);
        })
        .map_err(|e| fail(format!("starting the connection: {e}")))?;
    let mut client = match receive.recv_timeout(timeout) {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => return Err(fail(chain(&e))),
        Err(_) => {
            return Err(fail(format!(
                "no answer within {} s: the server accepted the connection but did not answer (is a PostgreSQL server listening there, and is it alive?)",
                timeout.as_secs_f64()
            )))
        }
    };
    let ms = statement.as_millis().clamp(1, i32::MAX as u128);
    // A lock wait ends first, as contention (55P03) that the caller may wait out by asking
    // again; at the same bound the statement timeout would always end it, as a failure.
    let lock_ms = (ms / 2).max(1);
    client
        .batch_execute(&format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {lock_ms}; SET idle_in_transaction_session_timeout = {}",
            ms.max(60_000)
        ))
        .map_err(|e| StoreError::postgres(&place, e))?;
    Ok((client, place))
}

/// Connects to `url` within `timeout`; statements are bounded by the same time.
pub fn connect(url: &str, timeout: Duration) -> Result<(Client, String), StoreError> {
    connect_bounded(url, timeout, Duration::from_secs(300).max(timeout))
}

/// Where `url` points, without its password ("postgres HOST:PORT/DB"), for naming a check.
pub fn place_of(url: &str) -> String {
    ConnectSpec::parse(url).map_or_else(|_| "postgres".to_owned(), |s| describe(&s.config))
}

/// Whether the server at `url` accepts the connection and its credentials, and answers,
/// within `timeout`: a run's preflight.
pub fn answers(url: &str, timeout: Duration) -> Result<(), StoreError> {
    let (mut client, place) = connect_bounded(url, timeout, timeout)?;
    client
        .simple_query("SELECT 1")
        .map(drop)
        .map_err(|e| StoreError::postgres(&place, e))
}

/// `name` as a PostgreSQL identifier, quoted.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl StoreError {
    /// A failure of the PostgreSQL client at `place`: the server's SQLSTATE when it answered.
    pub fn postgres(place: &str, e: postgres::Error) -> StoreError {
        match e.as_db_error() {
            Some(db) => StoreError::Postgres {
                code: db.code().code().to_owned(),
                message: format!("{}: {}", place, db.message()),
            },
            None => StoreError::Lost {
                place: place.to_owned(),
                reason: chain(&e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: Config = "postgres://alice:s3cret@db.example:6543/audit"
            .parse()
            .unwrap();
        assert_eq!(describe(&config), "postgres db.example:6543/audit");
    }
}
