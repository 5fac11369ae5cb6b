"""Memories (semantic / episodic / procedural) and their change history."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Boolean, Computed, DateTime, Float, Integer, Text
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import Mapped, mapped_column, object_session

from service.db import Base

_WHITESPACE = re.compile(r"\s+")

SHOWN_VECTOR_MODEL = "mneme.memories.shown_vector_model"
"""`Session.info` key: the field (`embedding_model`, `embedding_alt_model`) that names the model
of the vector the session's tenant's searches compare, which `Memory.vector_model` shows."""


def normalise_text(text: str) -> str:
    """The text as exact-duplicate detection compares it: trimmed, each run of whitespace one
    space, in lower case (the `content_hash` column's expression)."""
    return _WHITESPACE.sub(" ", text.strip()).lower()


class Memory(Base):
    __tablename__ = "memory"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=sql("gen_random_uuid()")
    )
    scope: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(
        Text, Computed("md5(lower(regexp_replace(btrim(text), '\\s+', ' ', 'g')))")
    )
    tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("to_tsvector('english', text)"))
    # `length(tsv)` (distinct lexemes, BM25's document length), stored: the statistics of a
    # search read it from an index instead of every row's tsvector. The same expression as
    # `tsv`'s, since a generated column cannot refer to another.
    tsv_length: Mapped[int] = mapped_column(
        Integer, Computed("length(to_tsvector('english', text))")
    )
    # The column's dimension is a deployment setting fixed by the migration; the ORM only needs
    # the type for binding. Deferred: vectors are large and most reads do not need them.
    embedding: Mapped[Any] = mapped_column(Vector(), deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(Text)
    # The second vector column, filled while the embedding model changes (its dimension is the
    # new model's; `service.memories.vector_columns`).
    embedding_alt: Mapped[Any] = mapped_column(Vector(), deferred=True)
    embedding_alt_model: Mapped[str | None] = mapped_column(Text)

    @property
    def vector_model(self) -> str | None:
        """The model of the memory's vector in the vector column its tenant's searches read,
        as its transaction was told (`MemoryRepository.show_vector_models_of`; the first
        column's when it was not): the model a search hit of it names, None when it has no
        vector there (a search finds it by its words alone)."""
        session = object_session(self)
        field = None if session is None else session.info.get(SHOWN_VECTOR_MODEL)
        model: str | None = getattr(self, field or "embedding_model")
        return model

    confidence: Mapped[float] = mapped_column(Float, server_default=sql("1.0"))
    lifecycle: Mapped[str] = mapped_column(Text, server_default=sql("'confirmed'"))
    needs_review: Mapped[bool] = mapped_column(Boolean, server_default=sql("false"))
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    source_thread_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    source_message_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(UUID(as_uuid=True)), server_default=sql("'{}'")
    )
    evidence: Mapped[str | None] = mapped_column(Text)
    # Who said it, for a memory of something said in a conversation (the author's name).
    speaker: Mapped[str | None] = mapped_column(Text)
    event_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
    last_confirmed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    invalid_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", JSONB, server_default=sql("'{}'::jsonb")
    )
    # A client's own key (unique per owner, kind and category): such a memory is addressed by
    # its key, and may repeat another memory's text.
    store_key: Mapped[str | None] = mapped_column(Text)


class MemoryEvent(Base):
    """One change to a memory: add / update / supersede / delete, with old and new text."""

    __tablename__ = "memory_event"

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=sql("gen_random_uuid()")
    )
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    user_id: Mapped[str | None] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    old_text: Mapped[str | None] = mapped_column(Text)
    new_text: Mapped[str | None] = mapped_column(Text)
    changes: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sql("'{}'::jsonb"))
    actor: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=sql("now()")
    )
