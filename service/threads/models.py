"""Conversation threads, their ordered messages and rolling summaries."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Integer, Text
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from service.db import Base


class Thread(Base):
    __tablename__ = "thread"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=sql("gen_random_uuid()")
    )
    user_id: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, server_default=sql("'{}'::jsonb")
    )
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
    last_message_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Message(Base):
    """One turn. `seq` is its 0-based, gap-free position in the thread."""

    __tablename__ = "message"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=sql("gen_random_uuid()")
    )
    thread_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    user_id: Mapped[str] = mapped_column(Text)
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(Text)  # user | assistant | tool | system
    # The author's name when a thread has several participants of one role.
    name: Mapped[str | None] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    tool_calls: Mapped[Any | None] = mapped_column(JSONB)
    client_message_id: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, server_default=sql("'{}'::jsonb")
    )
    # An append writes the time it reads once it holds the thread
    # (`ThreadRepository.append_messages`); the default dates rows written otherwise.
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )


class ThreadSummary(Base):
    """A compressed window [start_index, end_index) of a thread's messages (by seq)."""

    __tablename__ = "thread_summary"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=sql("gen_random_uuid()")
    )
    thread_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    sequence: Mapped[int] = mapped_column(Integer)
    start_index: Mapped[int] = mapped_column(BigInteger)
    end_index: Mapped[int] = mapped_column(BigInteger)
    message_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(UUID(as_uuid=True)), server_default=sql("'{}'")
    )
    entries: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=sql("'[]'::jsonb"))
    tokens_before: Mapped[int | None] = mapped_column(Integer)
    tokens_after: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
