#!/bin/sh
# Ends this host's Kafka profile for the broker acceptance tests: removes the .kafka-profile that
# scripts/prepare_kafka_profile.sh wrote, so no later run finds a broker nobody prepared.
set -eu
cd "$(dirname "$0")/.."
rm -f .kafka-profile .kafka-profile.tmp
