"""Lesson 30's broker acceptance test, run on an authorized host whose prepare step made a Kafka
profile (scripts/prepare_kafka_profile.sh): a fresh topic holds three days of audit events, some
delivered twice; the live service's group consumes all of it with its three effects (an audit
row, a notification, an SLA count) and commits; a few of yesterday's audit rows go missing; then
yesterday is replayed partition by partition with a group of its own over [start, stop), through
the course's replay code, audit rows only. Every claim is checked against the broker's answers
(committed offsets, watermarks, timestamp lookups) and the rows read back.

Without a Kafka profile the test is skipped, never passed: it says where a profile comes from.
A host without confluent-kafka cannot even collect it: an error, not a skip."""

from __future__ import annotations

import os
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.orm import Session

from ticketflow.messaging.kafka_audit import AuditConsumer, AuditEvent, Record, SqlAlchemyAuditStore
from ticketflow.messaging.kafka_replay import decode_event, encode_event, replay_partition
from ticketflow.messaging.replay import ReplayPlan
from ticketflow.storage.models import AuditEventRow, make_engine

# Where the prepare step writes the profile; TICKETFLOW_KAFKA_BOOTSTRAP, when set, wins.
PROFILE = Path(__file__).resolve().parents[2] / ".kafka-profile"
PARTITIONS = 3
YESTERDAY = datetime(2026, 9, 22, tzinfo=timezone.utc)
EVENTS_PER_DAY = 240
# Event ids delivered a second time by the producer (a retry after a lost acknowledgement).
REDELIVERED = 12
# Yesterday's audit rows the live service lost (deleted before the replay, restored by it).
LOST = 7
DEADLINE_S = 30.0
T = 10.0


def kafka_bootstrap() -> str | None:
    if os.environ.get("TICKETFLOW_KAFKA_BOOTSTRAP"):
        return os.environ["TICKETFLOW_KAFKA_BOOTSTRAP"]
    if PROFILE.exists():
        for line in PROFILE.read_text().splitlines():
            name, _, value = line.partition("=")
            if name.strip() == "TICKETFLOW_KAFKA_BOOTSTRAP" and value.strip():
                return value.strip()
    return None


@pytest.fixture
def kafka() -> dict[str, str]:
    """The profile's client configuration, once its broker answered a metadata request; a
    broker that does not answer is an error of this fixture (ERROR, not FAIL, not SKIP)."""
    bootstrap = kafka_bootstrap()
    if bootstrap is None:
        pytest.skip(
            "no Kafka profile on this host: run scripts/prepare_kafka_profile.sh BOOTSTRAP first "
            "(the host's prepare step), or set TICKETFLOW_KAFKA_BOOTSTRAP"
        )
    config = {"bootstrap.servers": bootstrap}
    try:
        AdminClient({**config, "log_level": 0}).list_topics(timeout=T)
    except KafkaException as error:
        raise RuntimeError(
            f"the Kafka profile's broker at {bootstrap} does not answer: {error}"
        ) from error
    return config


def consumer(config: dict[str, str], group: str) -> Consumer:
    return Consumer({**config, "group.id": group, "enable.auto.commit": False})


def committed(config: dict[str, str], group: str, topic: str) -> list[int | None]:
    """The group's committed offset on each partition, as the broker answers it."""
    reader = consumer(config, group)
    try:
        answer = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=T)
    finally:
        reader.close()
    return [
        tp.offset if tp.offset >= 0 else None for tp in sorted(answer, key=lambda tp: tp.partition)
    ]


def ends(config: dict[str, str], topic: str) -> list[int]:
    reader = consumer(config, "ticketflow-acceptance-watermarks")
    try:
        return [
            reader.get_watermark_offsets(TopicPartition(topic, p), timeout=T, cached=False)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        reader.close()


def offsets_at(config: dict[str, str], topic: str, when: datetime) -> list[int]:
    """The first offset at or after `when` on each partition (the broker's timestamp index)."""
    reader = consumer(config, "ticketflow-acceptance-lookup")
    millis = int(when.timestamp() * 1000)
    try:
        answer = reader.offsets_for_times(
            [TopicPartition(topic, p, millis) for p in range(PARTITIONS)], timeout=T
        )
    finally:
        reader.close()
    found = sorted(answer, key=lambda tp: tp.partition)
    assert all(tp.offset >= 0 for tp in found), f"no offset at {when} in {found}"
    return [tp.offset for tp in found]


def create_topic(config: dict[str, str], topic: str) -> None:
    admin = AdminClient(config)  # held until the answer: a dropped client abandons its request
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)]
    )
    futures[topic].result(timeout=T)


def produce_three_days(config: dict[str, str], topic: str) -> list[AuditEvent]:
    """The day before, yesterday and today, in time order; a few of yesterday's events are
    produced twice. Returns every event produced, the second deliveries included."""
    # Idempotent: a batch retried (a fresh topic's leader is not known everywhere at once) keeps
    # its place, so each partition stays in time order and the timestamp lookups mean a day.
    producer = Producer({**config, "linger.ms": 5, "enable.idempotence": True})
    sent: list[AuditEvent] = []
    failures: list[str] = []

    def acknowledged(error, message) -> None:
        if error is not None:
            failures.append(str(error))

    for day in (-1, 0, 1):
        start = YESTERDAY + timedelta(days=day)
        for i in range(EVENTS_PER_DAY):
            at = start + timedelta(seconds=i * 86_400 // EVENTS_PER_DAY)
            event = AuditEvent(
                event_id=f"evt-{at:%Y%m%d}-{i}",
                tenant_id=f"tenant-{'ab'[i % 2]}",
                ticket_id=f"ticket-{i % 40}",
                action="ticket.updated",
                occurred_at=at.isoformat(),
                payload={"version": i},
            )
            deliveries = 2 if day == 0 and i % (EVENTS_PER_DAY // REDELIVERED) == 0 else 1
            for _ in range(deliveries):
                producer.produce(
                    topic,
                    value=encode_event(event),
                    key=event.key,
                    partition=i % PARTITIONS,
                    timestamp=int(at.timestamp() * 1000),
                    on_delivery=acknowledged,
                )
                sent.append(event)
                producer.poll(0)
    assert producer.flush(T) == 0, "records left unacknowledged"
    assert failures == [], failures
    return sent


EFFECTS = MetaData()
notifications = Table(
    "notifications",
    EFFECTS,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(200), nullable=False),
    Column("tenant_id", String(200), nullable=False),
)
sla_counts = Table(
    "sla_counts",
    EFFECTS,
    Column("tenant_id", String(200), primary_key=True),
    Column("changes", Integer, nullable=False),
)


class LiveEffects:
    """The live service's effects of one event: its audit row, and only when that row is new a
    notification and one more SLA change for the tenant. The replay never gets this object."""

    def __init__(self, audit: SqlAlchemyAuditStore) -> None:
        self.audit = audit
        EFFECTS.create_all(audit.engine)

    def apply_once(self, event: AuditEvent, *, topic: str, partition: int, offset: int) -> bool:
        if not self.audit.apply_once(event, topic=topic, partition=partition, offset=offset):
            return False
        with Session(self.audit.engine) as session, session.begin():
            session.execute(
                insert(notifications).values(event_id=event.event_id, tenant_id=event.tenant_id)
            )
            bumped = session.execute(
                update(sla_counts)
                .where(sla_counts.c.tenant_id == event.tenant_id)
                .values(changes=sla_counts.c.changes + 1)
            )
            if bumped.rowcount == 0:
                session.execute(insert(sla_counts).values(tenant_id=event.tenant_id, changes=1))
        return True


def run_live_group(config: dict[str, str], group: str, topic: str, effects: LiveEffects) -> int:
    """The live service's consumer: subscribed as `group`, every record applied then its next
    offset committed, until the group's position is at the end of every partition."""
    live = Consumer(
        {**config, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    target = ends(config, topic)
    position = [0] * PARTITIONS
    audit = AuditConsumer(
        effects,
        lambda t, p, o: live.commit(offsets=[TopicPartition(t, p, o)], asynchronous=False),
    )
    consumed = 0
    started = time.monotonic()
    try:
        live.subscribe([topic])
        while position != target:
            assert (
                time.monotonic() - started < DEADLINE_S
            ), f"live group at {position}, end {target}"
            message = live.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            audit.consume(
                Record(
                    message.topic(),
                    message.partition(),
                    message.offset(),
                    decode_event(message.value()),
                )
            )
            position[message.partition()] = message.offset() + 1
            consumed += 1
    finally:
        live.close()
    return consumed


def effect_counts(engine) -> tuple[int, int]:
    with Session(engine) as session:
        sent = session.scalar(select(func.count()).select_from(notifications))
        sla = session.scalar(select(func.coalesce(func.sum(sla_counts.c.changes), 0)))
    return sent, sla


def audit_counts(engine) -> tuple[int, int]:
    with Session(engine) as session:
        rows = session.scalar(select(func.count()).select_from(AuditEventRow))
        distinct = session.scalar(select(func.count(func.distinct(AuditEventRow.event_id))))
    return rows, distinct


def test_bounded_replay_preserves_live_offsets_and_business_effect_counts(kafka):
    run = uuid.uuid4().hex[:12]
    topic = f"ticketflow.audit.v1.acceptance-{run}"
    live_group = f"ticketflow-audit-v1.acceptance-{run}"
    replay_group = f"ticketflow-replay-20260922.acceptance-{run}"
    create_topic(kafka, topic)
    sent = produce_three_days(kafka, topic)
    distinct_ids = {e.event_id for e in sent}
    assert len(sent) == 3 * EVENTS_PER_DAY + REDELIVERED
    end = ends(kafka, topic)
    assert sum(end) == len(sent), (end, len(sent))

    engine = make_engine()  # in-memory SQLite: one connection, this thread's
    audit = SqlAlchemyAuditStore(engine)
    live = LiveEffects(audit)
    assert run_live_group(kafka, live_group, topic, live) == len(sent)
    live_offsets = committed(kafka, live_group, topic)
    assert live_offsets == end, "the live group committed the end of every partition"
    assert audit_counts(engine) == (len(distinct_ids), len(distinct_ids))
    effects = effect_counts(engine)
    assert effects == (len(distinct_ids), len(distinct_ids))

    # The live service lost a few of yesterday's rows: the replay is there to restore them.
    lost = sorted({e.event_id for e in sent if e.occurred_at.startswith("2026-09-22")})[:LOST]
    with Session(engine) as session, session.begin():
        session.execute(delete(AuditEventRow).where(AuditEventRow.event_id.in_(lost)))

    # Yesterday, per partition: the broker's own timestamp index gives [start, stop).
    start = offsets_at(kafka, topic, YESTERDAY)
    stop = offsets_at(kafka, topic, YESTERDAY + timedelta(days=1))
    assert all(0 < a < b < e for a, b, e in zip(start, stop, end)), (start, stop, end)
    reports = [
        replay_partition(
            kafka,
            ReplayPlan(
                live_group, replay_group, topic, p, start[p], stop[p], deadline_s=DEADLINE_S
            ),
            audit,
        )
        for p in range(PARTITIONS)
    ]

    assert committed(kafka, live_group, topic) == live_offsets, "the replay moved the live group"
    assert committed(kafka, replay_group, topic) == stop, "the replay group is not at stop"
    assert [r.last_commit for r in reports] == stop
    assert sum(r.records for r in reports) == sum(b - a for a, b in zip(start, stop))
    assert sum(r.inserted for r in reports) == LOST, reports
    assert sum(r.duplicates for r in reports) == sum(r.records for r in reports) - LOST
    assert audit_counts(engine) == (
        len(distinct_ids),
        len(distinct_ids),
    ), "audit rows are not one per event_id"
    assert effect_counts(engine) == effects, "the replay sent notifications or changed SLA counts"
