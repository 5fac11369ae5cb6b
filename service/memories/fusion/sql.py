"""The fusion statement's text: `HYBRID_SEARCH_SQL` and the fragments rendered into it.

Every placeholder (`${name}`) is filled by `statement.render`, which fails on one left
unfilled; every `:name` is a value bound from `SearchParams` (or a section's size and owners).
Nothing here runs: the SQL is read top to bottom like the search it answers.
"""

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
),${few_passing}
lexeme_documents AS (
    -- In how many of a bounded section's memories each question lexeme is: from the owners'
    -- statistics (a common lexeme) or from the postings themselves (a rare one, a bounded
    -- count). Read by the lexemes' weights and by the choice of the lexemes whose postings
    -- bring candidates (`BOUNDED_MATCHES_SQL`).
    SELECT o.section, term.lexeme, df.documents
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
),${lexical_exact}
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
    SELECT section, documents, mean_length FROM owner_stats o${read_postings_where}
),
term_weights AS (
    -- Inverse document frequency (BM25's, never negative): a name in every memory weighs
    -- next to nothing, the rare word that identifies one memory weighs most. An exact
    -- section counts each lexeme's memories among its matches; a bounded one has read only
    -- the top of each lexeme's postings, so it takes the count from `lexeme_documents`.
    SELECT section, lexeme, ${exact_idf} AS idf, c.mean_length
      FROM exact_matches JOIN collection c USING (section)
     GROUP BY section, lexeme, c.documents, c.mean_length
    UNION ALL
    SELECT o.section, d.lexeme, ${bounded_idf} AS idf, o.mean_length
      FROM owner_stats o JOIN lexeme_documents d USING (section)${read_postings_where}
),
lexical_hits AS (
    SELECT id, section, score, rank
      FROM (SELECT id, section, score,
                   row_number() OVER (PARTITION BY section ORDER BY score DESC, id) AS rank
              FROM (SELECT lm.id, lm.section,
                           -- BM25 (`service.memories.bm25`): saturating term frequency,
                           -- length-normalised. Rounded to 1e-9: a sum's last bits depend on
                           -- the order the plan adds its terms in, and two memories of equal
                           -- score must tie (and rank by id) whatever the plan.
                           ${lexical_score} AS score
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
           -- Lexical relative to the best lexical hit (0..1): linear fusion's scale, and the
           -- lexical side's for breaking ties.
           coalesce(l.score / nullif(max(l.score) OVER by_section, 0), 0) AS lexical_strength,
           coalesce(1.0 / (:rrf_k + l.rank), 0) + coalesce(1.0 / (:rrf_k + v.rank), 0)
               AS rank_fused_score
      FROM lexical_hits l FULL OUTER JOIN vector_hits v ON v.id = l.id
    WINDOW by_section AS (PARTITION BY coalesce(l.section, v.section))
),
candidates AS (
    -- With the few columns of the memory that the ranking reads beyond its scores (its thread
    -- and time, speaker, confidence and kind), carried from here to the final scores rather
    -- than read again for every candidate and neighbour there.
    -- Each candidate's row by its key (`MEMORY_BY_KEY_SQL`, as every read of a memory by its
    -- key here).
    SELECT f.id, f.section, f.lexical_rank, f.lexical_score, f.vector_rank,
           cosine.value AS vector_cosine, f.lexical_strength,
           -- The cosine as is for breaking ties (a negative one ranks below no match at all).
           coalesce(cosine.value, 0) AS vector_strength,
           CASE WHEN :fusion = 'linear' THEN
                    -- Magnitude-aware: a perfect vector match outscores a weak lexical one.
                    ${linear_fused_score}
                ELSE f.rank_fused_score
           END AS fused_score,
           m.source_thread_id AS thread_id,
           m.happened_at, m.speaker, m.event_at, m.created_at, m.confidence, m.kind,
           m.last_confirmed_at
      FROM fused f
     CROSS JOIN LATERAL ${fused_row}
     -- Linear fusion weighs a candidate's cosine, so a lexical candidate the vector side did not
     -- bring has its own, from the row read here: the vector side then has only to bring the
     -- memories near the question that the lexical side missed (`SearchParams.vector_pool`).
     -- RRF fuses ranks, and a rank exists only within the vector side's pool.
     CROSS JOIN LATERAL (
           SELECT coalesce(f.vector_cosine,
                           CASE WHEN :use_vector AND :fusion = 'linear'
                                THEN 1 - (${vector} <=> ${question_vector})
                           END) AS value
     ) AS cosine
),
adjacent AS (
    -- A conversation turn is often found through what is next to it: the question it
    -- answers, the line it replies to, a fact drawn from it. Each candidate lends its fused
    -- score to the turn right before and right after it in its source thread, found or not, on
    -- top of their own. Turns are the thread's episodic memories (its stored messages and the
    -- episodes drawn from them), and only they receive: a fact (semantic) or a procedure is a
    -- statement that stands alone, and the facts drawn from a conversation follow one another
    -- in the order they were drawn, not as a question and its answer. A fact lends to the turns
    -- around it (the one it was drawn from, the one after), and a turn's neighbour is the
    -- nearest turn, past any fact drawn in between.
    -- The neighbour must be in the candidate's section (the section's filter, or for several
    -- sections the one that puts it in the candidate's; a section that holds no turns has no
    -- look-ups, `${turn_sections}`), and is found by walking the thread's turns
    -- (`ix_memory_thread_turns`) in time order from the candidate.
    SELECT n.id, c.section, c.thread_id, max(c.fused_score) AS evidence
      FROM candidates c
     CROSS JOIN LATERAL (
           (SELECT m.id FROM memory m
             WHERE m.source_thread_id = c.thread_id AND m.kind = 'episodic'
               AND ${neighbour_filter}
               AND (m.happened_at, m.id) < (c.happened_at, c.id)
             ORDER BY m.happened_at DESC, m.id DESC
             LIMIT 1)
           UNION ALL
           (SELECT m.id FROM memory m
             WHERE m.source_thread_id = c.thread_id AND m.kind = 'episodic'
               AND ${neighbour_filter}
               AND (m.happened_at, m.id) > (c.happened_at, c.id)
             ORDER BY m.happened_at, m.id
             LIMIT 1)
     ) AS n
     WHERE :neighbour_weight > 0 AND c.thread_id IS NOT NULL AND ${turn_sections}
     -- A neighbour is in its candidates' thread: the thread is the neighbour's own.
     GROUP BY n.id, c.section, c.thread_id
),
dated AS (
    -- The memories that happened in the time the query names (`:window_start` to
    -- `:window_end`, none when it names no time), whether or not a pool brought them: the
    -- question is about what happened then, and its words need not say anything about it
    -- ("what did I do last May?"). Each section's latest `pool` of them, under its filter
    -- (`DATED_SQL`).
    ${dated}
),
neighbourhood AS (
    -- Each candidate, each neighbour and each memory of the time the query names once, with
    -- the evidence its neighbours lend it: one aggregate over the lists rather than a join of
    -- one with another. Planned before the pools are known, a join of two CTEs is estimated
    -- at a row or two a side and may be run as a nested loop, which compares every candidate
    -- with every neighbour (a context of three sections: ~500 by ~750). A candidate's own
    -- columns come through unchanged (it is one row of its group, the others' rows hold NULL
    -- there); the thread is the memory's own on every row of its group.
    SELECT id, section, thread_id, bool_or(in_pool) AS in_pool,
           max(lexical_rank) AS lexical_rank, max(lexical_score) AS lexical_score,
           max(vector_rank) AS vector_rank, max(vector_cosine) AS vector_cosine,
           max(fused_score) AS fused_score, coalesce(max(evidence), 0) AS neighbour_score,
           max(lexical_strength) AS lexical_strength, max(vector_strength) AS vector_strength,
           max(speaker) AS speaker, max(event_at) AS event_at,
           max(created_at) AS created_at, max(confidence) AS confidence, max(kind) AS kind,
           max(last_confirmed_at) AS last_confirmed_at
      FROM (SELECT c.id, c.section, true AS in_pool, c.lexical_rank, c.lexical_score,
                   c.vector_rank, c.vector_cosine, c.fused_score, NULL::float8 AS evidence,
                   c.lexical_strength, c.vector_strength, c.thread_id, c.speaker, c.event_at,
                   c.created_at, c.confidence, c.kind, c.last_confirmed_at
              FROM candidates c
            UNION ALL
            SELECT a.id, a.section, false, NULL, NULL, NULL, NULL, NULL, a.evidence, NULL, NULL,
                   a.thread_id, NULL, NULL, NULL, NULL, NULL, NULL
              FROM adjacent a
            UNION ALL
            SELECT d.id, d.section, false, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                   d.thread_id, NULL, NULL, NULL, NULL, NULL, NULL
              FROM dated d) AS lists
     GROUP BY id, section, thread_id
),
beyond_pools AS (
    ${beyond_pools}
),
pooled AS (
    SELECT n.id, n.section, n.lexical_rank, n.lexical_score, n.vector_rank, n.vector_cosine,
           n.fused_score, n.neighbour_score, n.lexical_strength, n.vector_strength,
           true AS in_pool, n.thread_id, n.speaker, n.event_at, n.created_at, n.confidence,
           n.kind, n.last_confirmed_at
      FROM neighbourhood n
     WHERE n.in_pool
    UNION ALL
    SELECT b.id, b.section, NULL, b.lexical_score, NULL, b.vector_cosine,
           b.fused_score, b.neighbour_score, b.lexical_strength, b.vector_strength, false,
           b.thread_id, b.speaker, b.event_at, b.created_at, b.confidence, b.kind,
           b.last_confirmed_at
      FROM beyond_pools b
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
                    CASE WHEN p.thread_id IS NOT NULL THEN
                         max(p.fused_score) FILTER (WHERE p.in_pool)
                             OVER (PARTITION BY p.section, p.thread_id)
                    END) AS thread_score,
           -- The prior for a speaker the query names: the memory's speaker shares a lexeme
           -- with the query (so only the names the owner's memories actually carry can match),
           -- on the fused scale like the thread evidence.
           CASE WHEN p.speaker IS NOT NULL
                     AND tsvector_to_array(to_tsvector('english', p.speaker))
                         && (SELECT q.lexemes FROM query_terms q)
                THEN max(p.fused_score) OVER (PARTITION BY p.section) ELSE 0.0
           END AS speaker_score,
           -- The time the query names (a day, a recent month), as a window: the memories that
           -- happened inside it (their `event_at`), on the fused scale. A memory without one
           -- has no time of its own: when it was stored is when it was learned (a preference
           -- told today may hold for years), and "what did I do today?" asks for what
           -- happened today, not for every fact written down today.
           CASE WHEN p.event_at >= :window_start AND p.event_at < :window_end
                THEN max(p.fused_score) OVER (PARTITION BY p.section) ELSE 0.0
           END AS date_score,
           greatest(p.lexical_strength, p.vector_strength) AS stronger_side,
           least(p.lexical_strength, p.vector_strength) AS weaker_side,
           p.id,
           (1 - :recency_weight) + :recency_weight * decay.factor AS recency_factor,
           (1 - :confidence_weight) + :confidence_weight * p.confidence AS confidence_factor
      FROM pooled p
      CROSS JOIN LATERAL (
          -- Half-lives elapsed since the memory happened (or was last confirmed), capped:
          -- 0.5^1000 is already 0 for ranking, and a larger exponent would make power()
          -- fail with an underflow error for a memory from long ago.
          SELECT CASE WHEN half_life.days <= 0 THEN 1.0
                      ELSE power(0.5, least(greatest(extract(epoch FROM now() - greatest(
                               coalesce(p.event_at, p.created_at),
                               coalesce(p.last_confirmed_at, '-infinity'))), 0)
                           / 86400.0 / half_life.days, 1000))
                 END AS factor
            FROM (SELECT CASE p.kind WHEN 'semantic' THEN :half_life_semantic
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
       -- In pgvector's binary form (its dimension, then the float4 values), which Python reads
       -- as one array: a float4[] of 384 elements costs ~35 µs a vector to build, send and
       -- decode into Python floats, the binary form ~4 µs (an MMR search reads up to 300).
       CASE WHEN :with_embeddings THEN vector_send(${hit_vector}) END AS embedding,
       ranked.section, ranked.section_rank,
       -- How the section's lexical side ran, for keeping the owners' statistics fresh: the
       -- memories it ranked over, and the age of the statistics it used (NULL: exact).
       (SELECT c.documents FROM collection c WHERE c.section = ranked.section
         LIMIT 1) AS section_documents,
       (SELECT extract(epoch FROM now() - o.refreshed_at) FROM owner_stats o
         WHERE o.section = ranked.section) AS statistics_age
  FROM (SELECT h.*,
               -- Equal scores (RRF gives a lexical-only hit and a vector-only hit at the same
               -- rank the same fused score) are decided by what the scores mean: the stronger
               -- of the two sides, then the other; the id only when everything is equal, so
               -- the same data and question rank the same.
               row_number() OVER (PARTITION BY h.section ORDER BY h.final_score DESC,
                                  h.stronger_side DESC, h.weaker_side DESC, h.id) AS section_rank
          FROM hits h
         -- A section that leaves out the memories drawn only from the messages a context block
         -- shows itself (`${left_out}`: false for every other) ranks them like any other, for
         -- their evidence to their neighbours and their session, but returns none of them.
         WHERE NOT ${left_out}) AS ranked
 CROSS JOIN LATERAL ${hit_row}
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
-- The memories only a candidate's neighbour or the time the query names brought in (neither
-- side's pool reached them), scored by their own match like any candidate, so a neighbour that
-- matches the query itself is not left with its neighbour's evidence alone, nor a memory of
-- that day with its date alone. Bounded by the neighbours (two per candidate) and the
-- memories of that time (a pool per section): each gets one cosine and the BM25 of its own
-- lexemes among the query's (the statistics of `term_weights`, the same formula as
-- `lexical_hits`), never a rank over all of the owner's matches. Its ranks stay empty: it is
-- beyond both pools, so under RRF, which fuses ranks, it has no fused score.
SELECT b.id, b.section, b.neighbour_score, own.lexical_score, own.cosine AS vector_cosine,
       b.thread_id, m.speaker, m.event_at, m.created_at, m.confidence, m.kind,
       m.last_confirmed_at,
       coalesce(own.lexical_score / nullif(best.score, 0), 0) AS lexical_strength,
       coalesce(own.cosine, 0) AS vector_strength,
       CASE WHEN :fusion = 'linear' THEN ${linear_fused_score} ELSE 0.0 END AS fused_score
  FROM neighbourhood b
 CROSS JOIN LATERAL ${neighbour_row}
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL (
       SELECT CASE WHEN :use_vector
                   THEN 1 - (${vector} <=> ${question_vector})
              END AS cosine,
              (SELECT ${own_lexical_score}
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
 WHERE NOT b.in_pool
"""
"""The neighbours and the memories of the time the query names outside both pools, with their
own components (`beyond_pools` of `HYBRID_SEARCH_SQL`)."""

DATED_SQL = """
SELECT d.id, ${section} AS section, d.thread_id
  FROM (${scans}) AS d
 ORDER BY d.event_at DESC, d.id DESC
 LIMIT ${pool}
"""
"""One section's memories of the time the query names (`dated` of `HYBRID_SEARCH_SQL`): the
latest `${pool}` of its scans (`DATED_SCAN_SQL`, one per owner and kind, joined by UNION ALL),
merged in their order. A month of a large owner may hold thousands of memories; the section's
pool of them is what a search ranks beside its lexical and vector pools, which bring the
memories of that month that match the question wherever they lie in it."""

DATED_SCAN_SQL = """
SELECT m.id, m.source_thread_id AS thread_id, m.event_at
  FROM memory m
 WHERE :window_start IS NOT NULL${kind_asked}
   AND m.event_at >= :window_start AND m.event_at < :window_end
   AND m.kind = ${kind}
   AND ${owner_filter}
 ORDER BY m.user_id DESC, m.event_at DESC, m.id DESC
 LIMIT ${pool}
"""
"""One owner's memories of one kind that happened in the time the query names, under the
section's filter for that owner (`${owner_filter}`, the organization's stated by its user
column, the kinds left out: `${kind_asked}` tests whether the filter asks for this kind, once,
before the scan), latest first: a range of ix_memory_event_time (tenant, user, kind, event
time, id; only the memories with an event time), read backwards from the window's end and only
as far as `${pool}` of them pass the filter. No memory outside the window is read, nor one
without an event time (a fact stored today is not what happened today), however large the
owner; a question that names no time reads nothing (its window is NULL).

The order names the user first, though a scan reads one owner: the organization is `user_id IS
NULL`, which the planner does not take as one value, so in the order of the event time alone it
would sort the organization's memories of the window instead of reading the pool's. A user not
written into the text is bound as one value (`MemoryFilter.where`'s `one_user_as_value`), and
the filter's kinds are tested once before the scan (`${kind_asked}`), not on each row: a
generic plan prices a bound array at ten values, so `user_id = ANY(…)` and `kind = ANY(…)` made
this index look like a hundred ranges, and it read every memory of the user newest first
(ix_memory_user_newest) or of the tenant (a bitmap of its key) instead, testing each one's
event time: for the scenario's 100k owner's episodes of one month, 100,164 shared buffers and
170 ms, against 67 buffers and 0.1 ms here."""

LINEAR_FUSED_SQL = """CASE WHEN NOT :use_vector THEN ${lexical}
                WHEN NOT :use_lexical THEN greatest(coalesce(${cosine}, 0), 0)
                ELSE :lexical_weight * ${lexical}
                     + (1 - :lexical_weight) * greatest(coalesce(${cosine}, 0), 0)
           END"""
"""Linear fusion's score of a candidate from its lexical strength (`${lexical}`: BM25 relative to
the section's best lexical hit, 0 without a match) and its cosine (`${cosine}`, NULL without
one). `:lexical_weight` shares the score between the two sides when both run. A search with one
side (mode `lexical` or `vector`, or a hybrid one whose question got no vector) has one signal,
and takes it whole whatever the weight: scaled by its share, every score would shrink (to 0 at
the weight's end, the order left to the tie-break) while nothing is there to take the rest."""

LEXICAL_MATCHES_SQL = """
-- Every candidate memory of the section holding any of the question's lexemes, one row per
-- lexeme it holds, with that lexeme's frequency in the memory. Under row-level security the
-- GIN index cannot serve `@@` (not leakproof: it may not run ahead of the tenant policy), so
-- each candidate is tested; ix_memory_lexical carries every column the filter tests, and the
-- tsvector is read from the rows that pass it (no B-tree entry can hold a long memory's).
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
   AND ${searched_exactly}
   AND ${candidate_filter}
"""
"""One exact section's lexical candidates (`exact_matches` of `HYBRID_SEARCH_SQL`): every
memory of the section that holds a lexeme of the question."""

COLLECTION_SQL = """
-- The statistics BM25 needs, over exactly the memories the section may return: how many
-- there are and their mean length (in distinct lexemes: `tsv_length` is `length(tsv)`, stored,
-- so an index-only scan of ix_memory_lexical serves this without reading the table).
SELECT ${section} AS section, count(*) AS documents,
       coalesce(CAST(avg(m.tsv_length) AS float8), 0) AS mean_length
  FROM ${collected} m
 WHERE :use_lexical AND ${collected_filter}
   AND ${searched_exactly}
 GROUP BY 1
"""
"""One exact section's BM25 statistics (`collection` of `HYBRID_SEARCH_SQL`): over `memory` and the
section's filter, or for a section `LEXICAL_EXACT_SQL` takes over `PASSED_LENGTHS_SQL`."""

PASSED_LENGTHS_SQL = """(${passing_lengths})"""
"""The lengths of the memories of a section `LEXICAL_EXACT_SQL` takes: one `SELECT m.tsv_length`
per owner's filter, joined by UNION ALL, each an index-only scan (ix_memory_lexical includes the
length). Their ids joined to the table instead were planned as a hash of every entry of the
tenant's."""

OWNER_STATS_SQL = """
-- A section is bounded when the statistics of its owners (counted in the background) hold at
-- least :bounded_from memories; its row gives BM25 the collection's size and mean length from
-- them. An owner without statistics has too few memories to matter (or they were not counted
-- yet, and the next recount counts them): its postings are still read, its lexemes counted
-- from them. A section without a row is searched exactly.
SELECT ${section} AS section, ${owner_keys} AS owner_keys, sum(s.documents) AS documents,
       coalesce(sum(s.total_length)::float8 / nullif(sum(s.documents), 0), 0) AS mean_length,
       min(s.refreshed_at) AS refreshed_at
  FROM memory_owner_stats s
 WHERE s.tenant_id = :tenant_id AND s.owner_key = ANY(${owner_keys})
HAVING sum(s.documents) >= :bounded_from
"""
"""One section's owner statistics, if it is bounded (`owner_stats` of `HYBRID_SEARCH_SQL`).
It names no catalog table: where the server distributes queries (Citus) the coordinator's
catalog is a local table, and a query that joins a local table with distributed ones cannot be
sent to the tenant's shard whole (Citus then plans each CTE apart: twenty plans, each result
sent on as an intermediate one, ~40 ms of a ~65 ms search of a small owner). What a search
needs from the catalog it asks before the statement (`OWNERS_SEARCHED_SQL`)."""

OWNER_INDEXES_SQL = """ARRAY(
    SELECT kind.name || ':' || owner.key
      FROM unnest(${owner_keys}) AS owner(key)
     CROSS JOIN unnest(${owner_index_kinds}) AS kind(name)
     WHERE (SELECT true FROM pg_class c
              JOIN pg_index i ON i.indexrelid = c.oid AND i.indisvalid
             WHERE c.relname = ${owner_index_prefix}
                               || left(md5(:tenant_id || '/' || owner.key || '/'
                                           || '${vector_name}'
                                           || CASE WHEN kind.name = '' THEN ''
                                                   ELSE '/' || kind.name END), 24)
             LIMIT 1))"""
"""The vector indexes of the owners' own (`${owner_keys}`) on the column searched, as
`kind:owner key` (see `service.memories.owner_indexes`: one per kind of memory, found by its
name, made from the owner and the kind; the empty kind is an index over all of them). Each name
is looked up by pg_class's index on names, one look-up per owner and kind (a subquery with a
LIMIT is run as it stands): a join with pg_class, or an EXISTS, was planned generically as a
scan of all of pg_class. (Not by to_regclass: the name is the coordinator's
on Citus, whose search path need not hold the shell table's schema.)"""

SEARCHED_OWNER_KEYS_SQL = "ARRAY[CAST(:user_key AS text), ${org_key}]"
"""The owners a search may read: its user (`:user_key`, NULL for a search of the organization
alone) and the organization. Both are asked about whatever the search's scopes, so the question
has one text and one plan. With the owners bound as an array, the server planned the question
anew for every search (~0.2 ms, more than the question itself): its generic plan prices a bound
array at ten elements, a custom plan at the two it holds, so the generic one never won."""

OWNER_DOCUMENTS_SQL = """SELECT s.owner_key, s.documents
  FROM memory_owner_stats s
 WHERE s.tenant_id = :tenant_id AND s.owner_key = ANY(${owner_keys})"""
"""How many memories each owner holds, as their statistics last counted them (an owner without
a row has too few to be counted, or was not counted yet)."""

OWNERS_SEARCHED_SQL = """
SELECT ${plan_settings}
       ARRAY(SELECT ROW(d.owner_key, d.documents) FROM (${owner_documents}) AS d) AS documents,
       ${owner_indexes} AS owner_indexes"""
"""What a search asks about its owners before its statement, whose text and plan depend on it
(see `PlannedSearch`): how many memories each holds (`OWNER_DOCUMENTS_SQL`, as `(key,
documents)` records) and the vector indexes of their own (`OWNER_INDEXES_SQL`). With
`${plan_settings}` it also sets the statement's planner settings (`set_config(…, true)`, which
is `SET LOCAL`), in the round trip the setting took on its own. Asked for every search, it is
never out of date: an owner that grew past the thresholds, or whose index was built a moment
ago, is searched as it now is.

Where the server distributes queries (Citus) it is not one query: the owners' counts are a
distributed table's rows, sent to the tenant's shard (`OWNER_DOCUMENTS_SQL`), and the indexes
are the coordinator's catalog (`OWNER_INDEXES_OF_SQL`), which it answers itself."""

OWNER_INDEXES_OF_SQL = "SELECT ${owner_indexes} AS owner_indexes"
"""`OWNER_INDEXES_SQL` on its own, for a server that distributes queries (see
`OWNERS_SEARCHED_SQL`): a read of the coordinator's catalog alone, which it answers itself."""

BOUNDED_MATCHES_SQL = """
-- The memories each question lexeme weighs most in, per owner: the first
-- :postings_per_lexeme postings of the lexeme in impact order, one index range each. A memory
-- that holds one of the question's lexemes and sits below the top of its list cannot outscore
-- the memories above it by its lexical side; one that holds two or more can, however far down
-- each list it sits (a longer memory naming both words), so the same ranges are read on, to
-- :postings_scanned entries (the index alone, no row), for the memories found in two of them.
-- That takes two lists cut at the top: a list no longer than the top is read whole, so every
-- memory in it is a candidate already, and with at most one list cut the ranges stop at the
-- top. The lengths are the section's, over its owners, so a list counted as whole is whole for
-- each owner; a rare lexeme is counted at search time up to :live_count_cap, so one that grew
-- past that since the owners' statistics were counted may be taken as whole (the drift the
-- statistics allow their weights too). A question made only of common lexemes (below) reads
-- each of their ranges on.
-- A range holds the memories of the kinds its sections search (`${posting_kinds}`, a
-- condition on the posting's kind, which the index includes): the top of a lexeme's list for
-- a search of facts is its first facts, however many episodes weigh more.
-- Those of these candidates whose score can reach a section's pool (the bound below) are
-- scored, exactly, from their tsvectors (one row per question lexeme a candidate holds, as
-- `LEXICAL_MATCHES_SQL` gives them); the rest are never read.
-- A lexeme in more than :common_lexeme_share of the section's memories ("user", in a write
-- path's facts) brings no candidates of its own: its inverse document frequency is so low
-- (under ln 2) that a memory holding it and none of the question's other lexemes cannot
-- outscore one that holds them; it still counts in the score of every candidate that holds
-- it. A question made only of such lexemes (and of lexemes no memory holds) reads them all.
-- Sections of the same owners (a context's facts and episodes) read the postings once, with
-- the first one's statistics (the owners', the same for each), and each candidate goes to
-- the section whose filter it passes. Sections that search kinds of their own each read
-- ranges of their kinds (`part`: the section's place among them), and each prunes by its own
-- pool among its kinds' candidates; otherwise they read one range per lexeme and owner.
SELECT m.id, ${section} AS section, term.lexeme, cardinality(term.positions) AS tf,
       m.tsv_length AS length
  FROM (WITH scale AS (
        -- A memory's BM25 weight for a lexeme is its impact's formula at the owners' mean
        -- length instead of the impact's fixed one (`k` is their ratio, fixed / mean). A
        -- posting read holds the lexeme's frequency in its memory and the memory's length, so
        -- the weight is known exactly; for a memory below a range, only its impact's bound is:
        -- the weight lies between its values at the least term frequency the impact allows
        -- and at an unbounded one, whatever the memory's length (`WEIGHT_BOUND_SQL`).
        SELECT ${impact_mean_length} / nullif(o.mean_length, 0) AS k, o.mean_length
          FROM owner_stats o
         WHERE o.section = ${reading_section}
       ),
       reading AS (
        -- Each question lexeme's range for each owner and part: its weight (as `term_weights`
        -- gives it), how far it is read (`depth`: to the top, or on past it only when two or
        -- more of the lists read are cut there, see above; not at all for a lexeme that
        -- brings no candidates), and the most it can weigh in a memory of the part's kinds
        -- the range leaves out (`beyond`: the impact right after the range, at the lexeme's
        -- weight).
        SELECT r.key, r.part, r.lexeme, r.depth, r.idf, ${beyond} AS beyond
          FROM scale s
         CROSS JOIN (SELECT owner.key, part.n AS part, d.lexeme,
                       CASE WHEN d.lexeme = ANY(seeding.lexemes) THEN seeding.depth ELSE 0
                       END AS depth,
                       ${bounded_idf} AS idf
                  FROM owner_stats o
                 CROSS JOIN LATERAL (
                       -- The lexemes whose postings bring candidates (all of them when none
                       -- does).
                       SELECT coalesce(nullif(array_agg(d.lexeme) FILTER (WHERE d.seeds), '{}'),
                                       array_agg(d.lexeme)) AS lexemes,
                              CASE WHEN count(*) FILTER (
                                            WHERE d.seeds
                                              AND d.documents > :postings_per_lexeme) >= 2
                                     OR NOT bool_or(d.seeds)
                                   THEN :postings_scanned ELSE :postings_per_lexeme
                              END AS depth
                         FROM (SELECT l.lexeme, l.documents, ${seeds} AS seeds
                                 FROM lexeme_documents l
                                WHERE l.section = o.section) AS d
                 ) AS seeding
                  JOIN lexeme_documents d ON d.section = o.section
                 CROSS JOIN LATERAL unnest(o.owner_keys) AS owner(key)
                 CROSS JOIN ${parts} AS part(n)
                 WHERE :use_lexical AND o.section = ${reading_section}${read_postings}) AS r
          -- The posting right after the range: the highest impact of the lexeme in the
          -- owner's memories of the range's kinds that the range leaves out.
          LEFT JOIN LATERAL (SELECT p.impact FROM memory_posting p
                              WHERE p.tenant_id = :tenant_id AND p.owner_key = r.key
                                AND p.lexeme = r.lexeme AND ${posting_kinds}
                              ORDER BY p.impact DESC
                             OFFSET r.depth LIMIT 1) AS past ON true
       ),
       found AS (
        -- A memory's kind is the same in each of its postings, and puts it in one part. It is
        -- read (`${posting_kind}`) for a read that several sections share, which measure each
        -- candidate by the sections its kind may be in; a read of one section needs none.
        -- Its score over the lexemes it was found under is exact (`${found_weight}`: from the
        -- posting's frequency and length), computed once for both of its bounds. `cut_found`
        -- counts those of them whose list goes on past the range read (`beyond` above 0).
        SELECT top.memory_id, r.key, any_value(r.part) AS part, any_value(top.kind) AS kind,
               min(top.place) AS best_place, count(*) AS lexemes, sum(top.impact) AS impact,
               sum(r.idf * ${found_weight}) AS found_score, sum(r.beyond) AS beyond_found,
               count(*) FILTER (WHERE r.beyond > 0) AS cut_found
          FROM scale s
         CROSS JOIN reading r
         CROSS JOIN LATERAL (
               SELECT p.memory_id, ${posting_kind} AS kind, p.impact, p.frequency, p.length,
                      row_number() OVER (ORDER BY p.impact DESC) AS place
                 FROM memory_posting p
                WHERE p.tenant_id = :tenant_id AND p.owner_key = r.key
                  AND p.lexeme = r.lexeme AND ${posting_kinds}
                ORDER BY p.impact DESC
                LIMIT r.depth
         ) AS top
         WHERE r.depth > 0
         GROUP BY top.memory_id, r.key
       ),
       candidate AS (
        -- Each candidate's lexical score lies between `at_least` (the lexemes it was found
        -- under) and `at_most` (those, and the most each other question lexeme can add:
        -- `beyond`, for a lexeme not read its first posting's); the found score is widened by
        -- a millionth either way for the float arithmetic's last bits.
        -- A candidate found under every lexeme whose list goes on past its range (`exact`:
        -- no other lexeme can add to it) has its score itself, `tied`, rounded as the ranking
        -- rounds it (`${found_tied}`): candidates of equal scores are ranked by their keys, so
        -- of two such candidates with the same score, the one of the greater key ranks below.
        SELECT c.memory_id, c.kind,
               CASE WHEN e.exact THEN e.tied ELSE coalesce((1 - 1e-6) * c.found_score, 0)
               END AS at_least,
               coalesce((1 + 1e-6) * c.found_score + u.beyond - c.beyond_found, 'Infinity')
                   AS at_most,
               e.exact, e.tied
          FROM (SELECT memory_id, key, part, kind, found_score, beyond_found, cut_found
                  FROM found
                 WHERE best_place <= :postings_per_lexeme
                UNION ALL
                -- The memories found in two or more ranges, by their summed impact: at most
                -- twice the sections' pool of them are read in each part, however often the
                -- question's words go together (a top-N of those alone, not a sort of every
                -- memory found), but for those at the top of a range, taken above already.
                SELECT shared.memory_id, shared.key, shared.part, shared.kind,
                       shared.found_score, shared.beyond_found, shared.cut_found
                  FROM ${parts} AS part(n)
                 CROSS JOIN LATERAL (
                       SELECT memory_id, key, part, kind, best_place, found_score, beyond_found,
                              cut_found
                         FROM found
                        WHERE part = part.n AND lexemes >= 2
                        ORDER BY impact DESC, memory_id
                        LIMIT ${shared_candidates}) AS shared
                 WHERE shared.best_place > :postings_per_lexeme) AS c
          JOIN (SELECT key, part, sum(beyond) AS beyond,
                       count(*) FILTER (WHERE beyond > 0) AS cut
                  FROM reading GROUP BY key, part) AS u
         USING (key, part)
         CROSS JOIN LATERAL (SELECT c.cut_found = u.cut AS exact, ${found_tied} AS tied) AS e
       ),${pool_reached}
        -- A candidate whose score cannot reach the pool's lowest is not read: the pool-th
        -- candidate that passes a section's filter, in the order of `at_least` (read in that
        -- order, only until the pool is full), has a score the section's pool reaches. A
        -- candidate is measured against the sections its kind may belong to (the posting's
        -- kind, known without its row): each section's pool is found among its own kinds'
        -- candidates (`KEPT_SQL`).
        SELECT k.memory_id FROM candidate k WHERE ${kept}) AS candidate
 -- Each candidate's row by its key (`MEMORY_BY_KEY_SQL`), its filter tested after.
 CROSS JOIN LATERAL ${candidate_row}
 CROSS JOIN query_terms q
 CROSS JOIN LATERAL unnest(ts_filter(setweight(m.tsv, 'A', q.lexemes), '{a}')) AS term
 WHERE ${candidate_filter}
"""
"""The lexical candidates of the bounded sections of one set of owners (`bounded_matches` of
`HYBRID_SEARCH_SQL`): the top postings of the question's lexemes (of the kinds the sections
search), and the memories found under two or more of them further down, that pass a section's
filter and can reach its pool (`${kept}`: the pool of any section its kind may be in, each
section's found by `POOL_REACHED_SQL`, `${pool_reached}`)."""

SEEDS_SQL = """${documents} > 0
                AND ${documents} <= :common_lexeme_share * ${owner_documents}::float8"""
"""Whether a question lexeme held by `${documents}` of a bounded section's memories brings
candidates of its own (`BOUNDED_MATCHES_SQL`, `EXACT_WHEN_FEW_SQL`): not when it is in more than
:common_lexeme_share of its owners' memories (`${owner_documents}`), nor when it is in none. A
lexeme no memory holds would bring no candidate, and taken as the one that brings them it left
the question's common lexemes ("user", "like") unread: the search found nothing where the exact
path ranks every memory that holds them."""

WEIGHT_BOUND_SQL = """
${saturation} / ${pick}(1 + s.k * (${saturation} / ${impact} - 1),
                        1 + s.k * (${saturation} / ${impact} - 1)
                        + (1 - s.k) * least(${shortest_share}, ${saturation} / ${impact} - 1))
"""
"""The least (`pick` greatest) or the most (`pick` least) BM25 weight at the owners' mean length
that a lexeme with this `impact` can have in a memory (`service.memories.bm25`: `saturation`
is k1 + 1, `shortest_share` k1 (1 - b)). With a = (k1 + 1) / impact, the impact's formula gives
the memory's length from its term frequency tf, and the weight is then (k1 + 1) / (1 + k (a - 1)
+ (1 - k) k1 (1 - b) / tf): monotonic in tf, so its bounds are at tf's least (1, or where the
length would be 0: k1 (1 - b) / tf = a - 1, the weight then the impact itself) and at tf without
bound. `s.k` is `scale`'s."""

MEMORY_BY_KEY_SQL = """(SELECT * FROM memory ${row}
                      WHERE ${row}.tenant_id = :tenant_id AND ${row}.id = ${key}
                      LIMIT 1) AS ${row}"""
"""A memory's row (as `${row}`) by its key alone, for each row of the query it is joined to: a
candidate (its filter tested on it outside), a neighbour, a hit. A subquery with a LIMIT is
planned as is, one look-up of the table's key per row:
- never a merge join with the tenant's memories in key order: a plan made once for every
  tenant knows a tenant only as the table's average one, a few hundred memories among a
  thousand tenants, and reading them in order looks cheaper than a look-up per candidate; a
  tenant of 100,000 memories was then read whole, for each of a context's joins (5.2 million
  buffers for a context of the 100k owner, 1.0 million with look-ups);
- never merged into a scan of the owner's rows, whatever the planner guesses of how many
  candidates there are;
- never a look-up through an index partial to the filter's owner (the organization's, newest
  first), which it could skip through to the key reading every entry of a large organization."""

POOL_REACHED_SQL = """
pool_reached_${index} AS MATERIALIZED (
    SELECT c.at_least, c.memory_id, c.exact, c.tied
      FROM (SELECT memory_id, at_least, exact, tied FROM candidate
             WHERE ${of_kinds}
             ORDER BY at_least DESC, memory_id
             LIMIT ${most_read}) AS c
     -- The row by its key (`MEMORY_BY_KEY_SQL`), then the filter.
     CROSS JOIN LATERAL (SELECT FROM ${candidate_row} WHERE ${candidate_filter}) AS passing
     WHERE (SELECT count(*) FROM candidate WHERE ${of_kinds}) > ${pruned_from}
     ORDER BY c.at_least DESC, c.memory_id
    OFFSET ${pool} - 1 LIMIT 1
)"""
"""The candidate a section's pool reaches among a bounded read's candidates of its kinds
(`${of_kinds}`, a condition on a candidate's `kind`): the pool-th of those that pass its filter
in the order of `at_least`, among the `${most_read}` first; none when fewer pass, or when
those candidates are no more than `${pruned_from}` (a CTE `pool_reached_${index}` of the
bounded read, read by `KEPT_SQL`)."""

KEPT_SQL = """CASE WHEN k.exact AND coalesce((SELECT exact FROM pool_reached_${index}), false)
     THEN ROW(k.tied, (SELECT memory_id FROM pool_reached_${index}))
          >= ROW((SELECT tied FROM pool_reached_${index}), k.memory_id)
     ELSE k.at_most >= coalesce((SELECT at_least FROM pool_reached_${index}), 0) END"""
"""Whether a candidate `k` of a section's kinds may reach its pool, against the candidate the
pool reaches (`POOL_REACHED_SQL`; every candidate may when the section prunes none): its most is
at least that candidate's `at_least`, which no pool member's score lies below; or, when both
scores are exact, it ranks at or above that candidate, by score and then by key, as the ranking
orders equal scores (a score rounded as the ranking rounds it: two memories whose sums differ
in their last bits only are equal to it too). Candidates of one score are then read only as
far as the pool takes them: of a thousand memories that say "User likes …" in as many words,
the pool's hundred, not the thousand."""

NEAREST_SQL = """
SELECT m.id, ${section} AS section, ${vector} <=> ${question_vector} AS distance
  FROM memory m
 WHERE :use_vector AND ${vector} IS NOT NULL
   AND ${candidate_filter}
 ORDER BY ${order}
 LIMIT ${pool}
"""
"""One owner's vector candidates in one section: HNSW with pgvector's iterative scan
(hnsw.iterative_scan, set per connection), so a scan filtered to one user keeps going until it
has found the pool's rows that pass the filter.

Each section's candidates come from a scan of its own (the fragments joined by UNION ALL): one
scan under the sections' filters OR'ed would leave the planner only their common conditions for
an index, and under one LIMIT a section with near vectors would crowd the others out.

Within a section, each owner (the user, the organization) is scanned on its own
(`${candidate_filter}` is then the section's filter for that owner alone), and the section
keeps the nearest of their candidates (`NEAREST_OF_OWNERS_SQL`). A large owner has a vector
index of its own, partial to its memories (`service.memories.owner_indexes`): the planner can
use it only for a scan whose conditions imply the index's, which is one owner's."""

INDEX_ORDER_SQL = "${vector} <=> ${question_vector}"
"""The order of `NEAREST_SQL` an HNSW index serves: a plan made for a large owner reads its
nearest from its own index."""

EXACT_ORDER_SQL = "(${vector} <=> ${question_vector}) + 0"
"""The same order as an expression no index is built on, so the planner sorts by the exact
distance: the order of every owner not written in with indexes of its own, which the generic
plan serves. The memory table has no HNSW index of its own, so nothing else could serve it; the
explicit sort keeps it so should one be built by hand, whose walk filtered to a small owner
would visit most of the graph to find a pool of its vectors, with an approximate answer."""

FEW_PASSING_SQL = """
few_passing AS MATERIALIZED (
    ${passing}
),"""
"""For each filtered walk (`COUNT_PASSING_SQL` each, numbered), whether few memories pass its
filter.

A walk of a vector index under a filter that few of the walked memories pass (a category, a
month, a lifecycle) visits about `pool` / share memories to find `pool` that pass it, up to
`hnsw.max_scan_tuples` when almost none do: its cost then grows with the owner, not with what
is found. When few pass, the scan sorts exactly those (`FEW_PASSED_SQL`); when more pass, the
walk finds them in fewer steps the more there are (`FILTERED_WALK_SQL`). Few is the geometric
mean of the pool and the owner's memories (sqrt(pool * memories), at least the pool): an exact
sort costs about a row's read for each memory that passes, a walk about a graph step for each
memory it visits, pool / share of them; the two meet near that count, so a filtered search
reads about sqrt(pool * memories) rows at most either way, where a walk alone went up to
`hnsw.max_scan_tuples`."""

COUNT_PASSING_SQL = """
SELECT ${scan} AS scan, ${passing} <= ${few} AS few"""
"""Whether at most few memories pass one scan's filter (see `FEW_PASSING_SQL`; `${passing}` is
its `PASSING_SQL` under `:use_vector`), counted in a B-tree index (ix_memory_lexical: the owner,
kind, lifecycle, category and time as its keys, the rest of what a filter tests included, so
the count reads no row). A lexical search counts nothing (its vector scans do not run either
way)."""

FEW_SQL = """(SELECT greatest(${pool}, sqrt(${pool} * coalesce(
                 (SELECT o.documents FROM owner_stats o WHERE o.section = ${section}), 0)))::int)"""
"""How many memories passing a filter make few for a section's scans (`FEW_PASSING_SQL`). An
owner without statistics (`owner_stats`) counts as none: few is the pool."""

FEW_PASSED_SQL = """m.tenant_id = :tenant_id
    AND m.id IN (SELECT m.id FROM memory m WHERE ${candidate_filter})
    AND (SELECT few FROM few_passing WHERE scan = ${scan})"""
"""The exact sort's memories of one scan, when few pass its filter: their ids found by the
filter again (where the planner takes it, the count's index-only scan), their rows by the
table's key. An uncorrelated subquery decides whether it runs. The `m` inside the `IN` is the
subquery's own row (the filter is written for that alias), not the outer one."""

SEARCHED_EXACTLY_SQL = "NOT EXISTS (SELECT 1 FROM owner_stats WHERE section = ${section})"
"""Whether a section's lexical side tests every memory its filter passes (`LEXICAL_MATCHES_SQL`,
its statistics `COLLECTION_SQL`): when its owners are too small to be bounded."""

LEXICAL_EXACT_SQL = """
lexical_exact AS MATERIALIZED (
    ${sections}
),"""
"""The bounded sections whose lexical side is searched exactly: each whose filter passes only part
of a kind (a category, a time window, a lifecycle) when few of its memories pass it and a
question lexeme's list is cut (`EXACT_WHEN_FEW_SQL` each, joined by UNION ALL).

The bounded read takes the top of each question lexeme's postings among the section's kinds,
and tests the rest of the filter on the rows it reads. When the memories that pass are a small
part of the owner's, the top of a list may hold few of them or none, however many further down
match the question: an owner's proposed facts, or those of one category or one month, would be
missed by a lexical search for them whenever the owner's other memories weigh more for its
words. Few is `FEW_SQL`'s count, as for the vector side: testing that many memories costs about
what the bounded read does. When more pass, they are about as common at the top of a list as
in the owner's memories, and the read finds its pool among them; when no list is cut, the read
holds every memory of the lists, and finds them all."""

EXACT_WHEN_FEW_SQL = """
SELECT ${section} AS section
 WHERE EXISTS (SELECT 1 FROM lexeme_documents d JOIN owner_stats o USING (section)
                WHERE d.section = ${section} AND d.documents > :postings_per_lexeme
                  AND ${seeds})
   AND ${passing} <= ${few}"""
"""Section `${section}` when a list of a lexeme that brings candidates is cut (more memories
hold it than `:postings_per_lexeme`; over the section's kinds it may be fewer, so this may take
a section exactly that needed not be) and at most few memories pass its filter: `${passing}` is
the sum of `PASSING_SQL` over its owners, counted only when a list is cut."""

PASSING_SQL = """(SELECT count(*)
                  FROM (SELECT FROM memory m WHERE ${side} AND ${candidate_filter}
                         LIMIT ${few} + 1) AS passing)"""
"""How many memories pass one filter, counted up to one more than few in a B-tree index
(reading no row), when the search's `${side}` (`:use_vector` or `:use_lexical`) runs. The
lexical side counts one owner at a time: the owners of a section OR'ed under one LIMIT would be
read as a bitmap of all their entries first."""

SEARCHED_FEW_SQL = """(NOT EXISTS (SELECT 1 FROM owner_stats WHERE section = ${section})
        OR EXISTS (SELECT 1 FROM lexical_exact WHERE section = ${section}))"""
"""`SEARCHED_EXACTLY_SQL` for a section that `LEXICAL_EXACT_SQL` may take: also when it does."""

PASSED_BY_KEY_SQL = """m.tenant_id = :tenant_id
   AND m.id IN (${passing_ids})"""
"""The memories `m` of a section `LEXICAL_EXACT_SQL` takes, for its exact lexical side: their
ids found by each owner's filter (`${passing_ids}`, one `SELECT m.id` per owner joined by UNION
ALL: each a scan of the count's index, with the filter's time window, category and lifecycle as
its conditions), their rows by the table's key. Written as the section's filter itself (the
owners OR'ed), the plan read every memory of the owner through a bitmap of its entries, and
tested the rest of the filter on each row: 11.8 ms for the 144 of 10,000 that a month passes."""

READ_POSTINGS_SQL = "NOT EXISTS (SELECT 1 FROM lexical_exact e WHERE e.section = o.section)"
"""Whether a bounded section `o` (a row of `owner_stats`) reads its postings: not when its lexical
side is searched exactly (`LEXICAL_EXACT_SQL`); its statistics and lexeme weights then stay out
of `collection` and `term_weights`, and no range is read for it."""

MANY_PASSED_SQL = "NOT (SELECT few FROM few_passing WHERE scan = ${scan})"
"""Whether the walk of one scan runs: when more memories than few pass its filter. An
uncorrelated subquery: run once, it switches the walk on or off."""

FILTERED_WALK_SQL = """
SELECT m.id, ${section} AS section, m.distance
  FROM (SELECT m.id, m.tenant_id, m.scope, m.user_id, m.kind, m.category, m.lifecycle,
               m.expires_at, m.created_at, m.happened_at,
               ${vector} <=> ${question_vector} AS distance
          FROM memory m
         WHERE :use_vector AND ${vector} IS NOT NULL
           AND ${graph_filter}
         ORDER BY ${order}
         LIMIT :walk_scanned) AS m
 WHERE ${candidate_filter}
 ORDER BY m.distance
 LIMIT ${pool}
"""
"""One owner's vector candidates in one section, walked in its own index, for a filter that
passes only part of a kind, when many memories pass it (`FEW_PASSING_SQL`): the walk reads the
memories of the owner and kind (`${graph_filter}`, what its index holds), the rest of the
filter (`${candidate_filter}`) is tested on what the walk returns, and the walk goes on
(pgvector's iterative scan) until `${pool}` have passed. The inner query returns every column
a `MemoryFilter` tests, for the outer one to test them. It is planned apart (its
LIMIT keeps it a subquery) and does not see the rest of the filter: estimating a category or a
window as a few rows, the planner would sort every memory that passes instead of walking (its
estimate does not know the count that chose the walk). Its LIMIT is bound
(`hnsw.max_scan_tuples`, where the iterative scan stops anyway): unknown to a generic plan,
which then expects to read a part of the rows and walks. The walk returns its memories nearest
first, in the order the outer query asks: the planner knows it, sorts nothing (a sort would wait
for the whole walk), and a section of several scans merges them, reading from each walk only as
far as the section's pool needs."""

NEAREST_OF_OWNERS_SQL = """
SELECT id, section, distance FROM (${owners}) AS of_owners ORDER BY distance LIMIT ${pool}
"""
"""A section's vector candidates from its owners' scans (`NEAREST_SQL` each, joined by UNION
ALL): the nearest `pool` of them, as one scan over the section would give them."""

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
