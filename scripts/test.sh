#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine: installs what is missing, starts a throwaway
# PostgreSQL cluster, sshd and a Toxiproxy server on loopback, fetches the pinned Apache Kafka (tests start their own
# brokers from it through scripts/kafka.sh, and one is started here for the lesson runs), makes a
# Python virtual environment for the sample course, runs every test in release mode, stops
# everything and fails if a broker JVM outlived the tests.
# Arguments, if any, replace the default `--workspace -- --test-threads 2` of `cargo test`
# (e.g. `bash scripts/test.sh --test integration -- replay::sigkill`), for running part of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

# --- Debian packages -------------------------------------------------------------------------
need=()
command -v xmllint >/dev/null || need+=(libxml2-utils)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v python3 >/dev/null || need+=(python3)
python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
command -v git >/dev/null || need+=(git)
command -v cc >/dev/null || need+=(build-essential)
command -v pkg-config >/dev/null || need+=(pkg-config)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
command -v openssl >/dev/null || need+=(openssl)
command -v redis-server >/dev/null || need+=(redis-server)
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need+=(maven)
command -v pgrep >/dev/null || need+=(procps)
# For the replay benchmark's by-hand check (kcat | jq, then the sqlite3 shell).
command -v kcat >/dev/null || need+=(kcat)
command -v jq >/dev/null || need+=(jq)
command -v sqlite3 >/dev/null || need+=(sqlite3)
# For the HTML report's test: the page as a real browser renders it.
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian's package starts a system Redis on 6379; the tests start their own, and nothing the
  # test command brought up may outlive it.
  case " ${need[*]} " in
    *" redis-server "*) as_root service redis-server stop >/dev/null 2>&1 || true ;;
  esac
fi

LESSONPROBE_TEST_CHROMIUM="$(command -v chromium || true)"
export LESSONPROBE_TEST_CHROMIUM

# --- build once ------------------------------------------------------------------------------
log "building (release)"
cargo build --release --workspace --all-targets --locked

# The system crate knows nothing of the CLI, reports, SSH, progress bars or probes: its normal
# dependency tree must not hold any of them (the test kit is a dev-dependency only).
log "checking the dependencies of the ticketflow library"
forbidden=$(cargo tree -p ticketflow -e normal --prefix none --locked \
  | awk '{print $1}' | grep -x -E 'clap|quick-junit|ssh2|indicatif|lessonprobe|lessonprobe-probes|lessonprobe-testkit' | sort -u || true)
if [ -n "$forbidden" ]; then
  printf 'FAILED: ticketflow depends on %s; the system crate must not know the CLI, reports, SSH, progress bars or probes\n' "$(echo $forbidden)" >&2
  exit 1
fi

# Every crate names only dependencies its own code uses: a [dependencies] entry whose crate
# name appears nowhere in the crate's sources is a leftover (tests and benchmarks take theirs
# from [dev-dependencies]).
log "checking that every crate uses the dependencies it lists"
unused=()
for manifest in Cargo.toml probes/Cargo.toml ticketflow/Cargo.toml testkit/Cargo.toml; do
  crate_dir=$(dirname "$manifest")
  for dep in $(awk '/^\[dependencies\]/{f=1;next} /^\[/{f=0} f && /^[A-Za-z0-9_-]+ *=/{print $1}' "$manifest"); do
    grep -rqw --include='*.rs' "${dep//-/_}" "$crate_dir/src" || unused+=("$manifest: $dep")
  done
done
if [ ${#unused[@]} -gt 0 ]; then
  printf 'FAILED: dependencies listed but not used: %s\n' "${unused[*]}" >&2
  exit 1
fi

work=$(mktemp -d /tmp/lessonprobe-test.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
  set +e
  for dir in "$work"/kafka/*/; do [ -d "$dir" ] && bash scripts/kafka.sh stop "$dir"; done
  [ -n "${PGBIN:-}" ] && [ -d "$work/pg" ] && as_pg "$PGBIN/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# A run stopped by a signal stops its services too (the EXIT trap runs only on a normal exit).
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# --- PostgreSQL: a throwaway cluster on 127.0.0.1 -----------------------------------------------
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "$(id -u)" -eq 0 ]; then
  as_pg() { runuser -u postgres -- "$@"; }
  pguser=postgres
else
  as_pg() { "$@"; }
  pguser=$(id -un)
fi
mkdir -p "$work/pg" "$work/pgsock"
[ "$(id -u)" -eq 0 ] && chown postgres "$work/pg" "$work/pgsock"
pgport=$(free_port)
log "starting PostgreSQL on 127.0.0.1:$pgport"
as_pg "$PGBIN/initdb" -D "$work/pg" -U "$pguser" --auth=trust -E UTF8 >/dev/null
# TLS: a throwaway CA and a server certificate for 127.0.0.1 and localhost; connections
# without TLS keep working (trust authentication over host lines accepts both).
tls="$work/pgtls"
mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=lessonprobe test CA" \
  -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
  -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$tls/san.ext"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
  -days 2 -extfile "$tls/san.ext" -out "$tls/server.crt" 2>/dev/null
chmod 600 "$tls/server.key"
[ "$(id -u)" -eq 0 ] && chown postgres "$tls/server.key" "$tls/server.crt"
chmod 755 "$tls"
as_pg "$PGBIN/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w -t 60 \
  -o "-k $work/pgsock -p $pgport -h 127.0.0.1 -c fsync=off -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" start >/dev/null
export LESSONPROBE_TEST_POSTGRES="postgres://$pguser@127.0.0.1:$pgport/postgres"
export LESSONPROBE_TEST_PG_CTL="$PGBIN/pg_ctl"
export LESSONPROBE_TEST_PG_DATA="$work/pg"
export LESSONPROBE_TEST_PG_CA="$tls/ca.crt"
export LESSONPROBE_TEST_PG_RUNAS="$([ "$(id -u)" -eq 0 ] && echo postgres || true)"

# --- sshd: loopback only, generated keys --------------------------------------------------------
sshport=$(free_port)
ssh_dir="$work/ssh"
mkdir -p "$ssh_dir" && chmod 700 "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/client_key"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/other_key"
cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
printf '[127.0.0.1]:%s %s\n' "$sshport" "$(cut -d' ' -f1,2 "$ssh_dir/host_key.pub")" > "$ssh_dir/known_hosts"
cat > "$ssh_dir/sshd_config" <<CONF
Port $sshport
ListenAddress 127.0.0.1
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PidFile $ssh_dir/sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
Subsystem sftp internal-sftp
CONF
as_root mkdir -p /run/sshd || true  # privilege separation; a non-root sshd does without
log "starting sshd on 127.0.0.1:$sshport"
/usr/sbin/sshd -D -e -f "$ssh_dir/sshd_config" 2>"$ssh_dir/sshd.log" &
pids+=($!)
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/"$sshport") 2>/dev/null && break; sleep 0.1; done
export LESSONPROBE_TEST_SSH_ADDR="127.0.0.1:$sshport"
export LESSONPROBE_TEST_SSH_USER="$(id -un)"
export LESSONPROBE_TEST_SSH_KEY="$ssh_dir/client_key"
export LESSONPROBE_TEST_SSH_OTHER_KEY="$ssh_dir/other_key"
export LESSONPROBE_TEST_SSH_KNOWN_HOSTS="$ssh_dir/known_hosts"
export LESSONPROBE_TEST_SSH_LOG="$ssh_dir/sshd.log"

# --- Toxiproxy: the fault-injecting TCP proxy of the fault suite (tests/integration/replay_faults.rs),
# built once through the Go module proxy into a cache, started on loopback ------------------------
TOXIPROXY_VERSION=v2.12.0
toxi_dir="${XDG_CACHE_HOME:-$HOME/.cache}/lessonprobe/toxiproxy/$TOXIPROXY_VERSION"
if [ ! -x "$toxi_dir/server" ]; then
  go_bin=$(command -v go || echo /usr/local/go/bin/go)
  if [ ! -x "$go_bin" ]; then
    printf 'FAILED: Go is needed once to build Toxiproxy %s (go install); install Go 1.22 or newer\n' "$TOXIPROXY_VERSION" >&2
    exit 1
  fi
  log "building Toxiproxy $TOXIPROXY_VERSION (go install, once, into $toxi_dir)"
  GOBIN="$toxi_dir" "$go_bin" install \
    "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
    "github.com/Shopify/toxiproxy/v2/cmd/cli@$TOXIPROXY_VERSION"
fi
toxiport=$(free_port)
log "starting Toxiproxy on 127.0.0.1:$toxiport"
"$toxi_dir/server" -host 127.0.0.1 -port "$toxiport" >"$work/toxiproxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do (echo >/dev/tcp/127.0.0.1/"$toxiport") 2>/dev/null && break; sleep 0.1; done
export LESSONPROBE_TEST_TOXIPROXY="127.0.0.1:$toxiport"
export LESSONPROBE_TEST_TOXIPROXY_CLI="$toxi_dir/cli"

# --- Apache Kafka: the pinned jars, and one broker for the lesson runs ----------------------------
log "fetching Apache Kafka ($(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/kafka/pom.xml)) through Maven"
bash scripts/kafka.sh fetch >/dev/null
mkdir -p "$work/kafka"
export LESSONPROBE_TEST_KAFKA_ROOT="$work/kafka"
LESSONPROBE_TEST_KAFKA="$(bash scripts/kafka.sh start "$work/kafka/shared")"
export LESSONPROBE_TEST_KAFKA
log "Apache Kafka for the lesson runs at $LESSONPROBE_TEST_KAFKA"

# --- Python for the sample course: a virtual environment with what its requirements name
# (SQLAlchemy; confluent-kafka and pytest for its broker acceptance test, the remote selector of
# lesson 30; redis and psycopg for its lessons over services lessonprobe starts), and the Jupyter
# kernel and executor notebook lessons run in (pinned: the notebook tests compare with nbval 0.11)
log "creating a Python virtual environment with the sample course's requirements, ipykernel and nbclient"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check -r examples/ticketflow-course/requirements.txt \
    'ipykernel==7.4.0' 'nbclient==0.11.0'
export LESSONPROBE_TEST_PYTHON="$work/venv/bin/python"

# --- the tests --------------------------------------------------------------------------------
log "running the test suite"
status=0
if [ $# -gt 0 ]; then
  cargo test --release --locked "$@" || status=$?
else
  cargo test --release --workspace --locked -- --test-threads 2 || status=$?
fi

# Every broker a test started must be gone with its test; the shared one is stopped here.
bash scripts/kafka.sh stop "$work/kafka/shared"
if ! left=$(bash scripts/kafka.sh running "$work/kafka"); then
  printf 'FAILED: Apache Kafka JVMs outlived the tests that started them:\n%s\n' "$left" >&2
  status=1
fi
exit "$status"
