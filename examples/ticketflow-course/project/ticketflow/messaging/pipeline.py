"""The notification pipeline over real services: each audit event read from Kafka is stored in
PostgreSQL (one row per `event_id`), notified once through Redis, and only then is its next
offset committed for the group. The services' addresses come from the environment lessonprobe
gives a lesson's steps: KAFKA_BOOTSTRAP, AUDIT_DB_URL and NOTIFY_URL."""

from __future__ import annotations

import os
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ticketflow.messaging.kafka_audit import AuditEvent, Record, SqlAlchemyAuditStore
from ticketflow.messaging.kafka_replay import decode_event, encode_event
from ticketflow.notifications import RedisNotifications
from ticketflow.storage.models import AuditEventRow, Base

# The broker's answers that should come at once (watermarks, committed offsets, a commit).
REQUEST_TIMEOUT_S = 10.0


def sample_events(namespace: str, first: int, last: int) -> list[AuditEvent]:
    """Events `evt-{namespace}-{n:02}` for n in first..last, one ticket each."""
    return [
        AuditEvent(
            f"evt-{namespace}-{n:02}",
            "tenant-a",
            f"ticket-{n}",
            "ticket.updated",
            f"2026-09-22T10:{n:02}:00+00:00",
            {"version": n},
        )
        for n in range(first, last + 1)
    ]


def describe(error: BaseException) -> str:
    """An error as an operator reads it: its type and the first line of its message."""
    lines = str(error).strip().splitlines() or [""]
    return f"{type(error).__name__}: {lines[0]}"


def audit_engine(url: str) -> Engine:
    """An engine for the audit database at `url` (postgres://…), connecting only when used:
    a database that is down fails the request that needs it, not the worker's start."""
    url = url.replace("postgres://", "postgresql+psycopg://", 1)
    return create_engine(url, connect_args={"connect_timeout": 3}, pool_pre_ping=True)


@dataclass
class Pipeline:
    """One namespace's topic (partition 0), its consumer group, audit rows and notifications."""

    bootstrap: str
    engine: Engine
    notifications: RedisNotifications
    namespace: str

    @classmethod
    def from_env(cls, namespace: str) -> "Pipeline":
        return cls(
            os.environ["KAFKA_BOOTSTRAP"],
            audit_engine(os.environ["AUDIT_DB_URL"]),
            RedisNotifications(os.environ["NOTIFY_URL"], namespace),
            namespace,
        )

    @property
    def topic(self) -> str:
        return f"ticketflow.audit.{self.namespace}"

    @property
    def group(self) -> str:
        return f"ticketflow-notify-{self.namespace}"

    def publish(self, events: list[AuditEvent]) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
        for event in events:
            producer.produce(self.topic, encode_event(event), event.key.encode(), partition=0)
        if producer.flush(REQUEST_TIMEOUT_S):
            raise KafkaException("records still unsent after 10 s")
        print("published", " ".join(e.event_id for e in events))

    def _consumer(self, group: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                # The embedded broker holds each fetch for its whole wait.
                "fetch.wait.max.ms": 20,
            }
        )

    def committed(self) -> int:
        """The group's committed offset on partition 0 (0 when it has none)."""
        consumer = self._consumer(self.group)
        try:
            [partition] = consumer.committed(
                [TopicPartition(self.topic, 0)], timeout=REQUEST_TIMEOUT_S
            )
            return max(partition.offset, 0)
        finally:
            consumer.close()

    def process(self, *, stop_before_commit: bool = False) -> None:
        """Handles every record from the group's committed offset to the end of the partition,
        in order: stored, notified, then `offset + 1` committed. The first failure propagates
        with its offset uncommitted. `stop_before_commit` ends after the first record's effects,
        as a consumer that dies before its commit reaches the broker."""
        worker = Worker(self, self._consumer(self.group))
        try:
            for record in worker.records(self.committed()):
                worker.handle(record)
                if stop_before_commit:
                    print("the consumer stops before its commit")
                    return
                worker.commit(record.offset + 1)
        finally:
            worker.consumer.close()

    def replay(self) -> None:
        """Reads the whole partition again with a replay group of its own (the live group's
        offsets stay as they are) and writes audit rows only: notifications are not resent."""
        consumer = self._consumer(f"{self.group}-replay")
        worker = Worker(self, consumer)
        try:
            for record in worker.records(0):
                stored = worker.store(record)
                print(f"replay offset {record.offset} {record.event.event_id}: {stored}")
        finally:
            consumer.close()

    def status(self) -> str:
        """The group's committed offset, the namespace's audit rows and notifications; a
        service that does not answer is named with its error."""
        parts = [f"committed offset {self.committed()}"]
        try:
            with Session(self.engine) as session:
                rows = session.execute(
                    select(AuditEventRow.event_id, func.count())
                    .where(AuditEventRow.topic == self.topic)
                    .group_by(AuditEventRow.event_id)
                    .order_by(AuditEventRow.event_id)
                ).all()
            parts.append("audit rows " + (" ".join(f"{e}={n}" for e, n in rows) or "none"))
        except Exception as error:  # the lesson shows what a request meets when it is down
            parts.append(f"audit rows unavailable ({describe(error)})")
        try:
            sent = self.notifications.sent()
            parts.append(
                "notifications " + (" ".join(f"{e}={n}" for e, n in sorted(sent.items())) or "none")
            )
        except Exception as error:
            parts.append(f"notifications unavailable ({describe(error)})")
        return "; ".join(parts)


class Worker:
    """One consumer of a pipeline's partition and the effects of each record it reads."""

    def __init__(self, pipeline: Pipeline, consumer: Consumer) -> None:
        self.pipeline = pipeline
        self.consumer = consumer
        self.audit = SqlAlchemyAuditStore(pipeline.engine)

    def records(self, start: int):
        """The partition's records from `start` to its end as it is now."""
        partition = TopicPartition(self.pipeline.topic, 0)
        _low, end = self.consumer.get_watermark_offsets(
            partition, timeout=REQUEST_TIMEOUT_S, cached=False
        )
        if start >= end:
            return
        self.consumer.assign([TopicPartition(self.pipeline.topic, 0, start)])
        while True:
            message = self.consumer.poll(REQUEST_TIMEOUT_S)
            if message is None:
                raise KafkaException(f"no record at offset {start} within 10 s")
            if message.error():
                raise KafkaException(message.error())
            yield Record(message.topic(), 0, message.offset(), decode_event(message.value()))
            if message.offset() + 1 >= end:
                return

    def store(self, record: Record) -> str:
        # The schema is made on first use, inside the request: a database that is down fails
        # here, before anything is notified or committed.
        Base.metadata.create_all(self.pipeline.engine)
        applied = self.audit.apply_once(
            record.event, topic=record.topic, partition=record.partition, offset=record.offset
        )
        return "stored" if applied else "duplicate"

    def handle(self, record: Record) -> None:
        """Stores the record's event, then notifies it; prints what each did."""
        where = f"offset {record.offset} {record.event.event_id}"
        print(f"{where}: {self.store(record)}", flush=True)
        notified = self.pipeline.notifications.notify_once(record.event.event_id)
        print(f"{where}: {'notified' if notified else 'already notified'}", flush=True)

    def commit(self, offset: int) -> None:
        self.consumer.commit(
            offsets=[TopicPartition(self.pipeline.topic, 0, offset)], asynchronous=False
        )
