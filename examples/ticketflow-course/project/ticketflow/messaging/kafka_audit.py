"""The audit consumer: one durable effect per event (an `audit_events` row), and the next offset
committed only after the store returned. No Kafka client here: the consumer takes records and a
commit callback, so the ordering can be shown and tested without a broker."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ticketflow.storage.models import AuditEventRow, make_engine


@dataclass(frozen=True)
class AuditEvent:
    event_id: str
    tenant_id: str
    ticket_id: str
    action: str
    occurred_at: str
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The Kafka key: every version of one ticket goes to the same partition."""
        return f"{self.tenant_id}:{self.ticket_id}"


@dataclass(frozen=True)
class Record:
    """A consumed record: where it was read and the event it carries."""

    topic: str
    partition: int
    offset: int
    event: AuditEvent


class SqlAlchemyAuditStore:
    """Writes each event once: a second delivery of the same `event_id` is a duplicate
    (`apply_once` returns False); any other integrity error propagates unchanged."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine if engine is not None else make_engine()

    def apply_once(self, event: AuditEvent, *, topic: str, partition: int, offset: int) -> bool:
        dialect = {"sqlite": sqlite, "postgresql": postgresql}[self.engine.dialect.name]
        statement = (
            dialect.insert(AuditEventRow)
            .values(
                event_id=event.event_id,
                tenant_id=event.tenant_id,
                ticket_id=event.ticket_id,
                action=event.action,
                occurred_at=event.occurred_at,
                payload=json.dumps(event.payload, sort_keys=True),
                topic=topic,
                partition=partition,
                offset=offset,
            )
            # Only the unique conflict on event_id is a duplicate; NOT NULL and CHECK
            # failures still raise (INSERT OR IGNORE would hide them).
            .on_conflict_do_nothing(index_elements=["event_id"])
            # The row that was inserted, or none: a driver's rowcount is not reliable here
            # (psycopg 3 answers -1 for an INSERT that returns the new id).
            .returning(AuditEventRow.event_id)
        )
        with Session(self.engine) as session, session.begin():
            return session.execute(statement).first() is not None

    def count(self) -> int:
        with Session(self.engine) as session:
            return session.scalar(select(func.count()).select_from(AuditEventRow)) or 0


Commit = Callable[[str, int, int], None]


class AuditConsumer:
    """Applies each record's event, then commits `offset + 1`: never before the effect is
    durable, never after a failed effect. A real consumer also sets
    enable.auto.commit=false, or the client's background commits defeat this order."""

    def __init__(self, store: SqlAlchemyAuditStore, commit: Commit) -> None:
        self.store = store
        self.commit = commit

    def consume(self, record: Record) -> bool:
        applied = self.store.apply_once(
            record.event, topic=record.topic, partition=record.partition, offset=record.offset
        )
        # A duplicate (applied is False) was persisted earlier: moving on is safe.
        self.commit(record.topic, record.partition, record.offset + 1)
        return applied
