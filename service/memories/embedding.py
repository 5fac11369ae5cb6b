"""Keeping memory embeddings present and current, without ever failing a write for it.

A write's texts are embedded before its transaction begins (`embed_ahead`, the vectors
handed to the write as `TextVectors`): a hosted model's round trip then holds no pooled
connection and no row lock. If the embedder is down the memory is stored with a NULL embedding
(still found lexically) and `EmbeddingBackfill` retries after the commit, with backoff. Rows
that still lack an embedding, or carry another model's, are caught by `mneme reembed`. Vectors
are made by the live vector column's model (`service.memories.vector_columns`), and while
another column is being filled, by its model too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.db import tenant_transaction
from service.kit.admission import outside_the_gate
from service.kit.secrets import find_secret_in
from service.memories.repository import MemoryRepository
from service.memories.vector_columns import ModelVector, StorageEmbedder, VectorColumns
from service.observability import tracer
from service.providers import Embedder, EmbedderUnavailable, computes_in_process

logger = logging.getLogger("mneme.embedding")


async def embed_or_none(embedder: Embedder, texts: Sequence[str]) -> list[list[float]] | None:
    """Vectors for `texts`, or None when the embedder is unavailable (the write goes on)."""
    if not texts:
        return []
    try:
        return await embedder.embed(texts)
    except EmbedderUnavailable:
        logger.warning("embedder unavailable; storing %d memories without vectors", len(texts))
        return None


TextVectors = Mapping[str, list[float] | None]
"""A write's vectors made before its transaction began (`embed_ahead`), by text: None for the
texts of a call the embedder was unavailable for."""


async def embed_outside_a_transaction(
    embedder: Embedder, texts: Sequence[str]
) -> list[list[float]] | None:
    """`embed_or_none`, for a caller that holds no transaction: a hosted model's round trip
    is no work of the process's either, and waits outside the admission gate."""
    if computes_in_process(embedder):
        return await embed_or_none(embedder, texts)
    async with outside_the_gate():
        return await embed_or_none(embedder, texts)


async def embed_ahead(embedder: Embedder, texts: Iterable[str]) -> TextVectors:
    """The vectors of the texts a write will store, made before the write's transaction
    begins (`embed_outside_a_transaction`). A text the secret policy refuses is not sent to
    the model: the write is refused before it would store it, and its words never leave the
    service."""
    wanted = list(dict.fromkeys(text for text in texts if find_secret_in(text) is None))
    with tracer.start_as_current_span("memories.embed_ahead") as span:
        vectors = await embed_outside_a_transaction(embedder, wanted)
        span.set_attribute("mneme.embedded", vectors is not None)
    return {text: None if vectors is None else vectors[i] for i, text in enumerate(wanted)}


async def vectors_for(
    embedder: Embedder, texts: Sequence[str], ahead: TextVectors | None
) -> list[list[float]] | None:
    """`embed_or_none` of `texts`, from `ahead` when it holds every one of them (None when
    the embedder was unavailable for any); embedded now otherwise (a caller that embedded
    nothing ahead, or a text it did not foresee)."""
    if ahead is not None and all(text in ahead for text in texts):
        found = [ahead[text] for text in texts]
        vectors = [vector for vector in found if vector is not None]
        return vectors if len(vectors) == len(found) else None
    return await embed_or_none(embedder, texts)


class EmbeddingBackfill:
    def __init__(
        self,
        vector_columns: VectorColumns,
        sessionmaker: async_sessionmaker[AsyncSession],
        retry_delays_seconds: Sequence[float] = (1.0, 5.0, 30.0),
    ) -> None:
        self.vector_columns = vector_columns
        self._sessionmaker = sessionmaker
        self.retry_delays = tuple(retry_delays_seconds)

    @property
    def embedder(self) -> StorageEmbedder:
        """The embedder writes store vectors with (`VectorColumns.storage_embedder`)."""
        return self.vector_columns.storage_embedder()

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        """Run `embedder` as the configured model's (e.g. one that fails, to see a write
        survive it)."""
        self.vector_columns.configure(embedder)

    async def retry(self, tenant_id: str, memory_ids: list[uuid.UUID]) -> None:
        """Embed these memories (`embed_missing`), retrying with backoff while an embedder
        stays down."""
        for delay in (0.0, *self.retry_delays):
            if delay:
                await asyncio.sleep(delay)
            try:
                await self.embed_missing(tenant_id, memory_ids)
            except EmbedderUnavailable:
                continue
            return
        logger.warning(
            "%d memories still unembedded; `mneme reembed` will pick them up", len(memory_ids)
        )

    async def embed_missing(self, tenant_id: str, memory_ids: list[uuid.UUID]) -> None:
        """Embed those of `memory_ids` that still lack a vector in a column this process keeps
        vectors in (`VectorColumns.kept`: the live one, and one being filled), each with its
        column's model; raises EmbedderUnavailable when one of those models is down, once what
        the others made is stored."""
        down: EmbedderUnavailable | None = None
        for column, embedder in self.vector_columns.kept():
            async with tenant_transaction(self._sessionmaker, tenant_id) as session:
                rows = await MemoryRepository(session, tenant_id).unembedded_among(
                    memory_ids, column.name
                )
            if not rows:
                continue
            try:
                vectors = await embedder.embed([text for _, text in rows])
            except EmbedderUnavailable as error:
                down = error
                continue
            async with tenant_transaction(self._sessionmaker, tenant_id) as session:
                # After the tenant's write lock, as every write to its data: a purge of the
                # tenant never meets the updates half-way (rows it deleted, rows it waits for).
                await AccountRepository(session, tenant_id).hold_tenant_writes()
                repository = MemoryRepository(session, tenant_id)
                for (memory_id, text), vector in zip(rows, vectors, strict=True):
                    # Placed by its model as the columns stand now, which may have changed
                    # since they were read.
                    values = self.vector_columns.stored_values(
                        ModelVector(vector, embedder.model_name), clear_others=False
                    )
                    if values:
                        await repository.set_vectors(memory_id, values, text)
        if down is not None:
            raise down
