"""Bounded replay against a real broker (confluent-kafka): `run_bounded_replay` fed by a consumer
of the replay group alone. The partition's end offset is captured before anything is assigned,
the consumer is assigned (never subscribed) at the plan's start only when the first record is
asked for, so a refused plan seeks nothing, and each record's next offset is committed for the
replay group, synchronously, after its audit row returned."""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from ticketflow.messaging.kafka_audit import AuditEvent, Record, SqlAlchemyAuditStore
from ticketflow.messaging.replay import ReplayPlan, ReplayReport, run_bounded_replay

# How long one poll waits for a record: an empty poll counts towards the plan's idle timeout.
POLL_S = 0.2
# The broker's answers that should come at once (watermarks).
REQUEST_TIMEOUT_S = 10.0


def encode_event(event: AuditEvent) -> bytes:
    """The record value the ticket service produces: the event as one JSON object."""
    return json.dumps(
        {
            "event_id": event.event_id,
            "tenant_id": event.tenant_id,
            "ticket_id": event.ticket_id,
            "action": event.action,
            "occurred_at": event.occurred_at,
            "payload": event.payload,
        },
        sort_keys=True,
    ).encode()


def decode_event(value: bytes | None) -> AuditEvent:
    """The event a record carries; a record that is not one raises ValueError (quarantine it)."""
    if value is None:
        raise ValueError("a record without a value is not an audit event")
    fields = json.loads(value)
    return AuditEvent(
        event_id=fields["event_id"],
        tenant_id=fields["tenant_id"],
        ticket_id=fields["ticket_id"],
        action=fields["action"],
        occurred_at=fields["occurred_at"],
        payload=fields.get("payload", {}),
    )


def replay_partition(
    config: Mapping[str, Any], plan: ReplayPlan, store: SqlAlchemyAuditStore
) -> ReplayReport:
    """Replays the plan's partition from the broker that `config` (bootstrap.servers and any
    client properties) names, with the audit store as the only effect."""
    consumer = Consumer(
        {
            **config,
            "group.id": plan.replay_group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # Assigned at an explicit offset: an offset out of range is an error, not a jump.
            "auto.offset.reset": "error",
        }
    )
    partition = TopicPartition(plan.topic, plan.partition)
    try:
        _low, captured_end = consumer.get_watermark_offsets(
            partition, timeout=REQUEST_TIMEOUT_S, cached=False
        )

        def records() -> Iterator[Record | None]:
            consumer.assign([TopicPartition(plan.topic, plan.partition, plan.start)])
            while True:
                message = consumer.poll(POLL_S)
                if message is None:
                    yield None
                    continue
                if message.error():
                    raise KafkaException(message.error())
                yield Record(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    decode_event(message.value()),
                )

        def commit(topic: str, partition: int, offset: int) -> None:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)

        return run_bounded_replay(plan, records(), store, commit, captured_end=captured_end)
    finally:
        consumer.close()
