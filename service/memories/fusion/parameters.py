"""What a search binds into the fusion statement: `SearchParams`, each ranking parameter
declared once with its SQL type (`RANKING_PARAMETERS` is derived from it)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, get_type_hints

from sqlalchemy import Boolean, DateTime, Float, Integer, Text
from sqlalchemy.dialects.postgresql import ARRAY, REAL
from sqlalchemy.types import TypeEngine

from service.memories.filters import MemoryFilter
from service.memories.postings import COMMON_LEXEME_DOCUMENTS
from service.memories.vector_columns import VectorColumn

FIRST_VECTOR_COLUMN = VectorColumn("embedding", model="")
"""`memory.embedding` as first migrated: a search that names no column reads it (its model is
the caller's business; the statement needs only the column)."""


@dataclass(frozen=True)
class SearchParams:
    """What one search asks: which memories (`filter`), how many (`pool`, `limit`), and how to
    rank them: every other field, bound into the statement under its own name with the SQL type
    its annotation carries (a new ranking parameter is one field here and its use in the SQL)."""

    filter: MemoryFilter
    pool: int
    limit: int
    query: Annotated[str, Text()]
    query_embedding: Annotated[list[float] | None, ARRAY(REAL())]
    use_lexical: Annotated[bool, Boolean()]
    use_vector: Annotated[bool, Boolean()]
    with_embeddings: Annotated[bool, Boolean()]
    fusion: Annotated[str, Text()]
    rrf_k: Annotated[int, Integer()]
    lexical_weight: Annotated[float, Float()]
    neighbour_weight: Annotated[float, Float()]
    thread_weight: Annotated[float, Float()]
    speaker_weight: Annotated[float, Float()]
    date_weight: Annotated[float, Float()]
    window_start: Annotated[datetime | None, DateTime(timezone=True)]
    window_end: Annotated[datetime | None, DateTime(timezone=True)]
    recency_weight: Annotated[float, Float()]
    confidence_weight: Annotated[float, Float()]
    half_life_semantic: Annotated[float, Float()]
    half_life_episodic: Annotated[float, Float()]
    half_life_procedural: Annotated[float, Float()]
    bounded_from: Annotated[int, Integer()] = 5_000
    postings_per_lexeme: Annotated[int, Integer()] = 1_000
    postings_scanned: Annotated[int, Integer()] = 5_000
    common_lexeme_share: Annotated[float, Float()] = 0.5
    live_count_cap: Annotated[int, Integer()] = 2 * COMMON_LEXEME_DOCUMENTS
    # The vector side's candidates (None: `pool`). Under linear fusion every lexical
    # candidate gets its own cosine from its row, so the vector side has only to bring the
    # memories near the question that the lexical side missed, and a smaller walk does that;
    # RRF fuses ranks, and a rank exists only within a pool, so it keeps `pool` on both sides.
    vector_pool: int | None = None
    # Not bound: it names the column in the statement's text.
    vector_column: VectorColumn = FIRST_VECTOR_COLUMN
    # Not bound: the least HNSW candidate list for an owner with a vector index of its own
    # (at least twice the vector candidates, `fusion.repository._plan_of`).
    owner_index_ef_search: int = 100
    # Bound only in a statement with a filtered walk (`FILTERED_WALK_SQL`): the most memories
    # it reads (`hnsw.max_scan_tuples`, where pgvector's iterative scan stops anyway).
    walk_scanned: int = 20_000
    # Not a ranking parameter: the memories drawn from these messages alone are ranked like any
    # other (their evidence to their neighbours and session counts) but not returned (a context
    # block that shows the messages themselves). A memory drawn from no message is returned.
    not_only_of_messages: tuple[uuid.UUID, ...] | None = None

    @property
    def vector_candidates(self) -> int:
        """How many candidates the vector side brings: `vector_pool`, at most `pool`."""
        return self.pool if self.vector_pool is None else min(self.vector_pool, self.pool)


RANKING_PARAMETERS: tuple[tuple[str, TypeEngine[Any]], ...] = tuple(
    (name, sql_type)
    for name, hint in get_type_hints(SearchParams, include_extras=True).items()
    for sql_type in getattr(hint, "__metadata__", ())
    if isinstance(sql_type, TypeEngine)
)
"""Every ranking parameter of `SearchParams` with its SQL type, in declaration order."""
