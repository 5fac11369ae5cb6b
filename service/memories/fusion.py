"""The fusion statement: one SQL statement that answers a search with every component score.

Everything about it lives here: its text (`HYBRID_SEARCH_SQL` and the fragments rendered into
it), the parameters a search binds (`SearchParams`, each declared once with its SQL type), its
compilation to driver SQL (once per filter shape), the planner setting it runs under, and
`FusionRepository`, which runs it on the transaction's driver connection. A search overlaps the
planner setting with the embedding of its question: `FusionRepository.planned()` makes the
setting, and the caller awaits the question's vector inside it.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from string import Template
from typing import Annotated, Any, get_type_hints

from sqlalchemy import Boolean, DateTime, Float, Integer, Text, TextualSelect, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, REAL
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

from service.auth.owner import Owner
from service.db import Driver, transaction_driver
from service.kit.expiring import ExpiringKeys
from service.kit.repository import TenantRepository
from service.memories.filters import MemoryFilter, Predicate
from service.memories.postings import COMMON_LEXEME_DOCUMENTS, StatisticsRequests
from service.memories.schemas import ComponentScores, MemoryRead
from service.memories.vector_columns import VectorColumn

FIRST_VECTOR_COLUMN = VectorColumn("embedding", model="")
"""`memory.embedding` as first migrated: a search that names no column reads it (its model is
the caller's business; the statement needs only the column)."""


def render(template: str, **fragments: str) -> str:
    """`template` with every `${name}` replaced by `fragments[name]`.

    A placeholder without a fragment is an error, never left in the SQL for Postgres to
    reject at run time (or worse, to parse as something else)."""
    try:
        return Template(template).substitute(fragments)
    except KeyError as missing:
        raise ValueError(f"the SQL template's placeholder {missing} has no fragment") from None


HYBRID_SEARCH_SQL = """
WITH query_terms AS (
    -- An OR over the question's lexemes (stop words dropped by the english config);
    -- plainto_tsquery would AND them and a natural question would match almost nothing.
    SELECT (SELECT string_agg(quote_literal(lexeme), ' | ') FROM unnest(terms.lexemes) AS lexeme
           )::tsquery AS tsq,
           terms.lexemes
      FROM (SELECT tsvector_to_array(to_tsvector('english', :query)) AS lexemes) AS terms
),
owner_stats AS (
    ${owner_stats}
),
exact_matches AS (
    ${lexical_matches}
),
bounded_matches AS (
    ${bounded_matches}
),
lexical_matches AS (
    SELECT * FROM exact_matches UNION ALL SELECT * FROM bounded_matches
),
collection AS (
    ${collection}
    UNION ALL
    SELECT section, documents, mean_length FROM owner_stats
),
term_weights AS (
    -- Inverse document frequency (BM25's, never negative): a name in every memory weighs
    -- next to nothing, the rare word that identifies one memory weighs most. An exact
    -- section counts each lexeme's memories among its matches; a bounded one has read only
    -- the top of each lexeme's postings, so it takes the count from the owners' statistics
    -- (a common lexeme) or from the postings themselves (a rare one, a bounded count).
    SELECT section, lexeme, ln(1 + (c.documents - count(*) + 0.5) / (count(*) + 0.5)) AS idf,
           c.mean_length
      FROM exact_matches JOIN collection c USING (section)
     GROUP BY section, lexeme, c.documents, c.mean_length
    UNION ALL
    SELECT o.section, term.lexeme,
           ln(1 + (greatest(o.documents, df.documents) - df.documents + 0.5)
                  / (df.documents + 0.5)) AS idf,
           o.mean_length
      FROM owner_stats o
     CROSS JOIN query_terms q
     CROSS JOIN LATERAL unnest(q.lexemes) AS term(lexeme)
     CROSS JOIN LATERAL (
           SELECT sum(coalesce(
                      (SELECT ls.documents FROM memory_lexeme_stats ls
                        WHERE ls.tenant_id = :tenant_id AND ls.owner_key = owner.key
                          AND ls.lexeme = term.lexeme),
                      (SELECT count(*) FROM (SELECT 1 FROM memory_posting p
                                              WHERE p.tenant_id = :tenant_id
                                                AND p.owner_key = owner.key
                                                AND p.lexeme = term.lexeme
                                              LIMIT :live_count_cap) AS counted))) AS documents
             FROM unnest(o.owner_keys) AS owner(key)
     ) AS df
     WHERE :use_lexical
),
lexical_hits AS (
    SELECT id, section, score, rank
      FROM (SELECT id, section, score,
                   row_number() OVER (PARTITION BY section ORDER BY score DESC, id) AS rank
              FROM (SELECT lm.id, lm.section,
                           -- BM25 (k1 1.2, b 0.75): saturating term frequency,
                           -- length-normalised. Rounded to 1e-9: a sum's last bits depend on
                           -- the order the plan adds its terms in, and two memories of equal
                           -- score must tie (and rank by id) whatever the plan.
                           round(CAST(sum(w.idf * lm.tf * 2.2
                                          / (lm.tf + 1.2 * (0.25 + 0.75 * lm.length
                                                            / nullif(w.mean_length, 0))))
                                      AS numeric), 9)::float8 AS score
                      FROM lexical_matches lm
                      JOIN term_weights w USING (section, lexeme)
                     GROUP BY lm.section, lm.id
                     -- One section: only its pool is ranked (a top-N sort, not a full one).
                     ORDER BY score DESC, lm.id
                     LIMIT ${lexical_pool}) AS scored_terms) AS ranked
     WHERE rank <= ${pool}
),
vector_hits AS (
    SELECT id, section, 1 - distance AS cosine,
           row_number() OVER (PARTITION BY section ORDER BY distance, id) AS rank
      FROM (${nearest}) AS nearest
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
           m.happened_at
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
             WHERE m.source_thread_id = c.thread_id AND ${candidate_filter}
               AND ${section} = c.section
               AND (m.happened_at, m.id) < (c.happened_at, c.id)
             ORDER BY m.happened_at DESC, m.id DESC
             LIMIT 1)
           UNION ALL
           (SELECT m.id FROM memory m
             WHERE m.source_thread_id = c.thread_id AND ${candidate_filter}
               AND ${section} = c.section
               AND (m.happened_at, m.id) > (c.happened_at, c.id)
             ORDER BY m.happened_at, m.id
             LIMIT 1)
     ) AS n
     WHERE :neighbour_weight > 0 AND c.thread_id IS NOT NULL
     GROUP BY n.id, c.section
),
beyond_pools AS (
    ${beyond_pools}
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
           m.id,
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
    SELECT s.id, s.section,
       s.lexical_rank, s.lexical_score, s.vector_rank, s.vector_cosine, s.fused_score,
       s.neighbour_score, s.thread_score, s.speaker_score, s.date_score,
       s.recency_factor, s.confidence_factor,
       (s.fused_score + :neighbour_weight * s.neighbour_score + :thread_weight * s.thread_score
        + :speaker_weight * s.speaker_score + :date_weight * s.date_score)
           * s.recency_factor * s.confidence_factor AS final_score,
       s.stronger_side, s.weaker_side
  FROM scored s
)
-- The memory's own columns (everything a response shows) are read for the hits a section
-- returns, not carried through the ranking of every candidate: a row of `memory` is wide
-- (its text, tsvector and vectors), and the pools and their neighbours are hundreds of rows
-- sorted twice over.
SELECT s.id, s.scope, s.user_id, s.kind, s.category, s.text, s.confidence, s.lifecycle,
       s.needs_review, s.superseded_by, s.source_thread_id, s.source_message_ids, s.evidence,
       s.event_at, s.created_at, s.updated_at, s.last_confirmed_at, s.invalid_at, s.expires_at,
       ${hit_vector_model} AS embedding_model, s.metadata, s.store_key, s.speaker,
       ranked.lexical_rank, ranked.lexical_score, ranked.vector_rank, ranked.vector_cosine,
       ranked.fused_score, ranked.neighbour_score, ranked.thread_score, ranked.speaker_score,
       ranked.date_score, ranked.recency_factor, ranked.confidence_factor, ranked.final_score,
       -- As float4[]: the driver decodes the binary array natively, where parsing pgvector's
       -- text form in Python costs ~0.3 ms a vector (an MMR search reads up to 300 of them).
       CASE WHEN :with_embeddings THEN ${hit_vector}::real[] END AS embedding,
       ranked.section, ranked.section_rank,
       -- How the section's lexical side ran, for keeping the owners' statistics fresh: the
       -- memories it ranked over, and the age of the statistics it used (NULL: exact).
       (SELECT c.documents FROM collection c WHERE c.section = ranked.section
         LIMIT 1) AS section_documents,
       (SELECT extract(epoch FROM now() - o.refreshed_at) FROM owner_stats o
         WHERE o.section = ranked.section) AS statistics_age,
       coalesce((SELECT o.indexed_vectors FROM owner_stats o
                  WHERE o.section = ranked.section), false) AS indexed_vectors
  FROM (SELECT h.*,
               -- Equal scores (RRF gives a lexical-only hit and a vector-only hit at the same
               -- rank the same fused score) are decided by what the scores mean: the stronger
               -- of the two sides, then the other; the id only when everything is equal, so
               -- the same data and question rank the same.
               row_number() OVER (PARTITION BY h.section ORDER BY h.final_score DESC,
                                  h.stronger_side DESC, h.weaker_side DESC, h.id) AS section_rank
          FROM hits h) AS ranked
  JOIN memory s ON s.tenant_id = :tenant_id AND s.id = ranked.id
 WHERE section_rank <= ${limit}
 ORDER BY ranked.section, ranked.section_rank
"""
"""One statement: lexical (tsvector OR query, BM25 with the statistics of the memories
the search may return: `LEXICAL_MATCHES_SQL`, `COLLECTION_SQL`) and vector (HNSW cosine,
`NEAREST_SQL`) candidate sets under the same `MemoryFilter` (`${candidate_filter}`), fused (RRF
or linear); then the evidence of a memory's
conversation (its neighbours in its source thread, which join the candidates scored by their own
match, `BEYOND_POOLS_SQL`; the best match of its session) and the priors for the speaker and the
time the query names added on top, decayed by kind-aware recency and confidence. Returns, best
first, each hit's memory columns (everything a response shows) and every component score, so no
second query is needed.

Several searches that differ only in their filter run as one statement of disjoint sections
(`${section}` says which section a memory's filter puts it in): every rank, normalisation and
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
                   THEN 1 - (${vector} <=> ${question_vector})
              END AS cosine,
              (SELECT round(CAST(sum(w.idf * cardinality(term.positions) * 2.2
                                     / (cardinality(term.positions)
                                        + 1.2 * (0.25 + 0.75 * m.tsv_length
                                                 / nullif(w.mean_length, 0))))
                                 AS numeric), 9)::float8
                 FROM unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
                 JOIN term_weights w ON w.section = b.section AND w.lexeme = term.lexeme
                WHERE :use_lexical) AS lexical_score
        -- Kept a subquery of its own: pulled up into the select list, the lexical score's
        -- subquery would run once for every place that reads it (three).
        OFFSET 0
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
SELECT m.id, ${section} AS section, term.lexeme, cardinality(term.positions) AS tf,
       m.tsv_length AS length
  FROM memory m
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
 WHERE :use_lexical AND q.tsq IS NOT NULL AND m.tsv @@ q.tsq
   AND NOT EXISTS (SELECT 1 FROM owner_stats WHERE section = ${section})
   AND ${candidate_filter}
"""
"""One exact section's lexical candidates (`exact_matches` of `HYBRID_SEARCH_SQL`): every
memory of the section that holds a lexeme of the question."""

COLLECTION_SQL = """
-- The statistics BM25 needs, over exactly the memories the section may return: how many
-- there are and their mean length (in distinct lexemes: `tsv_length` is `length(tsv)`, stored,
-- so an index-only scan of ix_memory_lexical serves this without reading the table).
SELECT ${section} AS section, count(*) AS documents,
       coalesce(avg(m.tsv_length), 0) AS mean_length
  FROM memory m
 WHERE :use_lexical AND ${candidate_filter}
   AND NOT EXISTS (SELECT 1 FROM owner_stats WHERE section = ${section})
 GROUP BY 1
"""
"""One exact section's BM25 statistics (`collection` of `HYBRID_SEARCH_SQL`)."""

OWNER_STATS_SQL = """
-- A section is bounded when the statistics of its owners (counted in the background) hold at
-- least :bounded_from memories; its row gives BM25 the collection's size and mean length from
-- them. An owner without statistics has too few memories to matter (or they were not counted
-- yet, and the next recount counts them): its postings are still read, its lexemes counted
-- from them. A section without a row is searched exactly.
SELECT ${section} AS section, ${owner_keys} AS owner_keys, sum(s.documents) AS documents,
       coalesce(sum(s.total_length)::float8 / nullif(sum(s.documents), 0), 0) AS mean_length,
       min(s.refreshed_at) AS refreshed_at,
       -- Whether the owners hold enough of the table for the vector index to find their
       -- nearest memories in about pool / share steps (see `PlannedSearch`; on Citus the
       -- coordinator's count of a distributed table is 0: always).
       sum(s.documents) >= :vector_index_share
                           * greatest((SELECT c.reltuples FROM pg_class c
                                        WHERE c.oid = 'memory'::regclass), 0) AS indexed_vectors
  FROM memory_owner_stats s
 WHERE s.tenant_id = :tenant_id AND s.owner_key = ANY(${owner_keys})
HAVING sum(s.documents) >= :bounded_from
"""
"""One section's owner statistics, if it is bounded (`owner_stats` of `HYBRID_SEARCH_SQL`)."""

BOUNDED_MATCHES_SQL = """
-- The memories each question lexeme weighs most in, per owner: the first
-- :postings_per_lexeme postings of the lexeme in impact order, one index range each. A memory
-- that holds none of the question's lexemes near the top of their lists cannot outscore those
-- that do by its lexical side, so only these are scored, exactly, from their tsvectors (one
-- row per question lexeme a candidate holds, as `LEXICAL_MATCHES_SQL` gives them).
SELECT m.id, ${section} AS section, term.lexeme, cardinality(term.positions) AS tf,
       m.tsv_length AS length
  FROM (SELECT DISTINCT top.memory_id
          FROM owner_stats o
         CROSS JOIN query_terms q
         CROSS JOIN LATERAL unnest(q.lexemes) AS question(lexeme)
         CROSS JOIN LATERAL unnest(o.owner_keys) AS owner(key)
         CROSS JOIN LATERAL (
               SELECT p.memory_id FROM memory_posting p
                WHERE p.tenant_id = :tenant_id AND p.owner_key = owner.key
                  AND p.lexeme = question.lexeme
                ORDER BY p.impact DESC
                LIMIT :postings_per_lexeme
         ) AS top
         WHERE :use_lexical AND o.section = ${section}) AS candidate
  JOIN memory m ON m.tenant_id = :tenant_id AND m.id = candidate.memory_id
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
 WHERE ${candidate_filter}
"""
"""One bounded section's lexical candidates (`bounded_matches` of `HYBRID_SEARCH_SQL`): the
top postings of the question's lexemes that pass the section's filter."""

NEAREST_SQL = """
SELECT m.id, ${section} AS section, ${vector} <=> ${question_vector} AS distance
  FROM memory m
 WHERE :use_vector AND ${vector} IS NOT NULL
   AND ${candidate_filter}
 ORDER BY ${vector} <=> ${question_vector}
 LIMIT ${pool}
"""
"""One section's vector candidates: HNSW with pgvector's iterative scan (hnsw.iterative_scan,
set per connection), so a scan filtered to one user keeps going until it has found the pool's
rows that pass the filter.

Each section's candidates come from a scan of its own (the fragments joined by UNION ALL): one
scan under the sections' filters OR'ed would leave the planner only their common conditions for
an index, and under one LIMIT a section with near vectors would crowd the others out."""

QUESTION_VECTOR_SQL = "(SELECT CAST(CAST(:query_embedding AS real[]) AS vector))"
"""The question's vector wherever the statement compares with it (`${question_vector}`). It is
bound as float4[], which the driver encodes in binary, where formatting pgvector's text form
cost ~0.2 ms of Python per search.

The conversion is a scalar subquery, so PostgreSQL runs it once per statement (an InitPlan) and
every comparison reads its result. Written as a bare expression, the generic plan (where the
bound value is unknown when planning, so the cast is not folded into a constant) converted the
384 floats again for every row it compared: ~0.5 ms of a ~6 ms statement at 250 memories a
user. The subquery's result is a parameter of the plan like a bound value, so the HNSW index
still serves `ORDER BY m.embedding <=> ${question_vector}`."""


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
    live_count_cap: Annotated[int, Integer()] = 2 * COMMON_LEXEME_DOCUMENTS
    vector_index_share: Annotated[float, Float()] = 0.02
    # Not bound: it names the column in the statement's text.
    vector_column: VectorColumn = FIRST_VECTOR_COLUMN


RANKING_PARAMETERS: tuple[tuple[str, TypeEngine[Any]], ...] = tuple(
    (name, sql_type)
    for name, hint in get_type_hints(SearchParams, include_extras=True).items()
    for sql_type in getattr(hint, "__metadata__", ())
    if isinstance(sql_type, TypeEngine)
)
"""Every ranking parameter of `SearchParams` with its SQL type, in declaration order."""


@dataclass(frozen=True)
class SearchRow:
    """One hit as the fusion statement returns it: the memory, why it ranked, its vector
    (only when asked for, for MMR)."""

    memory: MemoryRead
    scores: ComponentScores
    embedding: list[float] | None
    bounded: bool = False
    """Whether its section's lexical side read the owners' postings (`BOUNDED_MATCHES_SQL`)
    rather than testing every memory."""


def vector_fragments(column: VectorColumn) -> dict[str, str]:
    """The statement's fragments for the vector column a search reads: the column as its
    index is built (`${vector}`, over `memory m`), and the hit's vector and model name."""
    return {
        "vector": column.expression("m"),
        "hit_vector": f"s.{column.name}",
        "hit_vector_model": f"s.{column.model_column}",
    }


@lru_cache(maxsize=128)
def _search_template(candidate_filters: tuple[str, ...], column: VectorColumn) -> str:
    """`HYBRID_SEARCH_SQL` with section `i` selected by `candidate_filters[i]`, its pool and
    limit bound as `:pool_i` and `:limit_i`, its vectors read from `column`."""
    # Cached per filter shape: the same text (and so asyncpg's prepared statement) is reused.

    vectors = vector_fragments(column)

    def each_section(fragment: str) -> str:
        return " UNION ALL ".join(
            "("
            + render(
                fragment,
                section=str(index),
                candidate_filter=candidate_filter,
                pool=f":pool_{index}",
                owner_keys=f"CAST(:owner_keys_{index} AS text[])",
                question_vector=QUESTION_VECTOR_SQL,
                **vectors,
            )
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
    return render(
        HYBRID_SEARCH_SQL,
        owner_stats=each_section(OWNER_STATS_SQL),
        lexical_matches=each_section(LEXICAL_MATCHES_SQL),
        bounded_matches=each_section(BOUNDED_MATCHES_SQL),
        collection=each_section(COLLECTION_SQL),
        nearest=each_section(NEAREST_SQL),
        beyond_pools=render(
            BEYOND_POOLS_SQL.strip(), question_vector=QUESTION_VECTOR_SQL, **vectors
        ),
        candidate_filter=candidate_filter,
        section=section,
        lexical_pool=lexical_pool,
        pool=pool,
        limit=limit,
        **vectors,
    )


def _case(branch: str, candidate_filters: tuple[str, ...], subject: str = "") -> str:
    branches = " ".join(branch.format(each, index) for index, each in enumerate(candidate_filters))
    return f"CASE {subject} {branches} END"


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


def _bound_values(tenant_id: str, sections: Sequence[SearchParams]) -> dict[str, Any]:
    """Every value the statement binds but the filters' own: sizes per section, the ranking
    parameters (shared by the sections) and the tenant."""
    values: dict[str, Any] = {}
    for index, params in enumerate(sections):
        values[f"pool_{index}"] = params.pool
        values[f"limit_{index}"] = params.limit
        values[f"owner_keys_{index}"] = [owner.key for owner in params.filter.owners]
    values.update((name, getattr(sections[0], name)) for name, _ in RANKING_PARAMETERS)
    values["tenant_id"] = tenant_id
    return values


def hybrid_search_statement(tenant_id: str, params: SearchParams) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for these parameters, every value bound."""
    return sectioned_search_statement(tenant_id, [params])


def sectioned_search_statement(tenant_id: str, sections: Sequence[SearchParams]) -> TextualSelect:
    """`HYBRID_SEARCH_SQL` for several searches as one statement; a row's `section` column is
    the index of the search it answers, with the rank it has there (`section_rank`).

    The searches must differ only in their filter, pool and limit, and their filters must
    select disjoint memories (a memory is a candidate of one section at most)."""
    return _sectioned_statement(tenant_id, sections, _section_predicates(tenant_id, sections))


_SIZE_TYPE = Integer()
_SQL_TYPES: dict[str, TypeEngine[Any]] = dict(RANKING_PARAMETERS) | {"tenant_id": Text()}
_OWNER_KEYS_TYPE = ARRAY(Text())


def _sectioned_statement(
    tenant_id: str, sections: Sequence[SearchParams], predicates: Sequence[Predicate]
) -> TextualSelect:
    binds = [
        bindparam(
            name,
            value,
            type_=_OWNER_KEYS_TYPE
            if name.startswith("owner_keys_")
            else _SQL_TYPES.get(name, _SIZE_TYPE),
        )
        for name, value in _bound_values(tenant_id, sections).items()
    ]
    return (
        text(
            _search_template(
                tuple(predicate.sql for predicate in predicates), sections[0].vector_column
            )
        )
        .bindparams(*(bind for predicate in predicates for bind in predicate.binds), *binds)
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
    key = (
        dialect.name,
        _search_template(
            tuple(predicate.sql for predicate in predicates), sections[0].vector_column
        ),
    )
    compiled = _compiled_searches.get(key)
    if compiled is None:
        if len(_compiled_searches) >= _COMPILED_SEARCHES_KEPT:
            _compiled_searches.clear()
        statement = _sectioned_statement(tenant_id, sections, predicates)
        compiled = CompiledSearch.compile(statement, dialect)
        _compiled_searches[key] = compiled
    values = {bind.key: bind.value for predicate in predicates for bind in predicate.binds}
    values.update(_bound_values(tenant_id, sections))
    return compiled, compiled.arguments(values)


CUSTOM_SEARCH_PLAN_SQL = (
    "SET LOCAL plan_cache_mode = force_custom_plan; SET LOCAL hnsw.ef_search = 1000"
)
"""Plan the fusion statement for the search at hand, for owners whose vectors are best read
from the HNSW index (see `PlannedSearch`), with a wider candidate list than the configured
one: the index's nearest first are the whole vector side of such a search, not a shortcut
beside an exact sort, so its recall is the search's."""

INDEX_SCAN_AS_CONFIGURED_SQL = "SET LOCAL hnsw.ef_search TO DEFAULT"
"""The HNSW candidate list as the connection was configured (`MNEME_HNSW_EF_SEARCH`)."""

GENERIC_SEARCH_PLAN_SQL = (
    "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL max_parallel_workers_per_gather = 0"
)
"""Run the fusion statement on its generic plan (planned once per connection and filter shape),
without parallel workers.

Left to choose (`auto`), PostgreSQL replans the statement for every search: its plan for the
actual owner is always estimated cheaper than the plan for any owner, so it never switches. For
this 7 KB statement that planning cost as much as executing it (4 to 5 ms of a ~10 ms statement
at 100k memories). The generic plan also makes the result depend on the parameters alone: a
custom plan may read an owner's nearest memories from the HNSW index (approximate) where the
generic one sorts the owner's memories by their exact distance, so under `auto` two pooled
connections holding different plans could return different top 10s for the same question.

Parallel workers: the statement holds an exact branch and a bounded one for each section, and
only one of them runs for a given owner. Planned for any owner, the exact branch's scans over
an owner's memories may get a parallel plan, whose workers start (~10 ms on two cores) even
when the branch's one-time filter then says it does not run. A search is one request among
many: it gains nothing from taking more cores."""

DEFAULT_PLAN_CHOICE_SQL = (
    "SET LOCAL plan_cache_mode TO DEFAULT; SET LOCAL max_parallel_workers_per_gather TO DEFAULT; "
    + INDEX_SCAN_AS_CONFIGURED_SQL
)
"""The rest of the transaction plans as the server is configured to."""

GENERIC_PLANS_RUN_SQL = "SELECT NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
"""Whether the server can run the fusion statement on a generic plan. Citus cannot: it refuses
to distribute the statement with its parameters unbound ("could not create distributed plan"),
and makes PostgreSQL choose custom plans for it by itself."""

_generic_plans_run: weakref.WeakKeyDictionary[Driver, bool] = weakref.WeakKeyDictionary()
"""The answer of `GENERIC_PLANS_RUN_SQL` per driver connection, for as long as it lives."""


async def runs_generic_plans(driver: Driver) -> bool:
    """`GENERIC_PLANS_RUN_SQL` for the server behind `driver`, asked once per connection (the
    service's searches and the benchmarks' bare statement alike)."""
    answer = _generic_plans_run.get(driver)
    if answer is None:
        answer = bool(await driver.fetchval(GENERIC_PLANS_RUN_SQL))
        _generic_plans_run[driver] = answer
    return answer


class PlannedSearch:
    """The fusion statement's runner inside `FusionRepository.planned()`: the planner setting
    is made, and every search runs on the transaction's driver connection.

    An owner whose memories are a large part of the table (`owner_stats.indexed_vectors`) is
    searched on a plan made for it (`CUSTOM_SEARCH_PLAN_SQL`): planned knowing whose memories
    it reads, PostgreSQL reads their nearest vectors from the HNSW index, in a number of steps
    that follows the owner's share of the table, not its size. The generic plan, made for any
    owner, sorts the owner's vectors exactly, which is cheaper for the many small owners (and
    needs no planning per search). Which owners are large is learnt from the searches' own
    results (`indexed_owners`): the first search of a large owner in a process runs on the
    generic plan."""

    def __init__(
        self,
        driver: Driver,
        tenant_id: str,
        dialect: Dialect,
        *,
        generic_plan: bool,
        statistics: StatisticsRequests | None,
    ) -> None:
        self._driver = driver
        self._tenant_id = tenant_id
        self._dialect = dialect
        self._generic_plan = generic_plan
        self._statistics = statistics
        self._custom_plan = False

    async def search(self, params: SearchParams) -> list[SearchRow]:
        return (await self.search_sections([params]))[0]

    async def search_sections(self, sections: Sequence[SearchParams]) -> list[list[SearchRow]]:
        """Several searches in one statement (see `sectioned_search_statement`): each one's
        hits, best first, in the order of `sections`."""
        # Compiled once per filter shape (see `compiled_search`), and run straight on the
        # driver: SQLAlchemy's execution layer cost ~1 ms of CPU a search, a third of the
        # request's own database work in Python (docs/benchmarks.md).
        compiled, arguments = compiled_search(self._tenant_id, sections, self._dialect)
        owners = [_owner_keys(self._tenant_id, params) for params in sections]
        await self._plan_for(self._generic_plan and any(map(indexed_owners.holds, owners)))
        hits: list[list[SearchRow]] = [[] for _ in sections]
        due: set[Owner] = set()
        for row in await self._driver.fetch(compiled.sql, *arguments):
            section = row["section"]
            if not hits[section]:
                indexed_owners.learn(owners[section], row["indexed_vectors"])
                if statistics_due(
                    sections[section], row["section_documents"], row["statistics_age"]
                ):
                    due.update(sections[section].filter.owners)
            hits[section].append(_search_row(row))
        if due and self._statistics is not None:
            self._statistics.ask(due)
        return hits

    async def _plan_for(self, custom: bool) -> None:
        """Plan the next statement for its owners (`custom`) or generically; a setting is
        sent only when it changes, and `FusionRepository.planned()` restores the
        configured ones when the block ends."""
        if custom == self._custom_plan:
            return
        await self._driver.execute(
            CUSTOM_SEARCH_PLAN_SQL
            if custom
            else f"{GENERIC_SEARCH_PLAN_SQL}; {INDEX_SCAN_AS_CONFIGURED_SQL}"
        )
        self._custom_plan = custom


def _owner_keys(tenant_id: str, params: SearchParams) -> tuple[str, ...]:
    return (tenant_id, *sorted(owner.key for owner in params.filter.owners))


class IndexedOwners:
    """The owners (a search's tenant and owner keys) whose latest search reported
    `indexed_vectors`, for `INDEXED_OWNERS_TTL`. In process memory: a process that has not
    seen an owner yet plans its first search generically, which costs time, never results."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._owners: ExpiringKeys[tuple[str, ...]] = ExpiringKeys(ttl, kept)

    def holds(self, owners: tuple[str, ...]) -> bool:
        return owners in self._owners

    def learn(self, owners: tuple[str, ...], indexed: bool) -> None:
        if indexed:
            self._owners.add(owners)
        else:
            self._owners.discard(owners)


INDEXED_OWNERS_TTL = timedelta(minutes=5)
indexed_owners = IndexedOwners(INDEXED_OWNERS_TTL, kept=10_000)
"""The process's large owners (see `PlannedSearch`)."""


STATISTICS_MAX_AGE = timedelta(minutes=10)
"""How old a bounded search lets its owners' statistics get before it asks for a recount:
the collection's size and its common lexemes' counts move slowly (a rare lexeme is counted at
search time), so minutes of drift change the ranking little."""


def statistics_due(params: SearchParams, documents: int | None, age: float | None) -> bool:
    """Whether a section's search should have its owners' statistics recounted: it ran exactly
    over enough memories to be bounded (the statistics are missing or short), or it ran
    bounded on statistics older than `STATISTICS_MAX_AGE`."""
    if age is not None:
        return age > STATISTICS_MAX_AGE.total_seconds()
    return documents is not None and documents >= params.bounded_from


class FusionRepository(TenantRepository):
    """Runs the fusion statement in the request's tenant-scoped transaction. With `statistics`,
    a search that finds its owners' statistics missing or old asks for a recount through it."""

    def __init__(
        self, session: AsyncSession, tenant_id: str, statistics: StatisticsRequests | None = None
    ) -> None:
        super().__init__(session, tenant_id)
        self._statistics = statistics

    @asynccontextmanager
    async def planned(self) -> AsyncIterator[PlannedSearch]:
        """The fusion statements run inside run on their generic plan
        (`GENERIC_SEARCH_PLAN_SQL`), where the server runs one; afterwards the transaction plans
        as configured again.

        Enter it before awaiting the question's vector: the setting's round trip then overlaps
        the embedding instead of following it. The settings go as simple queries: nothing to
        prepare, one round trip each."""
        connection = await self._session.connection()
        driver = await transaction_driver(connection)
        generic_plan = await runs_generic_plans(driver)
        if generic_plan:
            await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        yield PlannedSearch(
            driver,
            self._tenant_id,
            connection.dialect,
            generic_plan=generic_plan,
            statistics=self._statistics,
        )
        # Not after a failed statement: the transaction is aborted, and ends with the setting.
        if generic_plan:
            await driver.execute(DEFAULT_PLAN_CHOICE_SQL)

    async def search(self, params: SearchParams) -> list[SearchRow]:
        """`PlannedSearch.search` under a planner setting of its own."""
        return (await self.search_sections([params]))[0]

    async def search_sections(self, sections: Sequence[SearchParams]) -> list[list[SearchRow]]:
        """`PlannedSearch.search_sections` under a planner setting of its own."""
        async with self.planned() as planned:
            return await planned.search_sections(sections)


def _search_row(row: Mapping[str, Any]) -> SearchRow:
    return SearchRow(
        memory=MemoryRead.model_validate(dict(row.items())),
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
        bounded=row["statistics_age"] is not None,
    )
