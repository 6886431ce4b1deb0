#!/bin/sh
# Prepares this host's Kafka profile for the broker acceptance tests
# (tests/integration/test_kafka_remote.py): checks that the broker at BOOTSTRAP answers a
# metadata request, then writes its address to .kafka-profile, where the tests find it.
# A broker that does not answer within 10 s fails the preparation (nothing is written), so the
# tests never run against nothing. scripts/stop_kafka_profile.sh removes the profile.
#
#   scripts/prepare_kafka_profile.sh BOOTSTRAP     (else $TICKETFLOW_KAFKA_BOOTSTRAP)
#
# `python` is the project's interpreter, with confluent-kafka, SQLAlchemy and pytest installed.
set -eu
cd "$(dirname "$0")/.."
bootstrap="${1:-${TICKETFLOW_KAFKA_BOOTSTRAP:-}}"
if [ -z "$bootstrap" ]; then
  echo "usage: scripts/prepare_kafka_profile.sh BOOTSTRAP (or set TICKETFLOW_KAFKA_BOOTSTRAP)" >&2
  exit 2
fi
python - "$bootstrap" <<'PY'
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

bootstrap = sys.argv[1]
try:
    # librdkafka's own log would repeat every refused connection: the one error below says it.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    metadata = admin.list_topics(timeout=10)
except KafkaException as error:
    sys.exit(f"prepare_kafka_profile: the broker at {bootstrap} does not answer: {error}")
print(f"prepare_kafka_profile: {bootstrap} answers: {len(metadata.brokers)} broker(s), cluster {metadata.cluster_id}")
PY
printf 'TICKETFLOW_KAFKA_BOOTSTRAP=%s\n' "$bootstrap" > .kafka-profile.tmp
mv .kafka-profile.tmp .kafka-profile
