#!/usr/bin/env bash
# A throwaway Apache Kafka (KRaft, no ZooKeeper) on 127.0.0.1, from the version pinned in
# scripts/kafka/pom.xml (jars from Maven Central, cached in ~/.m2). Needs Java 17 and Maven.
#
#   scripts/kafka.sh fetch                    resolve the jars; print the classpath file
#   scripts/kafka.sh start DIR [--brokers N]  format DIR (when new) and start N nodes (default 1)
#                                             on free ports; print the bootstrap servers
#   scripts/kafka.sh stop DIR                 stop every node of DIR (SIGTERM, SIGKILL after 15 s)
#   scripts/kafka.sh running [ROOT]           list the JVMs started under ROOT (default: any);
#                                             exits 1 when there is one
#
# `start` on a DIR whose nodes were stopped (or killed) starts them again on the same ports with
# the same log: a broker restart. Node 1 is broker and controller; nodes 2..N are brokers only.
# Every JVM carries -Dlessonprobe.kafka.dir=DIR on its command line, so `running` finds them.
# Environment: LESSONPROBE_KAFKA_HEAP (default 384m), LESSONPROBE_KAFKA_JIT (`quick`, the default:
# the JVM's first compiler only, which starts a test broker sooner; `full`: both compilers, as a
# broker in production runs, for benchmarks), LESSONPROBE_KAFKA_CACHE (where the classpath file is
# kept; default target/apache-kafka), and extra broker properties as
# LESSONPROBE_KAFKA_PROPERTIES="key=value key=value", which replace the script's own (an
# `advertised.listeners` there makes a single node reachable only through, say, a fault proxy).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
pom="$here/kafka/pom.xml"
cache="${LESSONPROBE_KAFKA_CACHE:-$repo/target/apache-kafka}"

die() { printf 'scripts/kafka.sh: %s\n' "$*" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The classpath of the pinned version, resolved once per version of the pom.
fetch() {
  command -v java >/dev/null || die "java is not installed (Java 17 or later is needed)"
  command -v mvn >/dev/null || die "mvn is not installed (Maven resolves the pinned Kafka jars)"
  mkdir -p "$cache"
  local stamp
  stamp="$(sha256sum "$pom" | cut -c1-16)"
  local cp="$cache/classpath-$stamp"
  if [ ! -s "$cp" ] || ! classpath_present "$cp"; then
    mvn -q -B -f "$pom" dependency:build-classpath -Dmdep.outputFile="$cp.tmp" >"$cache/mvn.log" 2>&1 \
      || { tail -n 20 "$cache/mvn.log" >&2; die "resolving Apache Kafka's jars failed (log: $cache/mvn.log)"; }
    mv "$cp.tmp" "$cp"
  fi
  printf '%s\n' "$cp"
}

classpath_present() {
  local jar
  IFS=: read -r -a jars <"$1"
  for jar in "${jars[@]}"; do [ -f "$jar" ] || return 1; done
}

java_cmd() {
  local dir="$1" node="$2" cp="$3"
  shift 3
  exec java "-Xmx${LESSONPROBE_KAFKA_HEAP:-384m}" -Xms64m -XX:+UseSerialGC "${jit[@]}" \
    "-Dlessonprobe.kafka.dir=$dir" "-Dlog4j2.configurationFile=$here/kafka/log4j2.properties" \
    -cp "$(cat "$cp")" "$@"
}

# Writes node N's properties into DIR (once: a restart keeps its ports).
write_properties() {
  local dir="$1" node="$2" brokers="$3" cport="$4"
  local props="$dir/node-$node.properties" port roles listeners
  [ -f "$props" ] && return 0
  port="$(free_port)"
  if [ "$node" -eq 1 ]; then
    roles=broker,controller
    listeners="PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport"
  else
    roles=broker
    listeners="PLAINTEXT://127.0.0.1:$port"
  fi
  local replication=1
  [ "$brokers" -ge 3 ] && replication=3
  {
    echo "process.roles=$roles"
    echo "node.id=$node"
    echo "controller.quorum.bootstrap.servers=127.0.0.1:$cport"
    echo "listeners=$listeners"
    case " ${LESSONPROBE_KAFKA_PROPERTIES:-} " in
      *" advertised.listeners="*) ;;
      *) echo "advertised.listeners=PLAINTEXT://127.0.0.1:$port" ;;
    esac
    echo "controller.listener.names=CONTROLLER"
    echo "inter.broker.listener.name=PLAINTEXT"
    echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    echo "log.dirs=$dir/log-$node"
    echo "num.partitions=4"
    echo "default.replication.factor=$replication"
    echo "min.insync.replicas=1"
    echo "offsets.topic.replication.factor=$replication"
    echo "offsets.topic.num.partitions=4"
    echo "transaction.state.log.replication.factor=$replication"
    echo "transaction.state.log.min.isr=1"
    echo "transaction.state.log.num.partitions=4"
    echo "share.coordinator.state.topic.replication.factor=$replication"
    echo "share.coordinator.state.topic.min.isr=1"
    echo "group.initial.rebalance.delay.ms=0"
    echo "group.consumer.min.session.timeout.ms=1000"
    echo "group.min.session.timeout.ms=1000"
    echo "auto.create.topics.enable=true"
    echo "delete.topic.enable=true"
    # The sample days lie in the past: Kafka's default time retention (7 days, by record
    # timestamp) would delete them as soon as they are written. Tests that need retention set it
    # on their topic, or delete records below an offset.
    echo "log.retention.ms=-1"
    echo "log.segment.bytes=16777216"
    echo "log.retention.check.interval.ms=1000"
    echo "log.flush.scheduler.interval.ms=9223372036854775807"
    for kv in ${LESSONPROBE_KAFKA_PROPERTIES:-}; do echo "$kv"; done
  } >"$props"
  printf '%s\n' "$port" >"$dir/node-$node.port"
}

start() {
  # Checked before anything is made: a JVM that could not start would be waited for.
  case "${LESSONPROBE_KAFKA_JIT:-quick}" in
    quick) jit=(-XX:TieredStopAtLevel=1) ;;
    full) jit=() ;;
    *) echo "scripts/kafka.sh: LESSONPROBE_KAFKA_JIT must be quick or full, not ${LESSONPROBE_KAFKA_JIT}" >&2; exit 2 ;;
  esac
  local dir="" brokers=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --brokers) brokers="${2:?--brokers takes a number}"; shift 2 ;;
      -*) die "start: unknown option $1" ;;
      *) dir="$1"; shift ;;
    esac
  done
  [ -n "$dir" ] || die "start: a directory is needed"
  case "$brokers" in ''|*[!0-9]*) die "start: --brokers takes a number, not $brokers" ;; esac
  [ "$brokers" -ge 1 ] && [ "$brokers" -le 5 ] || die "start: --brokers takes 1 to 5"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local cp
  cp="$(fetch)"
  local cport
  if [ -f "$dir/controller.port" ]; then
    cport="$(cat "$dir/controller.port")"
    brokers="$(cat "$dir/brokers")"
  else
    cport="$(free_port)"
    printf '%s\n' "$cport" >"$dir/controller.port"
    printf '%s\n' "$brokers" >"$dir/brokers"
  fi
  local cluster node
  # A cluster id as Kafka's own random-uuid makes it (16 random bytes, URL-safe base64), and as
  # it never one that starts with '-': StorageTool would read that as an option (1 start in 64).
  [ -f "$dir/cluster.id" ] || python3 -c '
import base64, os
while (id := base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")).startswith("-"):
    pass
print(id)' >"$dir/cluster.id"
  cluster="$(cat "$dir/cluster.id")"
  for node in $(seq 1 "$brokers"); do
    write_properties "$dir" "$node" "$brokers" "$cport"
    if [ ! -f "$dir/log-$node/meta.properties" ]; then
      local how=--no-initial-controllers
      [ "$node" -eq 1 ] && how=--standalone
      (java_cmd "$dir" "$node" "$cp" kafka.tools.StorageTool format "$how" -t "$cluster" \
        -c "$dir/node-$node.properties") >"$dir/format-$node.log" 2>&1 \
        || { cat "$dir/format-$node.log" >&2; die "formatting node $node in $dir failed"; }
    fi
  done
  for node in $(seq 1 "$brokers"); do
    if node_alive "$dir" "$node"; then continue; fi
    (java_cmd "$dir" "$node" "$cp" kafka.Kafka "$dir/node-$node.properties") \
      >>"$dir/node-$node.log" 2>&1 </dev/null &
    printf '%s\n' "$!" >"$dir/node-$node.pid"
  done
  local servers=() port
  for node in $(seq 1 "$brokers"); do
    port="$(cat "$dir/node-$node.port")"
    wait_for_port "$dir" "$node" "$port"
    servers+=("127.0.0.1:$port")
  done
  (IFS=,; printf '%s\n' "${servers[*]}")
}

node_alive() {
  local pidfile="$1/node-$2.pid"
  [ -f "$pidfile" ] && pid_alive "$(cat "$pidfile")"
}

# Whether process $1 runs. A node killed with SIGKILL stays a zombie until its reaper (often
# PID 1, which may reap only now and then) collects it, and `kill -0` succeeds on a zombie: a
# restart would take the dead node for a live one and not start it.
pid_alive() {
  local state
  state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null || true)"
  [ -n "$state" ] && [ "$state" != Z ]
}

wait_for_port() {
  local dir="$1" node="$2" port="$3" i
  for i in $(seq 600); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    if ! node_alive "$dir" "$node"; then
      tail -n 30 "$dir/node-$node.log" >&2
      die "node $node in $dir exited before listening (log: $dir/node-$node.log)"
    fi
    sleep 0.1
  done
  tail -n 30 "$dir/node-$node.log" >&2
  die "node $node in $dir is not listening on 127.0.0.1:$port after 60 s"
}

stop() {
  local dir="${1:?stop: a directory is needed}" pid node pids=()
  for pidfile in "$dir"/node-*.pid; do
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
    rm -f "$pidfile"
  done
  local deadline=$((SECONDS + 15))
  for pid in "${pids[@]}"; do
    while pid_alive "$pid"; do
      if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
      sleep 0.1
    done
  done
}

running() {
  local root="${1:-}" found
  found="$(pgrep -a -f -- "-Dlessonprobe.kafka.dir=$root" \
    | sed -E 's/^([0-9]+) .*-Dlessonprobe\.kafka\.dir=([^ ]+).*/\1 java (Apache Kafka) of \2/' || true)"
  [ -z "$found" ] && return 0
  printf '%s\n' "$found"
  return 1
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  running) shift; running "$@" ;;
  *) die "usage: scripts/kafka.sh fetch | start DIR [--brokers N] | stop DIR | running [ROOT]" ;;
esac
