//! `kind = "postgres"`: a throwaway cluster in the service's `{data}` folder, made by `initdb`
//! (once: a restart keeps it) and served by `postgres` on `{port}` of 127.0.0.1, with the
//! binaries the preflight and the test kit find (`initdb` on PATH, else `pg_config --bindir`).

use super::Builtin;
use crate::services::service::{Ready, StopSignal};

/// Finds the server's binaries as `$bin`.
const FIND_BINARIES: &str = r#"bin=$(pg_config --bindir 2>/dev/null) || bin=
if found=$(command -v initdb); then bin=$(dirname "$(readlink -f "$found")"); fi
"#;

/// Without them the shell's status is 127, which the lifecycle reports as "not found" with the
/// fix to install it.
const REQUIRE_BINARIES: &str = r#"if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "initdb was not found on PATH nor in pg_config --bindir: install PostgreSQL's server (Debian: postgresql)" >&2
  exit 127
fi
"#;

/// The cluster's files are the server's user's: root cannot run PostgreSQL, so as root the
/// cluster belongs to `postgres` (Debian's package makes that user) and the server runs as it.
/// `exec` leaves the server itself as the service's process, so its stop signal reaches it.
const START: &str = r#"set -e
data={data}
if [ "$(id -u)" = 0 ]; then
  chown postgres "$data"
  as="setpriv --reuid=postgres --regid=postgres --init-groups --"
else
  as=
fi
echo "PostgreSQL cluster $data/cluster on 127.0.0.1:{port}"
[ -f "$data/cluster/PG_VERSION" ] || $as "$bin/initdb" -D "$data/cluster" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
exec $as "$bin/postgres" -D "$data/cluster" -p {port} -h 127.0.0.1 -k "$data" -c fsync=off -c synchronous_commit=off -c full_page_writes=off
"#;

/// Ready when the server accepts a connection (a listening socket alone is not enough: a
/// server still starting up refuses sessions).
const READY: &str = r#""$bin/pg_isready" -q -h 127.0.0.1 -p {port}"#;

pub fn cluster() -> Builtin {
    Builtin {
        start: format!("{FIND_BINARIES}{REQUIRE_BINARIES}{START}"),
        ready: Ready::Command(format!("{FIND_BINARIES}{READY}")),
        // What `pg_ctl stop -m fast` sends: sessions are ended, the cluster shuts down cleanly.
        stop: StopSignal {
            name: "INT",
            number: libc::SIGINT,
        },
        placeholders: vec![(
            "{url}",
            "postgres://postgres@127.0.0.1:{port}/postgres".to_owned(),
        )],
    }
}
