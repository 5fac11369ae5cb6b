"""A memory's conversation in the search statement: a neighbour that neither side's pool reached
is scored by its own match like any candidate, and every turn of a session gains the best match
of that session (`thread_score`), so the session where the query matches best lifts its turns
above scattered matches elsewhere."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository, SearchParams, SearchRow
from service.memories.schemas import ComponentScores
from tests.conftest import bearer
from tests.memories.sessions import session_items
from tests.search_params import search_params

QUERY = "how did the adoption meeting go"
TURNS = [
    # Matches the query itself (adoption), but second to the line after it.
    "Caroline: I finally called the adoption agency yesterday",
    # The best match of all (adoption, meeting, go): the only candidate of a pool of one.
    "Melanie: How did the adoption meeting go?",
    # Shares no word with the query: reached through the question alone.
    "Caroline: Really well, they said the paperwork takes six months",
]


async def seed_thread(
    client: AsyncClient, headers: dict[str, str], turns: list[str], day: int = 1
) -> None:
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": await session_items(client, headers, turns, day=day)},
    )
    assert response.status_code == 201, response.text


def params(
    query: str, query_embedding: list[float] | None, *, pool: int, use_vector: bool
) -> SearchParams:
    return search_params(
        MemoryFilter.build([Owner.user("alice")]),
        query,
        query_embedding=query_embedding if use_vector else None,
        use_vector=use_vector,
        pool=pool,
        fusion="linear",
    )


async def run(engine: AsyncEngine, tenant: str, search: SearchParams) -> dict[str, SearchRow]:
    async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
        rows = await FusionRepository(session, tenant).search(search)
    return {row.memory.text: row for row in rows}


@pytest.mark.parametrize("use_vector", [False, True], ids=["lexical", "hybrid"])
async def test_a_neighbour_outside_every_pool_is_scored_by_its_own_match(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    tenant: str,
    use_vector: bool,
) -> None:
    await seed_thread(client, bearer(settings, tenant, "alice"), TURNS)
    embedder = app.state.mneme.embedding_backfill.embedder
    query_embedding = await embedder.embed_query(QUERY)
    narrow = params(QUERY, query_embedding, pool=1, use_vector=use_vector)
    if use_vector:
        # A vector pool of one must hold the question too, or the lexical pool alone would
        # not be what leaves the first turn out.
        nearest = await run(runtime_engine, tenant, replace(narrow, use_lexical=False))
        assert [t for t, row in nearest.items() if row.scores.vector_rank == 1] == [TURNS[1]]
    found = await run(runtime_engine, tenant, narrow)
    every = await run(runtime_engine, tenant, replace(narrow, pool=100))

    matching, question, answer = (found[turn].scores for turn in TURNS)
    assert question.lexical_rank == 1
    assert every[TURNS[0]].scores.lexical_rank == 2
    # The first turn was in no pool: only its neighbour brought it in, yet it carries its
    # own BM25 score and cosine, the very ones a pool reaching it gives; its ranks stay
    # empty (it is beyond both pools).
    assert matching.lexical_rank is None
    assert matching.vector_rank is None
    assert matching.lexical_score == pytest.approx(every[TURNS[0]].scores.lexical_score)
    assert matching.fused_score == pytest.approx(every[TURNS[0]].scores.fused_score)
    assert matching.fused_score > 0
    assert matching.neighbour_score == pytest.approx(question.fused_score)
    if use_vector:
        assert matching.vector_cosine == pytest.approx(every[TURNS[0]].scores.vector_cosine)
    else:
        assert matching.vector_cosine is None
    # The answer matches nothing: its neighbour's evidence is all it has, so the turn that
    # matches the query by itself ranks above it.
    assert answer.lexical_score is None
    if use_vector:
        assert answer.vector_cosine is not None
        assert answer.fused_score == pytest.approx(0.5 * max(answer.vector_cosine, 0))
    else:
        assert answer.fused_score == 0
    ranking = list(found)
    assert ranking.index(TURNS[0]) < ranking.index(TURNS[2])


async def test_a_neighbour_beyond_the_pools_has_no_fused_score_under_rrf(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    """RRF fuses ranks, and a memory beyond both pools has none: it keeps its own BM25 score
    for the record, but only its neighbour's evidence ranks it."""
    await seed_thread(client, bearer(settings, tenant, "alice"), TURNS)
    found = await run(
        runtime_engine,
        tenant,
        replace(params(QUERY, None, pool=1, use_vector=False), fusion="rrf"),
    )
    matching = found[TURNS[0]].scores
    assert matching.lexical_rank is None
    assert matching.lexical_score is not None and matching.lexical_score > 0
    assert matching.fused_score == 0
    assert matching.neighbour_score == pytest.approx(found[TURNS[1]].scores.fused_score)


# Two sessions and a memory outside any thread. The query's rare word "aquarium" is in the
# first session's opening turn only; "tickets" is in a later turn of that session (two turns
# away: not a neighbour of the opening), in the other session and in the loose note, once
# each; the later turn is the longest of the three (8 distinct lexemes against 6), so by its
# own BM25 it is the weakest of them.
BEST_SESSION = [
    "Ada: We spent the whole day at the aquarium and bought tickets online",
    "Ben: That sounds fun, what did the kids like most?",
    "Ada: The jellyfish glowed, and the tickets were half price after four on weekdays",
]
OTHER_SESSION = [
    "Ben: I booked the train tickets for the trip north",
    "Ada: Great, which day do we leave then?",
]
LOOSE = "Ada keeps the tickets in the blue folder by the door"


async def test_the_session_where_the_query_matches_best_lifts_its_turns(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed_thread(client, headers, BEST_SESSION, day=1)
    await seed_thread(client, headers, OTHER_SESSION, day=2)
    response = await client.post("/v1/users/me/memories", headers=headers, json={"text": LOOSE})
    assert response.status_code == 201, response.text

    search = params("aquarium tickets", None, pool=100, use_vector=False)
    found = await run(runtime_engine, tenant, search)
    opening, later = found[BEST_SESSION[0]].scores, found[BEST_SESSION[2]].scores
    other, loose = found[OTHER_SESSION[0]].scores, found[LOOSE].scores

    # Every turn of a session carries the best fused score of that session.
    assert opening.fused_score > max(later.fused_score, other.fused_score, loose.fused_score)
    assert opening.thread_score == pytest.approx(opening.fused_score)
    assert later.thread_score == pytest.approx(opening.fused_score)
    assert found[BEST_SESSION[1]].scores.thread_score == pytest.approx(opening.fused_score)
    # A session whose only match is one turn: that turn; outside a thread: the memory itself.
    assert other.thread_score == pytest.approx(other.fused_score)
    assert loose.thread_score == pytest.approx(loose.fused_score)
    assert later.fused_score < min(other.fused_score, loose.fused_score)
    # "tickets" alone: the later turn of the best session outranks the stronger matches of the
    # other session and of the loose note, which it does not by its own match.
    ranking = list(found)
    assert ranking.index(BEST_SESSION[2]) < ranking.index(OTHER_SESSION[0])
    assert ranking.index(BEST_SESSION[2]) < ranking.index(LOOSE)
    alone = list(await run(runtime_engine, tenant, replace(search, thread_weight=0)))
    assert alone.index(BEST_SESSION[2]) > max(alone.index(OTHER_SESSION[0]), alone.index(LOOSE))


# A session whose question and answer have a fact drawn between them, as the write path draws
# facts while the conversation goes on.
QUESTION = "Melanie: How did the adoption meeting go?"
ANSWER = "Caroline: Really well, they said the paperwork takes six months"
# Matches the query too, less than the question.
WEAKER_FACT = "Caroline went to the adoption meeting about the adoption"
# Matches the query better than the question does.
STRONGER_FACT = "Caroline: adoption meeting went well, the adoption meeting did go well"


async def scores_with_a_fact_between(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str, fact: str
) -> tuple[ComponentScores, ComponentScores, ComponentScores]:
    """The question's, the fact's and the answer's scores for `QUERY` (lexical), the fact
    stored as a fact between the two turns of one thread."""
    headers = bearer(settings, tenant, "alice")
    items = await session_items(client, headers, [QUESTION, fact, ANSWER], day=1)
    items[1]["kind"] = "semantic"
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": items}
    )
    assert response.status_code == 201, response.text
    found = await run(runtime_engine, tenant, params(QUERY, None, pool=100, use_vector=False))
    return found[QUESTION].scores, found[fact].scores, found[ANSWER].scores


@pytest.mark.parametrize(
    ("fact", "fact_matches_better"),
    [(WEAKER_FACT, False), (STRONGER_FACT, True)],
    ids=["weaker-fact", "stronger-fact"],
)
async def test_a_fact_lends_to_the_turns_around_it_and_receives_nothing(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    tenant: str,
    fact: str,
    fact_matches_better: bool,
) -> None:
    """Facts stand alone: a fact drawn between a question and its answer takes no evidence
    from them, and lends its own to both; the answer's turn before it is the question, past
    the fact, so the answer takes the better of the two."""
    question, between, answer = await scores_with_a_fact_between(
        client, settings, runtime_engine, tenant, fact
    )
    assert question.fused_score > 0 and between.fused_score > 0
    assert (between.fused_score > question.fused_score) is fact_matches_better
    assert between.neighbour_score == 0
    # The question's turn after it is the answer, which matches nothing: the fact's evidence.
    assert question.neighbour_score == pytest.approx(between.fused_score)
    assert answer.neighbour_score == pytest.approx(max(question.fused_score, between.fused_score))
