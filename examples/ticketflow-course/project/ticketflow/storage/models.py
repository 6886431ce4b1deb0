"""The audit table. `event_id` is unique under a named constraint: the only conflict that counts
as a duplicate delivery."""

from sqlalchemy import CheckConstraint, Integer, String, Text, UniqueConstraint, create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class AuditEventRow(Base):
    __tablename__ = "audit_events"
    __table_args__ = (
        UniqueConstraint("event_id", name="audit_events_event_id_key"),
        CheckConstraint("length(action) > 0", name="audit_events_action_check"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(200), nullable=False)
    tenant_id: Mapped[str] = mapped_column(String(200), nullable=False)
    ticket_id: Mapped[str] = mapped_column(String(200), nullable=False)
    action: Mapped[str] = mapped_column(String(200), nullable=False)
    occurred_at: Mapped[str] = mapped_column(String(64), nullable=False)
    payload: Mapped[str] = mapped_column(Text, nullable=False)
    topic: Mapped[str] = mapped_column(String(249), nullable=False)
    partition: Mapped[int] = mapped_column(Integer, nullable=False)
    offset: Mapped[int] = mapped_column(Integer, nullable=False)


def make_engine(url: str = "sqlite://") -> Engine:
    """An engine with the audit schema created (in-memory SQLite by default)."""
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    return engine
