"""All SQL of the memories domain; every statement runs in the tenant-scoped transaction."""

from __future__ import annotations

import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Select,
    Text,
    TextualSelect,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, REAL
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

from service.auth.owner import Owner
from service.db import transaction_driver
from service.memories.filters import MemoryFilter, Predicate
from service.memories.models import Memory, MemoryEvent
from service.memories.schemas import ComponentScores, MemoryRead

M = aliased(Memory, name="m")
"""`memory AS m`: the alias `MemoryFilter.where()` predicates are written against."""

HYBRID_SEARCH_SQL = """
WITH query_terms AS (
    -- An OR over the question's lexemes (stop words dropped by the english config);
    -- plainto_tsquery would AND them and a natural question would match almost nothing.
    SELECT (SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(terms.lexemes) AS lexeme
           )::tsquery AS tsq,
           terms.lexemes
      FROM (SELECT tsvector_to_array(to_tsvector('english', :query)) AS lexemes) AS terms
),
lexical_matches AS (
    {lexical_matches}
),
collection AS (
    {collection}
),
term_weights AS (
    -- Inverse document frequency (BM25's, never negative): a name in every memory weighs
    -- next to nothing, the rare word that identifies one memory weighs most.
    SELECT section, lexeme, ln(1 + (c.documents - count(*) + 0.5) / (count(*) + 0.5)) AS idf,
           c.mean_length
      FROM lexical_matches JOIN collection c USING (section)
     GROUP BY section, lexeme, c.documents, c.mean_length
),
lexical_hits AS (
    SELECT id, section, score, rank
      FROM (SELECT id, section, score,
                   row_number() OVER (PARTITION BY section ORDER BY score DESC, id) AS rank
              FROM (SELECT lm.id, lm.section,
                           -- BM25 (k1 1.2, b 0.75): saturating term frequency,
                           -- length-normalised.
                           sum(w.idf * lm.tf * 2.2
                               / (lm.tf + 1.2 * (0.25 + 0.75 * lm.length
                                                 / nullif(w.mean_length, 0)))) AS score
                      FROM lexical_matches lm
                      JOIN term_weights w USING (section, lexeme)
                     GROUP BY lm.section, lm.id
                     -- One section: only its pool is ranked (a top-N sort, not a full one).
                     ORDER BY score DESC, lm.id
                     LIMIT {lexical_pool}) AS scored_terms) AS ranked
     WHERE rank <= {pool}
),
vector_hits AS (
    SELECT id, section, 1 - distance AS cosine,
           row_number() OVER (PARTITION BY section ORDER BY distance, id) AS rank
      FROM ({nearest}) AS nearest
),
fused AS (
    SELECT coalesce(l.id, v.id) AS id, coalesce(l.section, v.section) AS section,
           l.rank AS lexical_rank, l.score AS lexical_score,
           v.rank AS vector_rank, v.cosine AS vector_cosine,
           -- Each side on one scale for breaking ties: lexical relative to the best lexical
           -- hit (0..1), the cosine as is (a negative one ranks below no match at all).
           coalesce(l.score / nullif(max(l.score) OVER by_section, 0), 0) AS lexical_strength,
           coalesce(v.cosine, 0) AS vector_strength,
           CASE WHEN :fusion = 'linear' THEN
                    -- Magnitude-aware: a perfect vector match outscores a weak lexical one.
                    :lexical_weight * coalesce(l.score / nullif(max(l.score) OVER by_section, 0), 0)
                    + (1 - :lexical_weight) * greatest(coalesce(v.cosine, 0), 0)
                ELSE coalesce(1.0 / (:rrf_k + l.rank), 0) + coalesce(1.0 / (:rrf_k + v.rank), 0)
           END AS fused_score
      FROM lexical_hits l FULL OUTER JOIN vector_hits v ON v.id = l.id
    WINDOW by_section AS (PARTITION BY coalesce(l.section, v.section))
),
candidates AS (
    SELECT f.*, m.source_thread_id AS thread_id,
           coalesce(m.event_at, m.created_at) AS happened_at
      FROM fused f
      JOIN memory m ON m.tenant_id = :tenant_id AND m.id = f.id
),
adjacent AS (
    -- A conversation turn is often found through the turn next to it (the question it
    -- answers, the line it replies to): each candidate lends its fused score to the memory
    -- right before and right after it in its source thread, found or not, on top of their own.
    SELECT n.id, c.section, max(c.fused_score) AS evidence
      FROM candidates c
     CROSS JOIN LATERAL (
           (SELECT m.id FROM memory m
             WHERE m.source_thread_id = c.thread_id AND {candidate_filter}
               AND {section} = c.section
               AND (coalesce(m.event_at, m.created_at), m.id) < (c.happened_at, c.id)
             ORDER BY coalesce(m.event_at, m.created_at) DESC, m.id DESC
             LIMIT 1)
           UNION ALL
           (SELECT m.id FROM memory m
             WHERE m.source_thread_id = c.thread_id AND {candidate_filter}
               AND {section} = c.section
               AND (coalesce(m.event_at, m.created_at), m.id) > (c.happened_at, c.id)
             ORDER BY coalesce(m.event_at, m.created_at), m.id
             LIMIT 1)
     ) AS n
     WHERE :neighbour_weight > 0 AND c.thread_id IS NOT NULL
     GROUP BY n.id, c.section
),
beyond_pools AS (
    {beyond_pools}
),
pooled AS (
    SELECT c.id, c.section, c.lexical_rank, c.lexical_score, c.vector_rank, c.vector_cosine,
           c.fused_score, coalesce(a.evidence, 0) AS neighbour_score,
           c.lexical_strength, c.vector_strength, true AS in_pool
      FROM candidates c LEFT JOIN adjacent a ON a.id = c.id
    UNION ALL
    SELECT b.id, b.section, NULL, b.lexical_score, NULL, b.vector_cosine,
           b.fused_score, a.evidence, b.lexical_strength, b.vector_strength, false
      FROM beyond_pools b JOIN adjacent a ON a.id = b.id
),
scored AS (
    SELECT p.section, p.lexical_rank, p.lexical_score, p.vector_rank, p.vector_cosine,
           p.fused_score, p.neighbour_score,
           -- Evidence from the memory's conversation (session): the best fused score among
           -- its own and the pools' candidates from its source thread. Every turn of a session
           -- gets the same evidence, so it orders sessions, not the turns within one (there a
           -- turn's own match and its neighbours decide): the session where the query matches
           -- best lifts all its turns above the scattered matches of other sessions. A memory
           -- outside any thread is a session of its own (its own fused score), so a thread
           -- gives no advantage by itself.
           greatest(p.fused_score,
                    CASE WHEN m.source_thread_id IS NOT NULL THEN
                         max(p.fused_score) FILTER (WHERE p.in_pool)
                             OVER (PARTITION BY p.section, m.source_thread_id)
                    END) AS thread_score,
           -- The prior for a speaker the query names: the memory's speaker shares a lexeme
           -- with the query (so only the names the owner's memories actually carry can match),
           -- on the fused scale like the thread evidence.
           CASE WHEN m.speaker IS NOT NULL
                     AND tsvector_to_array(to_tsvector('english', m.speaker))
                         && (SELECT q.lexemes FROM query_terms q)
                THEN max(p.fused_score) OVER (PARTITION BY p.section) ELSE 0.0
           END AS speaker_score,
           -- The time the query names (a day, a recent month), as a window: the memories that
           -- happened inside it, on the fused scale.
           CASE WHEN coalesce(m.event_at, m.created_at) >= :window_start
                     AND coalesce(m.event_at, m.created_at) < :window_end
                THEN max(p.fused_score) OVER (PARTITION BY p.section) ELSE 0.0
           END AS date_score,
           greatest(p.lexical_strength, p.vector_strength) AS stronger_side,
           least(p.lexical_strength, p.vector_strength) AS weaker_side,
           m.*,
           (1 - :recency_weight) + :recency_weight * decay.factor AS recency_factor,
           (1 - :confidence_weight) + :confidence_weight * m.confidence AS confidence_factor
      FROM pooled p
      JOIN memory m ON m.tenant_id = :tenant_id AND m.id = p.id
      CROSS JOIN LATERAL (
          -- Half-lives elapsed since the memory happened (or was last confirmed), capped:
          -- 0.5^1000 is already 0 for ranking, and a larger exponent would make power()
          -- fail with an underflow error for a memory from long ago.
          SELECT CASE WHEN half_life.days <= 0 THEN 1.0
                      ELSE power(0.5, least(greatest(extract(epoch FROM now() - greatest(
                               coalesce(m.event_at, m.created_at),
                               coalesce(m.last_confirmed_at, '-infinity'))), 0)
                           / 86400.0 / half_life.days, 1000))
                 END AS factor
            FROM (SELECT CASE m.kind WHEN 'semantic' THEN :half_life_semantic
                                     WHEN 'episodic' THEN :half_life_episodic
                                     ELSE :half_life_procedural END AS days) AS half_life
      ) AS decay
),
hits AS (
    SELECT s.id, s.scope, s.user_id, s.kind, s.category, s.text, s.confidence, s.lifecycle,
       s.needs_review, s.superseded_by, s.source_thread_id, s.source_message_ids, s.evidence,
       s.event_at, s.created_at, s.updated_at, s.last_confirmed_at, s.invalid_at, s.expires_at,
       s.embedding_model, s.metadata, s.store_key, s.speaker,
       s.lexical_rank, s.lexical_score, s.vector_rank, s.vector_cosine, s.fused_score,
       s.neighbour_score, s.thread_score, s.speaker_score, s.date_score,
       s.recency_factor, s.confidence_factor,
       (s.fused_score + :neighbour_weight * s.neighbour_score + :thread_weight * s.thread_score
        + :speaker_weight * s.speaker_score + :date_weight * s.date_score)
           * s.recency_factor * s.confidence_factor AS final_score,
       -- As float4[]: the driver decodes the binary array natively, where parsing pgvector's
       -- text form in Python costs ~0.3 ms a vector (an MMR search reads up to 300 of them).
       CASE WHEN :with_embeddings THEN s.embedding::real[] END AS embedding,
       s.section, s.stronger_side, s.weaker_side
  FROM scored s
)
SELECT *
  FROM (SELECT h.*,
               -- Equal scores (RRF gives a lexical-only hit and a vector-only hit at the same
               -- rank the same fused score) are decided by what the scores mean: the stronger
               -- of the two sides, then the other; the id only when everything is equal, so
               -- the same data and question rank the same.
               row_number() OVER (PARTITION BY h.section ORDER BY h.final_score DESC,
                                  h.stronger_side DESC, h.weaker_side DESC, h.id) AS section_rank
          FROM hits h) AS ranked
 WHERE section_rank <= {limit}
 ORDER BY section, section_rank
"""
"""One statement: lexical (tsvector OR query, BM25 with the statistics of the memories
the search may return: `LEXICAL_MATCHES_SQL`, `COLLECTION_SQL`) and vector (HNSW cosine,
`NEAREST_SQL`) candidate sets under the same `MemoryFilter` (`{candidate_filter}`), fused (RRF
or linear); then the evidence of a memory's
conversation (its neighbours in its source thread, which join the candidates scored by their own
match, `BEYOND_POOLS_SQL`; the best match of its session) and the priors for the speaker and the
time the query names added on top, decayed by kind-aware recency and confidence. Returns, best
first, each hit's memory columns (everything a response shows) and every component score, so no
second query is needed.

Several searches that differ only in their filter run as one statement of disjoint sections
(`{section}` says which section a memory's filter puts it in): every rank, normalisation and
top-N is taken per section, so a section's hits are exactly those its own statement returns."""

BEYOND_POOLS_SQL = """
-- The memories only a candidate's neighbour brought in (neither side's pool reached them),
-- scored by their own match like any candidate, so a neighbour that matches the query itself
-- is not left with its neighbour's evidence alone. Bounded by the neighbours (two per
-- candidate): each gets one cosine and the BM25 of its own lexemes among the query's (the
-- statistics of `term_weights`, the same formula as `lexical_hits`), never a rank over all of
-- the owner's matches. Its ranks stay empty: it is beyond both pools, so under RRF, which
-- fuses ranks, it has no fused score.
SELECT b.id, b.section, own.lexical_score, own.cosine AS vector_cosine,
       coalesce(own.lexical_score / nullif(best.score, 0), 0) AS lexical_strength,
       coalesce(own.cosine, 0) AS vector_strength,
       CASE WHEN :fusion = 'linear' THEN
                :lexical_weight * coalesce(own.lexical_score / nullif(best.score, 0), 0)
                + (1 - :lexical_weight) * greatest(coalesce(own.cosine, 0), 0)
            ELSE 0.0
       END AS fused_score
  FROM (SELECT a.id, a.section FROM adjacent a
         WHERE NOT EXISTS (SELECT 1 FROM candidates c WHERE c.id = a.id)) AS b
  JOIN memory m ON m.tenant_id = :tenant_id AND m.id = b.id
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL (
       SELECT CASE WHEN :use_vector
                   THEN 1 - (m.embedding <=> {question_vector})
              END AS cosine,
              (SELECT sum(w.idf * cardinality(term.positions) * 2.2
                          / (cardinality(term.positions)
                             + 1.2 * (0.25 + 0.75 * m.tsv_length / nullif(w.mean_length, 0))))
                 FROM unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
                 JOIN term_weights w ON w.section = b.section AND w.lexeme = term.lexeme
                WHERE :use_lexical) AS lexical_score
 ) AS own
  -- The best lexical hit of the section, which normalises every lexical score.
  LEFT JOIN (SELECT section, max(lexical_score) AS score FROM candidates GROUP BY section) AS best
         ON best.section = b.section
"""
"""The neighbours outside both pools with their own components (`beyond_pools` of
`HYBRID_SEARCH_SQL`)."""

LEXICAL_MATCHES_SQL = """
-- Every candidate memory of the section holding any of the question's lexemes, one row per
-- lexeme it holds, with that lexeme's frequency in the memory. Under row-level security the
-- GIN index cannot serve `@@` (not leakproof: it may not run ahead of the tenant policy), so
-- each candidate is tested; ix_memory_lexical carries every column read here, so that is an
-- index-only scan of narrow tuples rather than a read of the wide table rows.
-- Only the question's lexemes are unnested: setweight marks them (every lexeme of
-- to_tsvector's output has weight D, so A marks exactly those) and ts_filter keeps the marked
-- ones with all their positions, instead of unnesting all of the memory's lexemes (with their
-- position arrays) and discarding most.
SELECT m.id, {section} AS section, term.lexeme, cardinality(term.positions) AS tf,
       m.tsv_length AS length
  FROM memory m
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
 WHERE :use_lexical AND q.tsq IS NOT NULL AND m.tsv @@ q.tsq
   AND {candidate_filter}
"""
"""One section's lexical candidates (`lexical_matches` of `HYBRID_SEARCH_SQL`)."""

COLLECTION_SQL = """
-- The statistics BM25 needs, over exactly the memories the section may return: how many
-- there are and their mean length (in distinct lexemes: `tsv_length` is `length(tsv)`, stored,
-- so an index-only scan of ix_memory_lexical serves this without reading the table).
SELECT {section} AS section, count(*) AS documents,
       coalesce(avg(m.tsv_length), 0) AS mean_length
  FROM memory m
 WHERE :use_lexical AND {candidate_filter}
 GROUP BY 1
"""
"""One section's BM25 statistics (`collection` of `HYBRID_SEARCH_SQL`)."""

NEAREST_SQL = """
SELECT m.id, {section} AS section, m.embedding <=> {question_vector} AS distance
  FROM memory m
 WHERE :use_vector AND m.embedding IS NOT NULL
   AND {candidate_filter}
 ORDER BY m.embedding <=> {question_vector}
 LIMIT {pool}
"""
"""One section's vector candidates: HNSW with pgvector's iterative scan (hnsw.iterative_scan,
set per connection), so a scan filtered to one user keeps going until it has found the pool's
rows that pass the filter.

Each section's candidates come from a scan of its own (the fragments joined by UNION ALL): one
scan under the sections' filters OR'ed would leave the planner only their common conditions for
an index, and under one LIMIT a section with near vectors would crowd the others out."""

QUESTION_VECTOR_SQL = "(SELECT CAST(CAST(:query_embedding AS real[]) AS vector))"
"""The question's vector wherever the statement compares with it (`{question_vector}`). It is
bound as float4[], which the driver encodes in binary, where formatting pgvector's text form
cost ~0.2 ms of Python per search.

The conversion is a scalar subquery, so PostgreSQL runs it once per statement (an InitPlan) and
every comparison reads its result. Written as a bare expression, the generic plan (where the
bound value is unknown when planning, so the cast is not folded into a constant) converted the
384 floats again for every row it compared: ~0.5 ms of a ~6 ms statement at 250 memories a
user. The subquery's result is a parameter of the plan like a bound value, so the HNSW index
still serves `ORDER BY m.embedding <=> {question_vector}`."""

_RANKING_TYPES: dict[str, TypeEngine[Any]] = {
    "query": Text(),
    "query_embedding": ARRAY(REAL()),
    "use_lexical": Boolean(),
    "use_vector": Boolean(),
    "with_embeddings": Boolean(),
    "fusion": Text(),
    "rrf_k": Integer(),
    "lexical_weight": Float(),
    "neighbour_weight": Float(),
    "thread_weight": Float(),
    "speaker_weight": Float(),
    "date_weight": Float(),
    "window_start": DateTime(timezone=True),
    "window_end": DateTime(timezone=True),
    "recency_weight": Float(),
    "confidence_weight": Float(),
    "half_life_semantic": Float(),
    "half_life_episodic": Float(),
    "half_life_procedural": Float(),
}


@lru_cache(maxsize=128)
def _search_template(candidate_filters: tuple[str, ...]) -> str:
    """`HYBRID_SEARCH_SQL` with section `i` selected by `candidate_filters[i]`, its pool and
    limit bound as `:pool_i` and `:limit_i`."""
    # Cached per filter shape: the same text (and so asyncpg's prepared statement) is reused.

    def each_section(fragment: str) -> str:
        return " UNION ALL ".join(
            "("
            + fragment.replace("{section}", str(index))
            .replace("{candidate_filter}", candidate_filter)
            .replace("{pool}", f":pool_{index}")
            + ")"
            for index, candidate_filter in enumerate(candidate_filters)
        )

    if len(candidate_filters) == 1:
        section, candidate_filter, pool, limit = "0", candidate_filters[0], ":pool_0", ":limit_0"
        lexical_pool = pool
    else:
        section = _case("WHEN ({}) THEN {}", candidate_filters)
        candidate_filter = "(" + " OR ".join(f"({each})" for each in candidate_filters) + ")"
        pool = _case("WHEN {1} THEN :pool_{1}", candidate_filters, "section")
        limit = _case("WHEN {1} THEN :limit_{1}", candidate_filters, "section")
        lexical_pool = "ALL"
    return (
        HYBRID_SEARCH_SQL.replace("{beyond_pools}", BEYOND_POOLS_SQL.strip())
        .replace("{lexical_matches}", each_section(LEXICAL_MATCHES_SQL))
        .replace("{collection}", each_section(COLLECTION_SQL))
        .replace("{nearest}", each_section(NEAREST_SQL))
        .replace("{question_vector}", QUESTION_VECTOR_SQL)
        .replace("{candidate_filter}", candidate_filter)
        .replace("{section}", section)
        .replace("{lexical_pool}", lexical_pool)
        .replace("{pool}", pool)
        .replace("{limit}", limit)
    )


def _case(branch: str, candidate_filters: tuple[str, ...], subject: str = "") -> str:
    branches = " ".join(branch.format(each, index) for index, each in enumerate(candidate_filters))
    return f"CASE {subject} {branches} END"


@dataclass(frozen=True)
class SearchParams:
    """What one search asks: which memories (`filter`) and how to rank them."""

    filter: MemoryFilter
    query: str
    query_embedding: list[float] | None
    use_lexical: bool
    use_vector: bool
    pool: int
    limit: int
    fusion: str
    rrf_k: int
    lexical_weight: float
    neighbour_weight: float
    thread_weight: float
    speaker_weight: float
    date_weight: float
    window_start: datetime | None
    window_end: datetime | None
    recency_weight: float
    confidence_weight: float
    half_life_semantic: float
    half_life_episodic: float
    half_life_procedural: float
    with_embeddings: bool


@dataclass(frozen=True)
class SearchRow:
    """One hit as the fusion statement returns it: the memory, why it ranked, its vector
    (only when asked for, for MMR)."""

    memory: MemoryRead
    scores: ComponentScores
    embedding: list[float] | None


def _section_predicates(tenant_id: str, sections: Sequence[SearchParams]) -> list[Predicate]:
    """Each section's filter as SQL (binds prefixed by the section), once the sections are
    checked to be one search split by disjoint filters."""
    first = sections[0]
    # A plain search is one section: nothing to compare (this runs on every search).
    for index, other in enumerate(sections[1:], start=1):
        if replace(other, filter=first.filter, pool=first.pool, limit=first.limit) != first:
            raise ValueError("sections of one search share everything but filter, pool and limit")
        if any(not other.filter.is_disjoint(earlier.filter) for earlier in sections[:index]):
            raise ValueError("the sections of one search must select disjoint memories")
    return [
        params.filter.where(tenant_id, prefix=f"f{index}_") for index, params in enumerate(sections)
    ]


def hybrid_search_statement(tenant_id: str, params: SearchParams) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for these parameters, every value bound."""
    return sectioned_search_statement(tenant_id, [params])


def sectioned_search_statement(tenant_id: str, sections: Sequence[SearchParams]) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for several searches as one statement; a row's `section` column is
    the index of the search it answers, with the rank it has there (`section_rank`).

    The searches must differ only in their filter, pool and limit, and their filters must
    select disjoint memories (a memory is a candidate of one section at most)."""
    return _sectioned_statement(tenant_id, sections, _section_predicates(tenant_id, sections))


def _sectioned_statement(
    tenant_id: str, sections: Sequence[SearchParams], predicates: Sequence[Predicate]
) -> TextualSelect:
    first = sections[0]
    sizes = [
        bind
        for index, params in enumerate(sections)
        for bind in (
            bindparam(f"pool_{index}", params.pool, type_=Integer()),
            bindparam(f"limit_{index}", params.limit, type_=Integer()),
        )
    ]
    ranking = [
        bindparam(name, getattr(first, name), type_=type_) for name, type_ in _RANKING_TYPES.items()
    ]
    return (
        text(_search_template(tuple(predicate.sql for predicate in predicates)))
        .bindparams(
            *(bind for predicate in predicates for bind in predicate.binds),
            *sizes,
            *ranking,
            bindparam("tenant_id", tenant_id, type_=Text()),
        )
        .columns(embedding=ARRAY(REAL()))
    )


Conversion = Callable[[Any], Any] | None


@dataclass(frozen=True)
class CompiledSearch:
    """`HYBRID_SEARCH_SQL` for one filter shape as the driver runs it: the SQL text and, for
    each positional parameter, its name and the conversion SQLAlchemy applies to its value."""

    sql: str
    parameters: tuple[tuple[str, Conversion], ...]

    @classmethod
    def compile(cls, statement: TextualSelect, dialect: Dialect) -> CompiledSearch:
        compiled = statement.compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"{type(compiled).__name__} is not a SQL statement compiler")
        return cls(
            compiled.string,
            tuple(
                (name, compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect))
                for name in compiled.positiontup or ()
            ),
        )

    def arguments(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(
            value if convert is None else convert(value)
            for name, convert in self.parameters
            for value in (values[name],)
        )


# By dialect and statement text: one entry per filter shape (which conditions each section
# sets). Bounded: a client cannot grow it without limit by varying its filters.
_compiled_searches: dict[tuple[str, str], CompiledSearch] = {}
_COMPILED_SEARCHES_KEPT = 512


def compiled_search(
    tenant_id: str, sections: Sequence[SearchParams], dialect: Dialect
) -> tuple[CompiledSearch, tuple[Any, ...]]:
    """The driver SQL of `sectioned_search_statement` for these sections, compiled once per
    filter shape, and its positional arguments.

    A search is the service's hottest statement; building and compiling a `TextualSelect` per
    request (and SQLAlchemy's cache-key work for a 7 KB text) cost more CPU than executing it.
    """
    predicates = _section_predicates(tenant_id, sections)
    key = (dialect.name, _search_template(tuple(predicate.sql for predicate in predicates)))
    compiled = _compiled_searches.get(key)
    if compiled is None:
        if len(_compiled_searches) >= _COMPILED_SEARCHES_KEPT:
            _compiled_searches.clear()
        statement = _sectioned_statement(tenant_id, sections, predicates)
        compiled = CompiledSearch.compile(statement, dialect)
        _compiled_searches[key] = compiled
    values: dict[str, Any] = {
        bind.key: bind.value for predicate in predicates for bind in predicate.binds
    }
    for index, params in enumerate(sections):
        values[f"pool_{index}"] = params.pool
        values[f"limit_{index}"] = params.limit
    values.update((name, getattr(sections[0], name)) for name in _RANKING_TYPES)
    values["tenant_id"] = tenant_id
    return compiled, compiled.arguments(values)


GENERIC_SEARCH_PLAN_SQL = "SET LOCAL plan_cache_mode = force_generic_plan"
"""Run the fusion statement on its generic plan (planned once per connection and filter shape).

Left to choose (`auto`), PostgreSQL replans the statement for every search: its plan for the
actual owner is always estimated cheaper than the plan for any owner, so it never switches. For
this 7 KB statement that planning cost as much as executing it (4 to 5 ms of a ~10 ms statement
at 100k memories). The generic plan also makes the result depend on the parameters alone: a
custom plan may read an owner's nearest memories from the HNSW index (approximate) where the
generic one sorts the owner's memories by their exact distance, so under `auto` two pooled
connections holding different plans could return different top 10s for the same question."""

DEFAULT_PLAN_CHOICE_SQL = "SET LOCAL plan_cache_mode TO DEFAULT"
"""The rest of the transaction plans as the server is configured to."""

GENERIC_PLANS_RUN_SQL = "SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
"""Whether the server can run the fusion statement on a generic plan. Citus cannot: it refuses
to distribute the statement with its parameters unbound ("could not create distributed plan"),
and makes PostgreSQL choose custom plans for it by itself."""

_generic_plans_run: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
"""The answer of `GENERIC_PLANS_RUN_SQL` per asyncpg connection, for as long as it lives."""


async def runs_generic_plans(driver: Any) -> bool:
    """`GENERIC_PLANS_RUN_SQL` for the server behind the asyncpg connection `driver`, asked once
    per connection (the service's searches and the benchmarks' bare statement alike)."""
    answer = _generic_plans_run.get(driver)
    if answer is None:
        answer = bool(await driver.fetchval(GENERIC_PLANS_RUN_SQL))
        _generic_plans_run[driver] = answer
    return answer


WRITER_LOCK_SQL = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
"""Serialise the derived writes (extraction passes, turn storage, compaction) to one owner's
memories until the transaction ends. Explicit API writes do not take it: they never read a
snapshot to reconcile against."""


class MemoryRepository:
    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id
        # The transaction's driver connection while inside `planned_for_search` (its settings
        # are made), else None.
        self._search_driver: Any = None

    def _matching(self, memory_filter: MemoryFilter) -> Select[Memory]:
        """The memories `memory_filter` selects (the one place a filter becomes SQL)."""
        return select(M).where(memory_filter.where(self._tenant_id).clause)

    def _owned(self, *owners: Owner) -> Select[Memory]:
        """Live (unexpired) memories of any of `owners` in this tenant, any lifecycle."""
        return self._matching(MemoryFilter.build(owners))

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
                index_where=text("lifecycle <> 'superseded' AND store_key IS NULL"),
            )
            .returning(Memory)
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def find_live_duplicate(self, owner: Owner, kind: str, text_value: str) -> Memory | None:
        statement = self._owned(owner).where(
            M.kind == kind,
            M.content_hash == _content_hash(text_value),
            M.lifecycle != "superseded",
            M.store_key.is_(None),
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def lock_writers(self, owner: Owner) -> None:
        key = f"memory_writes:{self._tenant_id}:{owner.lock_key}"
        await self._session.execute(WRITER_LOCK_SQL, {"key": key})

    async def lock_procedures(self, owner: Owner) -> None:
        """Serialise writes to the owner's procedural slots until the transaction ends, so a
        write reads the slots no other write is changing."""
        key = f"procedures:{self._tenant_id}:{owner.lock_key}"
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
        live = self._owned(owner).where(M.kind == kind, M.lifecycle != "superseded")
        conditions: list[ColumnElement[bool]] = [
            M.content_hash == _content_hash(text_value),
        ]
        if categories:
            conditions.append(M.category.in_(list(categories)))
        cosine: ColumnElement[Any] = literal_column("NULL")
        if vector is not None:
            distance = M.embedding.cosine_distance(vector)
            nearest_ids = (
                live.with_only_columns(M.id)
                .where(M.embedding.is_not(None))
                .order_by(distance)
                .limit(nearest)
            )
            conditions.append(M.id.in_(nearest_ids.scalar_subquery()))
            cosine = 1 - distance
        statement = live.add_columns(cosine.label("cosine")).where(or_(*conditions))
        rows = (await self._session.execute(statement)).all()
        return [(row[0], None if row[1] is None else float(row[1])) for row in rows]

    async def live_owned(self, owner: Owner, kind: str, *, limit: int) -> list[Memory]:
        """The owner's live memories of `kind`, oldest first."""
        statement = (
            self._owned(owner)
            .where(M.kind == kind, M.lifecycle != "superseded")
            .order_by(M.created_at, M.id)
            .limit(limit)
        )
        return list((await self._session.execute(statement)).scalars())

    async def get(
        self, owner: Owner, memory_id: uuid.UUID, *, for_update: bool = False
    ) -> Memory | None:
        statement = self._owned(owner).where(M.id == memory_id)
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

    async def list_page(
        self,
        memory_filter: MemoryFilter,
        *,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Memory]:
        """Newest first, after the keyset position `after`."""
        statement = self._matching(memory_filter)
        if after is not None:
            statement = statement.where(func.row(M.created_at, M.id) < func.row(after[0], after[1]))
        statement = statement.order_by(M.created_at.desc(), M.id.desc()).limit(limit)
        return list((await self._session.execute(statement)).scalars())

    async def count(self, memory_filter: MemoryFilter) -> int:
        statement = (
            select(func.count()).select_from(M).where(memory_filter.where(self._tenant_id).clause)
        )
        return int((await self._session.execute(statement)).scalar_one())

    async def lock_matching(self, memory_filter: MemoryFilter) -> list[Memory]:
        """Every memory the filter selects, newest first, locked until the transaction ends."""
        statement = (
            self._matching(memory_filter)
            .order_by(M.created_at.desc(), M.id.desc())
            .with_for_update()
        )
        return list((await self._session.execute(statement)).scalars())

    async def from_thread(self, owner: Owner, thread_id: uuid.UUID) -> list[Memory]:
        """The owner's memories whose provenance is the thread, locked for deletion."""
        statement = self._owned(owner).where(M.source_thread_id == thread_id).with_for_update()
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

    async def live_procedures(self, *owners: Owner, slots: Sequence[str]) -> list[Memory]:
        """The live procedural memories of `owners` that fill one of `slots` (their category):
        the other procedural memories are never read as slots, so they are not loaded."""
        statement = self._owned(*owners).where(
            M.kind == "procedural", M.lifecycle != "superseded", M.category.in_(slots)
        )
        return list((await self._session.execute(statement)).scalars())

    async def search(self, params: SearchParams) -> list[SearchRow]:
        return (await self.search_sections([params]))[0]

    async def search_sections(self, sections: Sequence[SearchParams]) -> list[list[SearchRow]]:
        """Several searches in one statement (see `sectioned_search_statement`): each one's
        hits, best first, in the order of `sections`."""
        # Compiled once per filter shape (see `compiled_search`), and run straight on the
        # transaction's asyncpg connection: SQLAlchemy's execution layer cost ~1 ms of CPU a
        # search, a third of the request's own database work in Python (docs/benchmarks.md).
        # The planner settings go as simple queries: nothing to prepare, one round trip each.
        connection = await self._session.connection()
        compiled, arguments = compiled_search(self._tenant_id, sections, connection.dialect)
        hits: list[list[SearchRow]] = [[] for _ in sections]
        async with self.planned_for_search() as driver:
            rows = await driver.fetch(compiled.sql, *arguments)
        for row in rows:
            hits[row["section"]].append(_search_row(dict(row.items())))
        return hits

    @asynccontextmanager
    async def planned_for_search(self) -> AsyncIterator[Any]:
        """The fusion statements inside run on their generic plan (`GENERIC_SEARCH_PLAN_SQL`),
        where the server runs one; afterwards the transaction plans as configured again. Yields
        the transaction's driver connection (`transaction_driver`) to run them on.

        `search_sections` enters it itself. A caller that enters it earlier, while the question
        is still being embedded, takes the setting's round trip off the search's critical path.
        Nested, it does nothing more."""
        if self._search_driver is not None:
            yield self._search_driver
            return
        driver = await transaction_driver(await self._session.connection())
        generic_plan = await runs_generic_plans(driver)
        if generic_plan:
            await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        self._search_driver = driver
        try:
            yield driver
        finally:
            self._search_driver = None
        # Not after a failed statement: the transaction is aborted, and ends with the setting.
        if generic_plan:
            await driver.execute(DEFAULT_PLAN_CHOICE_SQL)

    # --- memories addressed by a client's key -------------------------------------------------

    async def lock_store_key(self, owner: Owner, kind: str, category: str | None, key: str) -> None:
        """Serialise writes to one key until the transaction ends: the first `put` of a key
        inserts, every later one (even a concurrent one) finds that row and updates it."""
        lock = f"memory_key:{self._tenant_id}:{owner.lock_key}:{kind}:{category or ''}:{key}"
        await self._session.execute(WRITER_LOCK_SQL, {"key": lock})

    async def find_by_store_key(
        self, owner: Owner, kind: str, category: str | None, key: str, *, for_update: bool = False
    ) -> Memory | None:
        statement = self._owned(owner).where(
            M.kind == kind,
            M.category.is_(None) if category is None else M.category == category,
            M.store_key == key,
        )
        if for_update:
            statement = statement.with_for_update().execution_options(populate_existing=True)
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def expired_store_key_holder(
        self, owner: Owner, kind: str, category: str | None, key: str
    ) -> Memory | None:
        """An expired memory that still holds the key (reads no longer see it), locked."""
        statement = (
            select(Memory)
            .where(
                Memory.tenant_id == self._tenant_id,
                Memory.scope == owner.scope,
                Memory.user_id.is_(None)
                if owner.user_id is None
                else Memory.user_id == owner.user_id,
                Memory.kind == kind,
                Memory.category.is_(None) if category is None else Memory.category == category,
                Memory.store_key == key,
                Memory.expires_at <= func.now(),
            )
            .with_for_update()
        )
        return (await self._session.execute(statement)).scalar_one_or_none()

    async def insert_keyed(self, values: dict[str, Any]) -> Memory:
        """Insert a memory that carries a store key (never an exact-duplicate conflict)."""
        statement = pg_insert(Memory).values(tenant_id=self._tenant_id, **values).returning(Memory)
        return (await self._session.execute(statement)).scalar_one()


def _search_row(row: Mapping[str, Any]) -> SearchRow:
    return SearchRow(
        memory=MemoryRead.model_validate(row),
        scores=ComponentScores(
            lexical_rank=row["lexical_rank"],
            lexical_score=row["lexical_score"],
            vector_rank=row["vector_rank"],
            vector_cosine=row["vector_cosine"],
            fused_score=float(row["fused_score"]),
            neighbour_score=float(row["neighbour_score"]),
            thread_score=float(row["thread_score"]),
            speaker_score=float(row["speaker_score"]),
            date_score=float(row["date_score"]),
            recency_factor=float(row["recency_factor"]),
            confidence_factor=float(row["confidence_factor"]),
            final_score=float(row["final_score"]),
        ),
        embedding=row["embedding"],
    )


def _content_hash(text_value: str) -> ColumnElement[str]:
    """The `content_hash` a memory with this text has (the generated column's expression)."""
    return func.md5(func.lower(func.regexp_replace(func.btrim(text_value), r"\s+", " ", "g")))
