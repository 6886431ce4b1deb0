"""Bounded replay of one partition: its own consumer group, a half-open range [start, stop),
the end offset captured before seeking, contiguous offsets, an idle timeout and a wall-clock
deadline, and the SQL audit store as its only effect."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ticketflow.messaging.kafka_audit import Commit, Record, SqlAlchemyAuditStore


class ReplayError(Exception):
    """The replay stopped before its exclusive stop: never a partial success."""


@dataclass(frozen=True)
class ReplayPlan:
    live_group: str
    replay_group: str
    topic: str
    partition: int
    start: int
    stop: int
    deadline_s: float = 20.0
    idle_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        if self.live_group == self.replay_group:
            raise ValueError("the replay group must differ from the live group")
        if self.start < 0 or self.stop <= self.start:
            raise ValueError(f"[{self.start}, {self.stop}) is not a non-empty range")


@dataclass(frozen=True)
class ReplayReport:
    records: int
    inserted: int
    duplicates: int
    last_commit: int


def run_bounded_replay(
    plan: ReplayPlan,
    records: Iterable[Record | None],
    store: SqlAlchemyAuditStore,
    commit: Commit,
    captured_end: int,
    clock: Callable[[], float] = time.monotonic,
) -> ReplayReport:
    """Replays `records` (None stands for an empty poll) of the plan's partition."""
    if plan.stop > captured_end:
        raise ReplayError(f"stop {plan.stop} > captured end {captured_end}: refused before seek")
    started = clock()
    idle_since = started
    expected = plan.start
    inserted = duplicates = 0
    last_commit = plan.start
    stream: Iterator[Record | None] = iter(records)
    while expected < plan.stop:
        now = clock()
        if now - started > plan.deadline_s:
            raise ReplayError(f"deadline before stop {plan.stop}; committed {last_commit}")
        record = next(stream, None)
        if record is None:
            if clock() - idle_since > plan.idle_timeout_s:
                raise ReplayError(f"idle before stop {plan.stop}; committed {last_commit}")
            continue
        idle_since = clock()
        if record.partition != plan.partition or record.offset != expected:
            raise ReplayError(f"gap: expected {expected}, got {record.offset}")
        if store.apply_once(record.event, topic=record.topic, partition=record.partition, offset=record.offset):
            inserted += 1
        else:
            duplicates += 1
        commit(plan.topic, plan.partition, record.offset + 1)
        last_commit = record.offset + 1
        expected += 1
    return ReplayReport(plan.stop - plan.start, inserted, duplicates, last_commit)
