//! Throwaway PostgreSQL for tests: a cluster of a test's own (to stop under a running program),
//! a database or a schema of its own on the test server, and what they hold, read back.

use std::path::{Path, PathBuf};
use std::process::Command;

use postgres::{Client, NoTls};

#[track_caller]
pub fn connect(url: &str) -> Client {
    Client::connect(url, NoTls).unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// The one integer `sql` answers (a `COUNT(*)`).
#[track_caller]
pub fn count(url: &str, sql: &str) -> i64 {
    connect(url)
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// The first column of every row `sql` answers, as text.
#[track_caller]
pub fn strings(url: &str, sql: &str) -> Vec<String> {
    connect(url)
        .query(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The tables of `schema`, by name.
#[track_caller]
pub fn tables(client: &mut Client, schema: &str) -> Vec<String> {
    client
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&schema],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A cluster of this test's own on a free port of 127.0.0.1, so stopping it disturbs no other
/// test; stopped and removed when dropped.
pub struct OwnCluster {
    dir: tempfile::TempDir,
    pg_ctl: PathBuf,
    runas: Option<String>,
    pub port: u16,
}

impl OwnCluster {
    /// Initialises and starts a cluster with the binaries beside `pg_ctl` (as
    /// `LESSONPROBE_TEST_PG_RUNAS` when that is set, since a root test cannot run them).
    #[track_caller]
    pub fn start(pg_ctl: &str) -> OwnCluster {
        let pg_ctl = PathBuf::from(pg_ctl);
        let initdb = pg_ctl.with_file_name("initdb");
        let runas = std::env::var("LESSONPROBE_TEST_PG_RUNAS")
            .ok()
            .filter(|s| !s.is_empty());
        let dir = tempfile::tempdir().unwrap();
        if let Some(user) = &runas {
            assert!(Command::new("chown")
                .arg(user)
                .arg(dir.path())
                .status()
                .unwrap()
                .success());
        }
        let port = crate::net::free_port();
        let cluster = OwnCluster {
            dir,
            pg_ctl,
            runas,
            port,
        };
        let data = cluster.data();
        cluster.run(
            &initdb,
            &["-D", &data, "-U", &cluster.user(), "--auth=trust"],
        );
        cluster.restart();
        cluster
    }

    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/postgres",
            self.user(),
            self.port
        )
    }

    /// Stops the server at once (`-m immediate`), as a crash would.
    #[track_caller]
    pub fn stop(&self) {
        self.run(
            &self.pg_ctl,
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }

    /// Starts the (stopped) cluster on its port.
    #[track_caller]
    pub fn restart(&self) {
        self.pg_ctl_on_port("start", &[]);
    }

    /// Restarts the running cluster as an operator would (`pg_ctl restart -m fast`): every
    /// session is ended (SQLSTATE 57P01), and the server is back on its port when this returns.
    #[track_caller]
    pub fn restart_fast(&self) {
        self.pg_ctl_on_port("restart", &["-m", "fast"]);
    }

    /// `pg_ctl ACTION` of this cluster, waiting, with its log and its port.
    #[track_caller]
    fn pg_ctl_on_port(&self, action: &str, extra: &[&str]) {
        let opts = format!(
            "-k {} -p {} -h 127.0.0.1",
            self.dir.path().display(),
            self.port
        );
        let log = self.dir.path().join("log");
        let data = self.data();
        let mut args = vec!["-D", &data, "-w", "-l", log.to_str().unwrap(), "-o", &opts];
        args.extend_from_slice(extra);
        args.push(action);
        self.run(&self.pg_ctl, &args);
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_str().unwrap().to_owned()
    }

    fn user(&self) -> String {
        self.runas
            .clone()
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "postgres".into()))
    }

    fn command(&self, program: &Path) -> Command {
        match &self.runas {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    #[track_caller]
    fn run(&self, program: &Path, args: &[&str]) {
        let out = self.command(program).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = self
            .command(&self.pg_ctl)
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
    }
}

/// A database of this test's own on the test server, dropped when the value is.
pub struct OwnDatabase {
    admin: String,
    pub name: String,
}

impl OwnDatabase {
    /// `lp_WHAT_PID_N` on the server of `admin` (a URL whose role may create databases).
    #[track_caller]
    pub fn create(admin: &str, what: &str) -> OwnDatabase {
        let name = format!("lp_{what}_{}", unique());
        made_afresh(
            admin,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            &format!("CREATE DATABASE {name}"),
        );
        OwnDatabase {
            admin: admin.to_owned(),
            name,
        }
    }

    pub fn url(&self) -> String {
        let (base, _) = self.admin.rsplit_once('/').unwrap();
        format!("{base}/{}", self.name)
    }

    /// A connection of the test's own to it.
    #[track_caller]
    pub fn client(&self) -> Client {
        connect(&self.url())
    }

    /// The lesson's `audit_events` as a team might have made it before any replay: its own id,
    /// typed columns (`timestamptz`, `jsonb`), extra columns with defaults, and (when `unique`)
    /// a unique index on event_id.
    #[track_caller]
    pub fn foreign_audit_table(&self, unique: bool) {
        let key = if unique {
            "CREATE UNIQUE INDEX audit_events_event_uq ON audit_events (event_id);"
        } else {
            "CREATE INDEX audit_events_event_ix ON audit_events (event_id);"
        };
        self.client()
            .batch_execute(&format!(
                "CREATE TABLE audit_events (
                    id          BIGSERIAL PRIMARY KEY,
                    event_id    VARCHAR(64) NOT NULL,
                    tenant_id   TEXT NOT NULL,
                    ticket_id   TEXT NOT NULL,
                    action      TEXT NOT NULL,
                    occurred_at TIMESTAMPTZ NOT NULL,
                    payload     JSONB NOT NULL,
                    source      TEXT NOT NULL DEFAULT 'live',
                    noted_at    TIMESTAMPTZ DEFAULT now()
                );
                {key}"
            ))
            .unwrap_or_else(|e| panic!("create audit_events in {}: {e}", self.name));
    }

    /// Every table the database holds, whatever its schema.
    #[track_caller]
    pub fn tables(&self) -> Vec<String> {
        strings(
            &self.url(),
            "SELECT table_name::text FROM information_schema.tables
             WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1",
        )
    }
}

impl Drop for OwnDatabase {
    fn drop(&mut self) {
        if let Ok(mut client) = Client::connect(&self.admin, NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// A schema of this test's own on the test server (`t_WHAT_PID_N`), dropped when the value is,
/// with a connection of its own for reading back.
pub struct Schema {
    pub client: Client,
    pub name: String,
}

impl Schema {
    #[track_caller]
    pub fn new(url: &str, what: &str) -> Schema {
        let name = format!("t_{what}_{}", unique());
        let client = made_afresh(
            url,
            &format!("DROP SCHEMA IF EXISTS {name} CASCADE"),
            &format!("CREATE SCHEMA {name}"),
        );
        Schema { client, name }
    }

    #[track_caller]
    pub fn tables(&mut self) -> Vec<String> {
        tables(&mut self.client, &self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = self
            .client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
    }
}

/// A connection to `url` that has run `drop` (of what a killed earlier run may have left under
/// the name) and then `create`: two statements, since a database cannot be created inside the
/// implicit transaction of one.
#[track_caller]
fn made_afresh(url: &str, drop: &str, create: &str) -> Client {
    let mut client = connect(url);
    for statement in [drop, create] {
        client
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    client
}

/// `PID_N`: this process's id and a count of the names made in it, so that two tests of one
/// run (a test on each broker, say) never share a database or schema.
fn unique() -> String {
    static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}_{n}", std::process::id())
}
