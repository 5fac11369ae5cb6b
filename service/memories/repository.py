"""All SQL of the memories domain; every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Boolean,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from service.memories.models import Memory, MemoryEvent

# The filters every candidate set shares. Owner: the user's own memories and/or the tenant's
# org memories. Expired memories are invisible everywhere.
_CANDIDATE_FILTER = """
        m.tenant_id = :tenant_id
    AND ((:include_user AND m.scope = 'user' AND m.user_id = :user_id)
         OR (:include_org AND m.scope = 'org'))
    AND (CAST(:kinds AS text[]) IS NULL OR m.kind = ANY(CAST(:kinds AS text[])))
    AND (CAST(:categories AS text[]) IS NULL OR m.category = ANY(CAST(:categories AS text[])))
    AND m.lifecycle = ANY(CAST(:lifecycles AS text[]))
    AND (m.expires_at IS NULL OR m.expires_at > now())
    AND (CAST(:event_after AS timestamptz) IS NULL
         OR coalesce(m.event_at, m.created_at) >= CAST(:event_after AS timestamptz))
    AND (CAST(:event_before AS timestamptz) IS NULL
         OR coalesce(m.event_at, m.created_at) < CAST(:event_before AS timestamptz))
"""

HYBRID_SEARCH_SQL = f"""
WITH query_terms AS (
    -- An OR over the question's lexemes (stop words dropped by the english config);
    -- plainto_tsquery would AND them and a natural question would match almost nothing.
    SELECT (SELECT string_agg(quote_literal(lexeme), ' | ')
              FROM unnest(tsvector_to_array(to_tsvector('english', :query))) AS lexeme
           )::tsquery AS tsq
),
lexical_hits AS (
    SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS rank
      FROM (SELECT m.id, ts_rank_cd(m.tsv, q.tsq) AS score
              FROM memory m CROSS JOIN query_terms q
             WHERE :use_lexical AND q.tsq IS NOT NULL AND m.tsv @@ q.tsq
               AND {_CANDIDATE_FILTER}
             ORDER BY score DESC, m.id
             LIMIT :pool) AS ranked
),
vector_hits AS (
    -- HNSW with pgvector's iterative scan (hnsw.iterative_scan, set per connection), so a scan
    -- filtered to one user keeps going until it has found :pool rows that pass the filter.
    SELECT id, 1 - distance AS cosine, row_number() OVER (ORDER BY distance, id) AS rank
      FROM (SELECT m.id, m.embedding <=> :query_embedding AS distance
              FROM memory m
             WHERE :use_vector AND m.embedding IS NOT NULL
               AND {_CANDIDATE_FILTER}
             ORDER BY m.embedding <=> :query_embedding
             LIMIT :pool) AS nearest
),
fused AS (
    SELECT coalesce(l.id, v.id) AS id,
           l.rank AS lexical_rank, l.score AS lexical_score,
           v.rank AS vector_rank, v.cosine AS vector_cosine,
           CASE WHEN :fusion = 'linear' THEN
                    -- Magnitude-aware: a perfect vector match outscores a weak lexical one.
                    :lexical_weight * coalesce(l.score / nullif(max(l.score) OVER (), 0), 0)
                    + (1 - :lexical_weight) * greatest(coalesce(v.cosine, 0), 0)
                ELSE coalesce(1.0 / (:rrf_k + l.rank), 0) + coalesce(1.0 / (:rrf_k + v.rank), 0)
           END AS fused_score
      FROM lexical_hits l FULL OUTER JOIN vector_hits v ON v.id = l.id
),
scored AS (
    SELECT f.*,
           (1 - :recency_weight) + :recency_weight * decay.factor AS recency_factor,
           (1 - :confidence_weight) + :confidence_weight * m.confidence AS confidence_factor
      FROM fused f
      JOIN memory m ON m.tenant_id = :tenant_id AND m.id = f.id
      CROSS JOIN LATERAL (
          SELECT CASE WHEN half_life.days <= 0 THEN 1.0
                      ELSE power(0.5, greatest(extract(epoch FROM now() - greatest(
                               coalesce(m.event_at, m.created_at),
                               coalesce(m.last_confirmed_at, '-infinity'))), 0)
                           / 86400.0 / half_life.days)
                 END AS factor
            FROM (SELECT CASE m.kind WHEN 'semantic' THEN :half_life_semantic
                                     WHEN 'episodic' THEN :half_life_episodic
                                     ELSE :half_life_procedural END AS days) AS half_life
      ) AS decay
)
SELECT s.id, s.lexical_rank, s.lexical_score, s.vector_rank, s.vector_cosine, s.fused_score,
       s.recency_factor, s.confidence_factor,
       s.fused_score * s.recency_factor * s.confidence_factor AS final_score,
       CASE WHEN :with_embeddings THEN m.embedding END AS embedding
  FROM scored s
  JOIN memory m ON m.tenant_id = :tenant_id AND m.id = s.id
 ORDER BY final_score DESC, s.id
 LIMIT :limit
"""  # noqa: S608 - interpolates only the constant filter above, never input
"""One statement: lexical (GIN tsvector, OR query, ts_rank_cd) and vector (HNSW cosine)
candidate sets, fused (RRF or linear), decayed by kind-aware recency and confidence. Returns
each hit's id and every component score, best first."""

_SEARCH_STATEMENT = (
    text(HYBRID_SEARCH_SQL)
    .bindparams(
        bindparam("query_embedding", type_=Vector()),
        bindparam("kinds", type_=ARRAY(Text)),
        bindparam("categories", type_=ARRAY(Text)),
        bindparam("lifecycles", type_=ARRAY(Text)),
        bindparam("event_after", type_=DateTime(timezone=True)),
        bindparam("event_before", type_=DateTime(timezone=True)),
        bindparam("include_user", type_=Boolean()),
        bindparam("include_org", type_=Boolean()),
        bindparam("use_lexical", type_=Boolean()),
        bindparam("use_vector", type_=Boolean()),
        bindparam("with_embeddings", type_=Boolean()),
        bindparam("pool", type_=Integer()),
        bindparam("limit", type_=Integer()),
        bindparam("rrf_k", type_=Integer()),
        bindparam("lexical_weight", type_=Float()),
        bindparam("recency_weight", type_=Float()),
        bindparam("confidence_weight", type_=Float()),
        bindparam("half_life_semantic", type_=Float()),
        bindparam("half_life_episodic", type_=Float()),
        bindparam("half_life_procedural", type_=Float()),
    )
    .columns(embedding=Vector())
)


WRITER_LOCK_SQL = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
"""Serialise the derived writes (extraction passes, turn storage, compaction) to one owner's
memories until the transaction ends. Explicit API writes do not take it: they never read a
snapshot to reconcile against."""


@dataclass(frozen=True)
class SearchParams:
    user_id: str | None
    include_user: bool
    include_org: bool
    query: str
    query_embedding: list[float] | None
    kinds: Sequence[str] | None
    categories: Sequence[str] | None
    lifecycles: list[str]
    event_after: datetime | None
    event_before: datetime | None
    use_lexical: bool
    use_vector: bool
    pool: int
    limit: int
    fusion: str
    rrf_k: int
    lexical_weight: float
    recency_weight: float
    confidence_weight: float
    half_life_semantic: float
    half_life_episodic: float
    half_life_procedural: float
    with_embeddings: bool


@dataclass(frozen=True)
class SearchRow:
    id: uuid.UUID
    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_cosine: float | None
    fused_score: float
    recency_factor: float
    confidence_factor: float
    final_score: float
    embedding: list[float] | None


@dataclass(frozen=True)
class Owner:
    """Whose memories a statement touches: one user's, or the tenant's org-shared ones."""

    scope: str
    user_id: str | None

    @classmethod
    def user(cls, user_id: str) -> Owner:
        return cls("user", user_id)

    @classmethod
    def org(cls) -> Owner:
        return cls("org", None)


class MemoryRepository:
    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    def _owned(self, *owners: Owner) -> Select[Memory]:
        """Live (unexpired) memories of any of `owners` in this tenant."""
        return select(Memory).where(
            Memory.tenant_id == self._tenant_id,
            or_(*(self._owner_clause(owner) for owner in owners)),
            or_(Memory.expires_at.is_(None), Memory.expires_at > func.now()),
        )

    @staticmethod
    def _owner_clause(owner: Owner) -> ColumnElement[bool]:
        if owner.user_id is None:
            return Memory.scope == owner.scope
        return and_(Memory.scope == owner.scope, Memory.user_id == owner.user_id)

    async def insert_unless_duplicate(self, values: dict[str, Any]) -> Memory | None:
        """Insert a memory; None when a live memory with the same owner/kind/text exists."""
        statement = (
            pg_insert(Memory)
            .values(tenant_id=self._tenant_id, **values)
            .on_conflict_do_nothing(
                index_elements=[
                    Memory.tenant_id,
                    Memory.scope,
                    # Literals, not bound parameters: Postgres infers the unique index from them.
                    func.coalesce(Memory.user_id, literal_column("''")),
                    Memory.kind,
                    Memory.content_hash,
                ],
                index_where=text("lifecycle <> 'superseded'"),
            )
            .returning(Memory)
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def find_live_duplicate(self, owner: Owner, kind: str, text_value: str) -> Memory | None:
        statement = self._owned(owner).where(
            Memory.kind == kind,
            Memory.content_hash == _content_hash(text_value),
            Memory.lifecycle != "superseded",
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def lock_writers(self, owner: Owner) -> None:
        key = f"memory_writes:{self._tenant_id}:{owner.scope}:{owner.user_id or ''}"
        await self._session.execute(WRITER_LOCK_SQL, {"key": key})

    async def related_live(
        self,
        owner: Owner,
        kind: str,
        *,
        text_value: str,
        vector: list[float] | None,
        categories: Sequence[str],
        nearest: int,
    ) -> list[tuple[Memory, float | None]]:
        """The owner's live memories of `kind` a new one must be reconciled with: the `nearest`
        by cosine to `vector`, those in `categories` and an exact duplicate of `text_value`,
        each with its cosine to `vector` (None without vectors)."""
        live = self._owned(owner).where(Memory.kind == kind, Memory.lifecycle != "superseded")
        conditions: list[ColumnElement[bool]] = [
            Memory.content_hash == _content_hash(text_value),
        ]
        if categories:
            conditions.append(Memory.category.in_(list(categories)))
        cosine: ColumnElement[Any] = literal_column("NULL")
        if vector is not None:
            distance = Memory.embedding.cosine_distance(vector)
            nearest_ids = (
                live.with_only_columns(Memory.id)
                .where(Memory.embedding.is_not(None))
                .order_by(distance)
                .limit(nearest)
            )
            conditions.append(Memory.id.in_(nearest_ids.scalar_subquery()))
            cosine = 1 - distance
        statement = live.add_columns(cosine.label("cosine")).where(or_(*conditions))
        rows = (await self._session.execute(statement)).all()
        return [(row[0], None if row[1] is None else float(row[1])) for row in rows]

    async def live_owned(self, owner: Owner, kind: str, *, limit: int) -> list[Memory]:
        """The owner's live memories of `kind`, oldest first."""
        statement = (
            self._owned(owner)
            .where(Memory.kind == kind, Memory.lifecycle != "superseded")
            .order_by(Memory.created_at, Memory.id)
            .limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def get(
        self, owner: Owner, memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory | None:
        statement = self._owned(owner).where(Memory.id == memory_id)
        if for_update:
            # The locked row is the truth: refresh a copy the session may hold from earlier.
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def reload_many(self, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        """Memories by id as stored now, refreshing copies the session holds from earlier."""
        statement = (
            select(Memory)
            .where(Memory.tenant_id == self._tenant_id, Memory.id.in_(memory_ids))
            .execution_options(populate_existing=True)
        )
        return {memory.id: memory for memory in (await self._session.execute(statement)).scalars()}

    async def get_many(self, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, Memory]:
        statement = select(Memory).where(
            Memory.tenant_id == self._tenant_id, Memory.id.in_(memory_ids)
        )
        return {memory.id: memory for memory in (await self._session.execute(statement)).scalars()}

    async def list_page(
        self,
        owners: Sequence[Owner],
        *,
        kinds: Sequence[str] | None,
        categories: Sequence[str] | None,
        lifecycles: Sequence[str],
        created_after: datetime | None,
        created_before: datetime | None,
        event_after: datetime | None,
        event_before: datetime | None,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Memory]:
        statement = self._filtered(
            self._owned(*owners),
            kinds=kinds,
            categories=categories,
            lifecycles=lifecycles,
            created_after=created_after,
            created_before=created_before,
            event_after=event_after,
            event_before=event_before,
        )
        if after is not None:
            statement = statement.where(
                func.row(Memory.created_at, Memory.id) < func.row(after[0], after[1])
            )
        statement = statement.order_by(Memory.created_at.desc(), Memory.id.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    @staticmethod
    def _filtered(
        statement: Select[Memory],
        *,
        kinds: Sequence[str] | None,
        categories: Sequence[str] | None,
        lifecycles: Sequence[str] | None,
        created_after: datetime | None,
        created_before: datetime | None,
        event_after: datetime | None,
        event_before: datetime | None,
    ) -> Select[Memory]:
        if kinds:
            statement = statement.where(Memory.kind.in_(kinds))
        if categories:
            statement = statement.where(Memory.category.in_(categories))
        if lifecycles:
            statement = statement.where(Memory.lifecycle.in_(lifecycles))
        if created_after is not None:
            statement = statement.where(Memory.created_at >= created_after)
        if created_before is not None:
            statement = statement.where(Memory.created_at < created_before)
        event_time = func.coalesce(Memory.event_at, Memory.created_at)
        if event_after is not None:
            statement = statement.where(event_time >= event_after)
        if event_before is not None:
            statement = statement.where(event_time < event_before)
        return statement

    async def matching_for_delete(
        self,
        owner: Owner,
        *,
        kinds: Sequence[str] | None,
        categories: Sequence[str] | None,
        lifecycles: Sequence[str] | None,
        created_after: datetime | None,
        created_before: datetime | None,
    ) -> list[Memory]:
        statement = self._filtered(
            self._owned(owner),
            kinds=kinds,
            categories=categories,
            lifecycles=lifecycles,
            created_after=created_after,
            created_before=created_before,
            event_after=None,
            event_before=None,
        ).with_for_update()
        return list((await self._session.execute(statement)).scalars())

    async def from_thread(self, owner: Owner, thread_id: uuid.UUID) -> list[Memory]:
        """The owner's memories whose provenance is the thread, locked for deletion."""
        statement = self._owned(owner).where(Memory.source_thread_id == thread_id).with_for_update()
        return list((await self._session.execute(statement)).scalars())

    async def update(self, memory_id: uuid.UUID, values: dict[str, Any]) -> Memory:
        statement = (
            update(Memory)
            .where(Memory.tenant_id == self._tenant_id, Memory.id == memory_id)
            .values(updated_at=func.now(), **values)
            .returning(Memory)
            # The row may already sit in the identity map: refresh it from what was written.
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        return (await self._session.execute(statement)).scalar_one()

    async def delete_many(self, memory_ids: list[uuid.UUID]) -> None:
        if memory_ids:
            await self._session.execute(
                delete(Memory)
                .where(Memory.tenant_id == self._tenant_id, Memory.id.in_(memory_ids))
                .execution_options(synchronize_session=False)
            )

    async def set_embedding(
        self, memory_id: uuid.UUID, embedding: list[float], model: str, expected_text: str
    ) -> bool:
        """Store an embedding unless the text changed meanwhile (then it is stale)."""
        statement = (
            update(Memory)
            .where(
                Memory.tenant_id == self._tenant_id,
                Memory.id == memory_id,
                Memory.text == expected_text,
            )
            .values(embedding=embedding, embedding_model=model)
            .execution_options(synchronize_session=False)
        )
        result = await self._session.execute(statement)
        return bool(getattr(result, "rowcount", 0))

    async def add_events(self, events: list[MemoryEvent]) -> None:
        self._session.add_all(events)
        await self._session.flush()

    async def history(self, owner: Owner, memory_id: uuid.UUID) -> list[MemoryEvent]:
        statement = (
            select(MemoryEvent)
            .where(MemoryEvent.tenant_id == self._tenant_id, MemoryEvent.memory_id == memory_id)
            .order_by(MemoryEvent.created_at, MemoryEvent.id)
        )
        statement = statement.where(
            MemoryEvent.user_id.is_(None)
            if owner.user_id is None
            else MemoryEvent.user_id == owner.user_id
        )
        return list((await self._session.execute(statement)).scalars())

    async def touched_by_others(
        self, memory_ids: Sequence[uuid.UUID], actors: Sequence[str]
    ) -> set[uuid.UUID]:
        """Of `memory_ids`, those with a history event by an actor not in `actors`."""
        if not memory_ids:
            return set()
        statement = (
            select(MemoryEvent.memory_id)
            .where(
                MemoryEvent.tenant_id == self._tenant_id,
                MemoryEvent.memory_id.in_(list(memory_ids)),
                MemoryEvent.actor.not_in(list(actors)),
            )
            .distinct()
        )
        return set((await self._session.execute(statement)).scalars())

    async def live_procedures(self, owner: Owner) -> list[Memory]:
        statement = self._owned(owner).where(
            Memory.kind == "procedural", Memory.lifecycle != "superseded"
        )
        return list((await self._session.execute(statement)).scalars())

    async def search(self, params: SearchParams) -> list[SearchRow]:
        values = {"tenant_id": self._tenant_id, **params.__dict__}
        rows = (await self._session.execute(_SEARCH_STATEMENT, values)).all()
        return [
            SearchRow(
                id=row.id,
                lexical_rank=row.lexical_rank,
                lexical_score=row.lexical_score,
                vector_rank=row.vector_rank,
                vector_cosine=row.vector_cosine,
                fused_score=float(row.fused_score),
                recency_factor=float(row.recency_factor),
                confidence_factor=float(row.confidence_factor),
                final_score=float(row.final_score),
                embedding=None if row.embedding is None else list(row.embedding),
            )
            for row in rows
        ]


def _content_hash(text_value: str) -> ColumnElement[str]:
    """The `content_hash` a memory with this text has (the generated column's expression)."""
    return func.md5(func.lower(func.regexp_replace(func.btrim(text_value), r"\s+", " ", "g")))
