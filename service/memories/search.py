"""Hybrid search: one fusion statement (lexical + vector, every component score), then MMR."""

from __future__ import annotations

import asyncio
import re
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from opentelemetry import trace

from service.auth.owner import Owner
from service.config import Settings
from service.errors import invalid_inputs
from service.kit.admission import outside_the_gate
from service.memories.dates import query_named_time
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository, SearchParams, SearchRow
from service.memories.models import normalise_text
from service.memories.schemas import ComponentScores, SearchHit, SearchRequest, SearchResponse
from service.memories.telemetry import (
    MEMORY_METRICS,
    fusion_statement,
    record_search_hits,
    search_stage,
)
from service.memories.vector_columns import ModelVector, VectorColumn, VectorColumns
from service.observability import traced, tracer
from service.providers import (
    Embedder,
    EmbedderUnavailable,
    computes_in_process,
    embedder_config_from_settings,
)
from service.providers.reranker import Reranker, RerankerUnavailable

# MMR weighs three candidates per hit it returns, a repeat of a candidate before it taking no
# place (`mmr_candidates`): a context section picks 4, and its 12 best candidates can all be
# one event written down on many days, which would leave it nothing else to pick. It reads at
# least 30 to find them.
MMR_CANDIDATE_FACTOR = 3
MMR_MIN_CANDIDATES = 30
# Numbers, as an episode repeating another differs from it: its date, a time, an amount.
_NUMBERS = re.compile(r"\d+")
# The linear fusion's weight of BM25 when neither the settings nor the embedding profile set it.
DEFAULT_LEXICAL_WEIGHT = 0.5


def lexical_weight_for(settings: Settings, model_weight: float | None) -> float:
    """The linear fusion's weight of BM25 when a request names none, in a search that compares
    the vectors of a model whose profile carries `model_weight` (a stronger model earns a
    larger share): the settings', else the model's, else `DEFAULT_LEXICAL_WEIGHT`."""
    if settings.search_linear_lexical_weight is not None:
        return settings.search_linear_lexical_weight
    return DEFAULT_LEXICAL_WEIGHT if model_weight is None else model_weight


def linear_lexical_weight(settings: Settings) -> float:
    """`lexical_weight_for` the configured model (`MNEME_EMBEDDING_*`): the weight of a search
    of a column that holds its vectors, as a report of the settings names it. A search takes
    the weight of the model of the column it reads (`MemorySearch.params`), which during a
    change of model, or in a process configured with another model, may be another's.

    The profile is resolved once per settings object."""
    if settings.search_linear_lexical_weight is not None:
        return settings.search_linear_lexical_weight
    known = _profile_weights.get(id(settings))
    if known is None or known[0]() is not settings:
        weight = embedder_config_from_settings(settings).resolved_profile().lexical_weight
        known = (weakref.ref(settings), lexical_weight_for(settings, weight))
        _profile_weights[id(settings)] = known
    return known[1]


# By the settings object's id, with a reference that tells a reused id from the object itself
# (settings are not hashable).
_profile_weights: dict[int, tuple[weakref.ref[Settings], float]] = {}


async def embed_question(embedder: Embedder | None, query: str) -> list[float] | None:
    """The query's vector, named by its model (`ModelVector`), or None when there is no
    embedder or it is down (search goes lexical)."""
    if embedder is None:
        return None
    with tracer.start_as_current_span("memories.embed_query"):
        try:
            return ModelVector(await embedder.embed_query(query), embedder.model_name)
        except EmbedderUnavailable:
            return None


EndTransaction = Callable[[], Awaitable[None]]
"""Ends the caller's transaction: its database work is done (`Services.end_transaction`)."""

PendingVector = asyncio.Future[list[float] | None]
"""A question's vector on its way (None when the embedder is down)."""


@asynccontextmanager
async def embedding_underway(
    pending: PendingVector | None, *, in_process: bool
) -> AsyncIterator[PendingVector | None]:
    """`pending` (a question on its way to an embedder) for the block, once its embedding has
    started (`in_process`: the embedder computes in this process, `computes_in_process`), or
    once it is done when the embedder calls a remote service; if nobody took its vector by the
    end (the request failed first), it is cancelled.

    The block is where the request's transaction begins. A model computing in this process
    embeds while BEGIN goes to the database. A hosted model's round trip (tenths of a second,
    up to its timeout when it is slow) is waited for here instead: inside the transaction it
    would hold a pooled connection idle, and a slow provider would leave the process none
    for any request, the ones that embed nothing included."""
    try:
        if pending is not None:
            if in_process:
                # One turn of the event loop lets the embedding task take its first step,
                # which hands the question to the model, before this task goes on into the
                # transaction set-up (otherwise it would wait until this task next awaits).
                await asyncio.sleep(0)
            else:
                # Its outcome (a failure too) is the block's to take from `pending`. No work
                # of the process's: the request's place in the admission gate is free meanwhile.
                async with outside_the_gate():
                    await asyncio.wait([pending])
        yield pending
    finally:
        if pending is not None and not pending.done():
            pending.cancel()


@asynccontextmanager
async def question_on_its_way(
    vector_columns: VectorColumns, tenant_id: str, question: str | None
) -> AsyncIterator[PendingVector | None]:
    """`question`'s vector by the model `tenant_id`'s searches read, on its way for the block
    in which a request's transaction begins (`embedding_underway`); await it for `search`
    or `ContextBuilder.build`. None when there is nothing to embed (`question` None) or no
    embedder of that model."""
    embedder = vector_columns.question_embedder(tenant_id)
    if question is None or embedder is None:
        yield None
        return
    pending = asyncio.ensure_future(embed_question(embedder, question))
    async with embedding_underway(pending, in_process=computes_in_process(embedder)) as underway:
        yield underway


def searched_question(request: SearchRequest) -> str | None:
    """The question a search embeds (None: a lexical search needs no vector)."""
    return None if request.mode == "lexical" else request.query


def searched_owners(owner: Owner, scopes: Sequence[str]) -> list[Owner]:
    """The owners a search by `owner` over `scopes` reads: the user's memories (`user`), the
    organization's (`org`)."""
    return [owner if scope == "user" else Owner.org() for scope in scopes]


@dataclass(frozen=True, slots=True)
class Spare:
    """A candidate a search read but did not return, which a caller that cannot show every hit
    may show in place of one (`SectionHits.spares`): what it says, and why it ranked built
    only for the spares the caller shows. Its memory is never validated (`SearchRow.memory`,
    ~20 µs a row): a caller shows its text."""

    row: SearchRow
    rerank_score: float | None = None

    @property
    def id(self) -> uuid.UUID:
        return self.row.id

    @property
    def kind(self) -> str:
        kind: str = self.row.record["kind"]
        return kind

    @property
    def text(self) -> str:
        text: str = self.row.record["text"]
        return text

    @property
    def scores(self) -> ComponentScores:
        return self.row.scores.model_copy(update={"rerank_score": self.rerank_score})


@dataclass(frozen=True, slots=True)
class SectionHits:
    """One request's hits of `MemorySearch.search_sections`, as `search` would return them,
    and its spares: the other candidates the statement read for it, in its ranked order,
    without a repeat of a hit or of a spare before them when MMR leaves repeats for last
    (`_spares`)."""

    hits: list[SearchHit]
    spares: list[Spare]


class MemorySearch:
    def __init__(
        self,
        fusion: FusionRepository,
        vector_columns: VectorColumns,
        tenant_id: str,
        settings: Settings,
        reranker: Reranker | None = None,
        end_transaction: EndTransaction | None = None,
    ) -> None:
        """`end_transaction` ends the transaction the search runs in (`last_database_work`)."""
        self._fusion = fusion
        self._end_transaction = end_transaction
        self._vector_columns = vector_columns
        self._tenant_id = tenant_id
        self._settings = settings
        self._reranker = reranker

    async def embed_query(self, query: str) -> list[float] | None:
        """The query's vector by the model of the column the tenant reads, or None when the
        embedder is down (search goes lexical)."""
        return await embed_question(self._vector_columns.question_embedder(self._tenant_id), query)

    def vector_column(self, query_embedding: list[float] | None) -> VectorColumn | None:
        """The column a search compares `query_embedding` with: the one holding its model's
        vectors (None: no column does), else the column the tenant reads."""
        if query_embedding is None:
            return self._vector_columns.read_by(self._tenant_id)
        return self._vector_columns.column_for(query_embedding, self._tenant_id)

    def _ranked(self, request: SearchRequest) -> int:
        """How many hits the search without MMR ranks for `request`: its limit, and every
        candidate the reranker scores, since it may lift any of them into the hits."""
        if self._reranker is None:
            return request.limit
        return max(request.limit, self._settings.rerank_top_n)

    def mmr_depth(self, request: SearchRequest) -> int:
        """How many candidates MMR weighs for `request`, a repeat taking no place
        (`mmr_candidates`): three per hit (at most 300), and every one the search ranks."""
        return max(min(request.limit * MMR_CANDIDATE_FACTOR, 300), self._ranked(request))

    def params(
        self,
        owner: Owner,
        request: SearchRequest,
        query_embedding: list[float] | None,
        *,
        not_only_of_messages: Collection[uuid.UUID] | None = None,
    ) -> SearchParams:
        """The fusion statement's parameters for `request` over `owner`'s memories (and the
        organization's, when the request's scopes include `org`); not returning the memories
        drawn from `not_only_of_messages` alone (`SearchParams.not_only_of_messages`)."""
        settings = self._settings
        column = self.vector_column(query_embedding)
        if column is None:
            query_embedding = None
        searched = column or self._vector_columns.live()
        use_vector = request.mode != "lexical" and query_embedding is not None
        use_lexical = request.mode != "vector" or query_embedding is None
        # MMR weighs each hit's final score against its cosine to the hits picked before it:
        # the hits' stored vectors, which a search without a question vector has too.
        with_mmr = request.mmr_lambda is not None
        ranked = self._ranked(request)
        # MMR reads deeper than the hits it returns, in the order the search without MMR
        # ranks them: the pools follow the hits that search returns (`ranked`), not the depth
        # MMR reads, for a larger pool would rank differently (other candidates lend their
        # evidence to their neighbours and sessions), and `mmr_lambda` 1 would not be that
        # search's order. It reads at least `MMR_MIN_CANDIDATES`, for the candidates it weighs
        # past repeats (`mmr_candidates`).
        depth = max(self.mmr_depth(request), MMR_MIN_CANDIDATES)
        fetch = max(min(depth, 300) if with_mmr else 0, ranked)
        owners = searched_owners(owner, request.scopes)
        named_time = query_named_time(request.query, datetime.now(UTC))
        window = None if named_time is None else named_time.window
        pool = max(settings.search_candidate_pool, ranked)
        fusion = request.fusion or settings.search_fusion
        # Linear fusion reads every lexical candidate's own cosine; RRF needs the vector side's
        # ranks over the whole pool, and without a lexical side the vectors are every candidate.
        vector_pool = (
            max(settings.search_vector_pool, ranked) if fusion == "linear" and use_lexical else pool
        )
        return SearchParams(
            filter=MemoryFilter.build(
                owners,
                kinds=request.kinds,
                categories=request.categories,
                lifecycles=request.lifecycles,
                event_after=request.event_after,
                event_before=request.event_before,
            ),
            # The words naming a time are not searched as words: the time is the date prior's.
            # The vector side embeds the question whole (`searched_question`).
            query=request.query if named_time is None else named_time.words_around(request.query),
            query_embedding=query_embedding,
            use_lexical=use_lexical,
            use_vector=use_vector,
            pool=pool,
            limit=fetch,
            vector_pool=vector_pool,
            fusion=fusion,
            rrf_k=request.rrf_k or settings.search_rrf_k,
            # The weight of the model whose vectors the search compares, whatever model the
            # process is configured with: replicas rank a search alike during a change.
            lexical_weight=_pick(
                request.linear_lexical_weight,
                lexical_weight_for(settings, self._vector_columns.lexical_weight(searched)),
            ),
            neighbour_weight=settings.search_neighbour_weight,
            thread_weight=settings.search_thread_weight,
            speaker_weight=settings.search_speaker_weight,
            date_weight=settings.search_date_weight,
            window_start=None if window is None else window.start,
            window_end=None if window is None else window.end,
            recency_weight=_pick(request.recency_weight, settings.search_recency_weight),
            confidence_weight=_pick(request.confidence_weight, settings.search_confidence_weight),
            half_life_semantic=settings.half_life_semantic_days,
            half_life_episodic=settings.half_life_episodic_days,
            half_life_procedural=settings.half_life_procedural_days,
            with_embeddings=with_mmr,
            bounded_from=settings.search_bounded_from,
            postings_per_lexeme=settings.search_postings_per_lexeme,
            postings_scanned=settings.search_postings_scanned,
            owner_index_ef_search=settings.owner_vector_index_ef_search,
            walk_scanned=settings.hnsw_max_scan_tuples,
            not_only_of_messages=tuple(sorted(not_only_of_messages))
            if not_only_of_messages
            else None,
            vector_column=searched,
        )

    @traced("memories.search")
    async def search(
        self,
        owner: Owner,
        request: SearchRequest,
        *,
        query_embedding: list[float] | None = None,
        embedding_question: Awaitable[list[float] | None] | None = None,
        last_database_work: bool = False,
    ) -> SearchResponse:
        """Hybrid search; pass `query_embedding` to reuse one embedding across searches, or
        `embedding_question` (`question_on_its_way`) for a vector already on its way.
        `last_database_work`: the caller reads and writes nothing after this search, so its
        transaction is ended before a hosted reranker is called (`Services.end_transaction`,
        when the search was built with it)."""
        refuse_options_of_the_other_fusion(request, self._settings.search_fusion)
        # The statement's planner setting is made while the question is embedded, if it is
        # still on its way (a question asked before has its vector at once, from the cache).
        on_its_way = (
            not embedding_question.done()
            if isinstance(embedding_question, asyncio.Future)
            else (
                embedding_question is not None
                or (request.mode != "lexical" and query_embedding is None)
            )
        )
        ahead = (
            (searched_owners(owner, request.scopes), self._vector_columns.read_by(self._tenant_id))
            if on_its_way
            else None
        )
        async with self._fusion.planned(ahead=ahead) as planned:
            if embedding_question is not None:
                query_embedding = await embedding_question
            elif request.mode != "lexical" and query_embedding is None:
                query_embedding = await self.embed_query(request.query)
            params = self.params(owner, request, query_embedding)
            with fusion_statement(request.mode) as statement:
                rows = await planned.search(params)
                statement.rows(len(rows))
        [reranked] = await self._rerank(request.query, [rows], request.mode, last_database_work)
        hits = _hits(
            request, params, _ranked_by_reranker(rows, reranked), reranked, self.mmr_depth(request)
        )
        record_search_hits(trace.get_current_span(), hits, mode=request.mode)
        return SearchResponse(
            hits=hits,
            mode=request.mode,
            fusion=params.fusion,
            query_embedded=query_embedding is not None,
        )

    @traced("memories.search_sections")
    async def search_sections(
        self,
        owner: Owner,
        requests: Sequence[SearchRequest],
        *,
        query_embedding: list[float] | None,
        not_only_of_messages: Sequence[Collection[uuid.UUID] | None] | None = None,
        shown_texts: Collection[str] | None = None,
        last_database_work: bool = False,
    ) -> list[SectionHits]:
        """Several searches with one query vector (None: lexical) in one fusion statement:
        each request's hits, as `search` would return them, and its spares (`SectionHits`);
        request `i` leaves out the memories drawn from `not_only_of_messages[i]` alone;
        `last_database_work` as for `search`.

        With `shown_texts` (texts as `normalise_text` compares them), each request also leaves
        out the memories that say what one of them says or what a hit of a request before it
        says, before MMR picks: requests in the order a block shows its sections then never
        say one thing twice, and a later one picks the memories after the copy instead.

        The spares are read by the same statement: a caller whose budget passes over a hit
        too long for it (a context block) shows the next candidates without another read.

        The requests may differ only in what they select (scopes, kinds, …) and their limit,
        and must select disjoint memories."""
        leaving_out = not_only_of_messages or [None] * len(requests)
        params = [
            self.params(owner, request, query_embedding, not_only_of_messages=messages)
            for request, messages in zip(requests, leaving_out, strict=True)
        ]
        mode = requests[0].mode
        with fusion_statement(mode) as statement:
            sections = await self._fusion.search_sections(params)
            statement.rows(sum(len(rows) for rows in sections))
        reranked = await self._rerank(requests[0].query, sections, mode, last_database_work)
        shown = None if shown_texts is None else set(shown_texts)
        hits = []
        for request, section_params, rows, section_reranked in zip(
            requests, params, sections, reranked, strict=True
        ):
            if shown is not None:
                rows = [row for row in rows if normalise_text(row.record["text"]) not in shown]
            ranked = _ranked_by_reranker(rows, section_reranked)
            found = _hits(
                request, section_params, ranked, section_reranked, self.mmr_depth(request)
            )
            spares = _spares(ranked, found, request.mmr_lambda, section_reranked)
            hits.append(SectionHits(found, spares))
            if shown is not None:
                shown.update(normalise_text(hit.memory.text) for hit in found)
        record_search_hits(
            trace.get_current_span(), [hit for each in hits for hit in each.hits], mode=mode
        )
        return hits

    async def _rerank(
        self,
        query: str,
        found: Sequence[list[SearchRow]],
        mode: str,
        last_database_work: bool,
    ) -> list[dict[uuid.UUID, float]]:
        """The reranker's score of each list's first `rerank_top_n` fused candidates, from one
        call (the lists answer one query); empty without a reranker or when it failed (the
        failure counted). After the caller's last database work, its transaction is ended
        first, and the call is waited for outside the admission gate (no work of the
        process's)."""
        if self._reranker is None:
            # Before any row's memory is read: a row's memory is validated only for the hits
            # a search keeps (`SearchRow.memory`), and a context keeps 4 of each section's 30.
            return [{} for _ in found]
        top_n = self._settings.rerank_top_n
        documents = [row.memory.text for rows in found for row in rows[:top_n]]
        if not documents:
            return [{} for _ in found]
        with search_stage("rerank", mode) as span:
            span.set_attribute("mneme.rerank.documents", len(documents))
            try:
                if not last_database_work or self._end_transaction is None:
                    scores = iter(await self._reranker.scores(query, documents))
                else:
                    await self._end_transaction()
                    async with outside_the_gate():
                        scores = iter(await self._reranker.scores(query, documents))
            except RerankerUnavailable as error:
                MEMORY_METRICS.rerank_failures.labels(error.reason).inc()
                span.set_attribute("mneme.rerank.failure", error.reason)
                return [{} for _ in found]
        return [{row.id: next(scores) for row in rows[:top_n]} for rows in found]


def refuse_options_of_the_other_fusion(request: SearchRequest, default_fusion: str) -> None:
    """`rrf_k` tunes reciprocal rank fusion and `linear_lexical_weight` linear fusion: either
    given to a search that fuses the other way (asked for, or the service's default) would
    change nothing, and is refused rather than silently ignored."""
    fusion = request.fusion or default_fusion
    errors = [
        {
            "loc": ["body", field],
            "msg": f"applies to fusion {applies_to}; this search fuses by {fusion}"
            + ("" if request.fusion else " (the service's default)"),
            "type": "value_error",
        }
        for field, applies_to, given in (
            ("rrf_k", "rrf", request.rrf_k),
            ("linear_lexical_weight", "linear", request.linear_lexical_weight),
        )
        if given is not None and fusion != applies_to
    ]
    if errors:
        raise invalid_inputs(errors)


def maximal_marginal_relevance(
    rows: list[SearchRow],
    lambda_: float,
    limit: int,
    reranked: dict[uuid.UUID, float] | None = None,
) -> tuple[list[SearchRow], dict[uuid.UUID, float]]:
    """Greedy MMR: relevance (each candidate's final score relative to the best candidate's)
    against redundancy (max cosine to picks).

    The final score is what the fusion ranked by: the lexical match, the cosine, the
    conversation's evidence, the speaker and the time the question names, recency and
    confidence. Relevance by the cosine alone would drop all but one of them, and a question
    about a day would lose the day's memory to whatever sounds most like it. Divided by the
    best candidate's score, relevance lies in [0, 1] like the cosines it is weighed against,
    so `lambda_` 1 keeps the fused order exactly, whatever the number of candidates.
    Candidates without a vector have no measurable redundancy.
    With `reranked` scores, relevance is the reranker's score scaled to [0, 1] over the scored
    candidates (the lowest 0, the highest 1), and 0 for candidates it did not score.

    Below `lambda_` 1, a repeat of a pick (`_repeat_key`: the same text, or for an episode
    the same text apart from its numbers) is picked only once no other candidate is left.
    Redundancy alone cannot keep repeats out: one event written down on many days ("On
    2026-02-19 Ada went for a run along the coast.") has copies whose cosine to each other is
    about 0.93, and whose relevance, when they share the query's words, is several times that
    of a distinct memory, so at 0.7 every copy outscores it. A threshold on the cosine cannot
    tell them apart from memories that differ in what matters: one sentence with another
    phone number, or one preference reversed, lie at 0.98-0.99 with the packaged model.
    """
    if not rows:
        return [], {}
    # The candidates' vectors as one matrix (a row without a vector holds zeros and is never
    # compared): each pick updates every candidate's redundancy at once. Comparing candidate
    # by candidate in Python grew with the square of the limit (1.2 s for a search's 300
    # candidates at limit 100). Cosines are summed row by row (`_cosines`), so two copies of
    # one vector always score alike and keep their fused order.
    has_vector = np.array([row.embedding is not None for row in rows])
    dimensions = next((len(row.embedding) for row in rows if row.embedding is not None), 0)
    vectors = np.zeros((len(rows), dimensions))
    for index, row in enumerate(rows):
        if row.embedding is not None:
            vectors[index] = row.embedding
    if reranked:
        low, high = min(reranked.values()), max(reranked.values())
        spread = high - low or 1.0
        relevance = np.array([(reranked.get(row.id, low) - low) / spread for row in rows])
    else:
        finals = np.array([row.final_score for row in rows], dtype=np.float64)
        # Final scores are never negative; when none is above 0 every candidate is equally
        # relevant, and the fused order decides.
        relevance = finals / (finals.max() or 1.0)
    # The highest cosine to a pick so far; 0 while nothing with a vector is picked, and always
    # for a candidate without a vector (it has no measurable redundancy).
    redundancy = np.zeros(len(rows))
    compared = False
    available = np.ones(len(rows), dtype=bool)
    keys = [_repeat_key(row) if lambda_ < 1 else None for row in rows]
    repeats = np.zeros(len(rows), dtype=bool)
    chosen: list[int] = []
    scores: dict[uuid.UUID, float] = {}
    while len(chosen) < min(limit, len(rows)):
        score = np.where(available, lambda_ * relevance - (1 - lambda_) * redundancy, -np.inf)
        fresh = available & ~repeats
        # The first of equal scores, as the fused order has them.
        best = int(np.argmax(np.where(fresh, score, -np.inf) if fresh.any() else score))
        chosen.append(best)
        available[best] = False
        scores[rows[best].id] = float(score[best])
        if keys[best] is not None:
            repeats |= np.array([key == keys[best] for key in keys])
        if has_vector[best]:
            similarity = np.where(has_vector, _cosines(vectors, vectors[best]), 0.0)
            redundancy = similarity if not compared else np.maximum(redundancy, similarity)
            compared = True
    return [rows[index] for index in chosen], scores


def mmr_candidates(rows: list[SearchRow], depth: int, lambda_: float) -> list[SearchRow]:
    """The candidates MMR weighs: the first `depth` of `rows`, where below `lambda_` 1 a
    repeat of a candidate before it (`_repeat_key`) takes no place, so the candidates after
    an event written down on many days are weighed too. Without repeats, the first `depth`."""
    if lambda_ >= 1:
        return rows[:depth]
    seen: set[str] = set()
    places = 0
    for index, row in enumerate(rows):
        key = _repeat_key(row)
        if key is not None and key in seen:
            continue
        if places == depth:
            return rows[:index]
        places += 1
        if key is not None:
            seen.add(key)
    return rows


def _repeat_key(row: SearchRow) -> str | None:
    """What a candidate says, as MMR tells a repeat from another memory: its text as
    `normalise_text` compares it, and for an episode with its numbers masked (the same event
    on another day). A fact's numbers are what it says (a phone number, a price), so facts
    that differ in them are different facts."""
    text = row.record.get("text")
    if not isinstance(text, str):
        return None
    said = normalise_text(text)
    return _NUMBERS.sub("#", said) if row.record.get("kind") == "episodic" else said


def _cosines(vectors: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Each row of `vectors` times `other` (unit vectors: their cosines), each row summed by
    the same steps: a matrix product may sum rows in different orders, and then two equal
    vectors would differ in their last bits."""
    cosines: np.ndarray = (vectors * other).sum(axis=1)
    return cosines


def _hits(
    request: SearchRequest,
    params: SearchParams,
    rows: list[SearchRow],
    reranked: dict[uuid.UUID, float],
    mmr_depth: int,
) -> list[SearchHit]:
    """The statement's rows, ranked (`_ranked_by_reranker`), as hits: picked by MMR, among
    `mmr_depth` of them (`mmr_candidates`), when the search asks for it; at most the
    request's limit."""
    mmr_scores: dict[uuid.UUID, float] = {}
    if params.with_embeddings:
        # Set only for MMR, and only when the question has a vector (`MemorySearch.params`).
        assert request.mmr_lambda is not None
        with search_stage("mmr", request.mode):
            rows, mmr_scores = maximal_marginal_relevance(
                mmr_candidates(rows, mmr_depth, request.mmr_lambda),
                request.mmr_lambda,
                request.limit,
                reranked,
            )
    return [
        SearchHit(
            memory=row.memory,
            scores=row.scores.model_copy(
                update={
                    "mmr_score": mmr_scores.get(row.id),
                    "rerank_score": reranked.get(row.id),
                }
            ),
        )
        for row in rows[: request.limit]
    ]


def _ranked_by_reranker(rows: list[SearchRow], reranked: dict[uuid.UUID, float]) -> list[SearchRow]:
    """The candidates the reranker scored first, by its score (a stable sort: equal scores keep
    the fused order), the rest after them in fused order."""
    if not reranked:
        return rows
    scored = sorted((row for row in rows if row.id in reranked), key=lambda row: -reranked[row.id])
    return [*scored, *(row for row in rows if row.id not in reranked)]


def _spares(
    ranked: list[SearchRow],
    hits: list[SearchHit],
    mmr_lambda: float | None,
    reranked: dict[uuid.UUID, float],
) -> list[Spare]:
    """The candidates of `ranked` that are not `hits`, in ranked order; below `mmr_lambda` 1
    without a repeat (`_repeat_key`) of a hit or of a spare before it, which MMR would pick
    last: shown in place of a hit, it would say what the block shows already, or what the
    block had no room for, at the same cost."""
    returned = {hit.memory.id for hit in hits}
    repeats = mmr_lambda is not None and mmr_lambda < 1
    said = {_repeat_key(row) for row in ranked if repeats and row.id in returned}
    spares = []
    for row in ranked:
        if row.id in returned:
            continue
        key = _repeat_key(row) if repeats else None
        if key is not None and key in said:
            continue
        said.add(key)
        spares.append(Spare(row, reranked.get(row.id)))
    return spares


def _pick(value: float | None, default: float) -> float:
    return default if value is None else value
