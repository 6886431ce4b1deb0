//! `kind = "kafka"`: the embedded mock cluster (`lessonprobe broker`, this program run again as a
//! process of its own), or with `flavor = "apache"` a single Apache Kafka node (KRaft, broker
//! and controller) from the jars `scripts/kafka.sh fetch` resolves.

use super::{quoted, Builtin};
use crate::services::service::{Ready, StopSignal};

const TERM: StopSignal = StopSignal {
    name: "TERM",
    number: libc::SIGTERM,
};

/// The mock cluster listens where librdkafka picks, so its address is learnt once it runs:
/// `lessonprobe broker` prints it as its first line of output, which the ready check reads
/// back (`{ready}`, what the ready command printed).
pub fn mock_cluster() -> Builtin {
    let program = std::env::current_exe()
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "lessonprobe".to_owned());
    Builtin {
        start: format!(
            "exec {} broker --brokers 1 >{{data}}/bootstrap",
            quoted(&program)
        ),
        ready: Ready::Command("test -s {data}/bootstrap && head -n 1 {data}/bootstrap".into()),
        stop: TERM,
        placeholders: vec![("{bootstrap}", "{ready}".to_owned())],
    }
}

/// The classpath file `scripts/kafka.sh fetch` prints: `LESSONPROBE_KAFKA_CLASSPATH`, else the
/// one it caches in `target/apache-kafka/` of the folder lessonprobe runs in (a checkout of
/// lessonprobe). Without it, or without java, the shell's status is 127: "not found", with
/// the log's last line saying which.
const FIND_JARS: &str = r#"set -e
cp=${LESSONPROBE_KAFKA_CLASSPATH:-$(ls target/apache-kafka/classpath-* 2>/dev/null | head -n 1)}
if [ -z "$cp" ] || [ ! -s "$cp" ]; then
  echo "Apache Kafka's jars were not found: run scripts/kafka.sh fetch in lessonprobe's checkout and set LESSONPROBE_KAFKA_CLASSPATH to the file it prints" >&2
  exit 127
fi
command -v java >/dev/null || { echo "java was not found: install Java 17 or later" >&2; exit 127; }
"#;

/// One node on `{port}`, its controller on a second free port, its log in `{data}` (formatted
/// once: a restart keeps it). Retention is off: a lesson's events may carry old timestamps.
const START_NODE: &str = r#"data={data}
if [ ! -f "$data/server.properties" ]; then
  cport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat >"$data/server.properties" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$data/log
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
num.partitions=1
log.retention.ms=-1
PROPERTIES
  id=$(python3 -c 'import base64, os
while (i := base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")).startswith("-"): pass
print(i)')
  java -cp "$(cat "$cp")" kafka.tools.StorageTool format --standalone -t "$id" -c "$data/server.properties"
fi
exec java -Xmx384m -Xms64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$(cat "$cp")" kafka.Kafka "$data/server.properties"
"#;

pub fn apache() -> Builtin {
    Builtin {
        start: format!("{FIND_JARS}{START_NODE}"),
        ready: Ready::Tcp,
        stop: TERM,
        placeholders: vec![("{bootstrap}", "127.0.0.1:{port}".to_owned())],
    }
}
