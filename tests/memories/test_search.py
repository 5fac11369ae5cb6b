"""Hybrid retrieval: one SQL statement fusing full-text and vector candidates, with honest
component scores, and a filtered HNSW path that agrees with an exact scan."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from service.memories.schemas import SearchRequest
from service.memories.search import MemorySearch
from tests.conftest import as_tenant, bearer
from tests.memories.sessions import session_items
from tests.search_params import search_params

CORPUS = [
    "I adore hiking in the alps every summer",
    "The quarterly tax report is due on the fifteenth",
    "Database migrations run every night at two",
    "Invoice for the Rotterdam warehouse lease, reference ZX-4471-QR, paid in March",
    "Shipment XZ-4417-RQ cancelled",
    "Order AB-1200-KL was delivered to the front desk",
    "Package tracking numbers arrive by email",
    "Prefers window seats on long flights",
    "Allergic to shellfish and peanuts",
]


async def seed(client: AsyncClient, headers: dict[str, str]) -> dict[str, str]:
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": t} for t in CORPUS]},
    )
    assert response.status_code == 201, response.text
    return {item["text"]: item["id"] for item in response.json()["items"]}


async def search(client: AsyncClient, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = await client.post("/v1/users/me/memories/search", headers=headers, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def bm25_scores(
    connection: AsyncConnection, texts: list[str], query: str
) -> dict[str, float]:
    """Okapi BM25 (k1 1.2, b 0.75, the non-negative IDF ln(1 + (N - df + 0.5) / (df + 0.5)),
    length = distinct lexemes) of `query` against each of `texts` as the whole collection,
    computed here from Postgres' english lexemes of each text."""

    async def lexemes(value: str) -> dict[str, int]:
        rows = await connection.execute(
            text("SELECT lexeme, cardinality(positions) FROM unnest(to_tsvector('english', :v))"),
            {"v": value},
        )
        return {str(row[0]): int(row[1]) for row in rows}

    documents = {value: await lexemes(value) for value in texts}
    terms = set(await lexemes(query))
    mean_length = sum(len(d) for d in documents.values()) / len(documents)
    frequency = {t: sum(1 for d in documents.values() if t in d) for t in terms}
    idf = {t: math.log(1 + (len(documents) - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}
    return {
        value: sum(
            idf[t] * d[t] * 2.2 / (d[t] + 1.2 * (0.25 + 0.75 * len(d) / mean_length))
            for t in terms & d.keys()
        )
        for value, d in documents.items()
        if terms & d.keys()
    }


def ids(result: dict[str, Any]) -> list[str]:
    return [hit["memory"]["id"] for hit in result["hits"]]


async def test_hybrid_finds_a_paraphrase_only_the_vector_side_finds(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    corpus = await seed(client, headers)
    target = corpus["I adore hiking in the alps every summer"]
    query = "Which outdoor activity does she love?"
    assert ids(await search(client, headers, query=query, mode="lexical")) == []
    assert ids(await search(client, headers, query=query, mode="vector", limit=1)) == [target]
    assert ids(await search(client, headers, query=query, limit=1)) == [target]


async def test_hybrid_finds_an_exact_rare_token_the_vector_side_misses(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    corpus = await seed(client, headers)
    target = corpus[
        "Invoice for the Rotterdam warehouse lease, reference ZX-4471-QR, paid in March"
    ]
    # A look-alike code (no shared lexeme) is nearer in embedding space than the real one.
    query = "order ZX-4471-QR"
    lexical = await search(client, headers, query=query, mode="lexical", limit=1)
    assert ids(lexical) == [target]
    vector = await search(client, headers, query=query, mode="vector", limit=1)
    assert ids(vector) != [target]
    assert ids(await search(client, headers, query=query, limit=1)) == [target]


async def test_component_scores_are_the_ones_the_sql_computed(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed(client, headers)
    query = "when is the tax report due"
    result = await search(
        client, headers, query=query, fusion="rrf", recency_weight=0, confidence_weight=0, limit=8
    )
    embedder = app.state.mneme.embedding_backfill.embedder
    query_vector = np.asarray(await embedder.embed_query(query))
    k = settings.search_rrf_k
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        bm25 = await bm25_scores(connection, CORPUS, query)
        for hit in result["hits"]:
            scores, memory = hit["scores"], hit["memory"]
            stored = np.asarray((await embedder.embed([memory["text"]]))[0])
            assert scores["vector_cosine"] == pytest.approx(float(stored @ query_vector), abs=1e-4)
            expected_rrf = sum(
                1.0 / (k + rank) for rank in (scores["lexical_rank"], scores["vector_rank"]) if rank
            )
            assert scores["fused_score"] == pytest.approx(expected_rrf)
            # No memory here belongs to a thread: each is a session of its own, whose best
            # match is itself.
            assert scores["thread_score"] == pytest.approx(scores["fused_score"])
            assert scores["final_score"] == pytest.approx(
                scores["fused_score"] * (1 + settings.search_thread_weight)
            )
            if scores["lexical_rank"] is not None:
                assert scores["lexical_score"] == pytest.approx(bm25[memory["text"]])
    top = result["hits"][0]
    assert top["memory"]["text"] == "The quarterly tax report is due on the fifteenth"
    assert top["scores"]["lexical_rank"] == 1
    finals = [hit["scores"]["final_score"] for hit in result["hits"]]
    assert finals == sorted(finals, reverse=True)


async def test_linear_fusion_rewards_a_strong_vector_match(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed(client, headers)
    result = await search(
        client,
        headers,
        query="Prefers window seats on long flights",
        fusion="linear",
        linear_lexical_weight=0.5,
        recency_weight=0,
        confidence_weight=0,
    )
    top = result["hits"][0]["scores"]
    assert top["vector_cosine"] == pytest.approx(1.0, abs=1e-3)
    assert top["fused_score"] == pytest.approx(0.5 * 1.0 + 0.5 * top["vector_cosine"], abs=1e-6)


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
async def test_a_search_with_one_side_scores_it_whole_whatever_the_linear_weight(
    client: AsyncClient, settings: Settings, tenant: str, mode: str, weight: float
) -> None:
    """The weight shares the fused score between two sides; with one side there is nothing to
    share, and a weight scaling it would shrink every score (to 0 at the weight's end)."""
    headers = bearer(settings, tenant, "alice")
    await seed(client, headers)
    result = await search(
        client,
        headers,
        query="shipment tracking numbers for the warehouse",
        mode=mode,
        fusion="linear",
        linear_lexical_weight=weight,
        recency_weight=0,
        confidence_weight=0,
        limit=20,
    )
    hits = [hit["scores"] for hit in result["hits"]]
    assert hits
    best_lexical = max(scores["lexical_score"] or 0 for scores in hits)
    for scores in hits:
        strength = (scores["lexical_score"] or 0) / best_lexical if best_lexical else 0
        cosine = max(scores["vector_cosine"] or 0, 0)
        expected = {
            "lexical": strength,
            "vector": cosine,
            "hybrid": weight * strength + (1 - weight) * cosine,
        }[mode]
        assert scores["fused_score"] == pytest.approx(expected, abs=1e-6)
        assert scores["final_score"] == pytest.approx(
            expected * (1 + settings.search_thread_weight), abs=1e-6
        )
    if mode != "hybrid":
        # The one side's best match is a full match on that side, and ranks first.
        assert hits[0]["fused_score"] == pytest.approx(
            1.0 if mode == "lexical" else max(h["vector_cosine"] for h in hits), abs=1e-6
        )


async def test_recency_and_confidence_factors_follow_kind_and_settings(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {
                    "text": "Likes the aquarium with the kids",
                    "kind": "semantic",
                    "event_at": "2020-01-01T00:00:00Z",
                    "confidence": 0.5,
                },
                {
                    "text": "Visited the aquarium with the kids",
                    "kind": "episodic",
                    "event_at": "2020-01-01T00:00:00Z",
                },
                {
                    "text": "Always be concise at the aquarium desk",
                    "kind": "procedural",
                    "event_at": "2020-01-01T00:00:00Z",
                },
            ]
        },
    )
    result = await search(
        client, headers, query="aquarium", recency_weight=0.5, confidence_weight=0.4
    )
    by_kind = {hit["memory"]["kind"]: hit["scores"] for hit in result["hits"]}
    assert by_kind["semantic"]["recency_factor"] == pytest.approx(0.5, abs=1e-3)  # long decayed
    # What happened stays what happened, and standing instructions stand: neither fades.
    assert by_kind["episodic"]["recency_factor"] == pytest.approx(1.0)
    assert by_kind["procedural"]["recency_factor"] == pytest.approx(1.0)
    assert by_kind["semantic"]["confidence_factor"] == pytest.approx(0.6 + 0.4 * 0.5)
    for scores in by_kind.values():
        # Outside any thread, a memory's session evidence is its own fused score.
        assert scores["thread_score"] == pytest.approx(scores["fused_score"])
        assert scores["final_score"] == pytest.approx(
            (scores["fused_score"] + settings.search_thread_weight * scores["thread_score"])
            * scores["recency_factor"]
            * scores["confidence_factor"]
        )


async def test_superseded_and_filtered_out_memories_do_not_come_back(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    corpus = await seed(client, headers)
    target = corpus["Allergic to shellfish and peanuts"]
    await client.patch(
        f"/v1/users/me/memories/{target}", headers=headers, json={"lifecycle": "superseded"}
    )
    assert target not in ids(await search(client, headers, query="peanut allergy"))
    asked = await search(client, headers, query="peanut allergy", lifecycles=["superseded"])
    assert ids(asked) == [target]
    episodic_only = await search(client, headers, query="peanut allergy", kinds=["episodic"])
    assert episodic_only["hits"] == []


async def test_mmr_drops_near_duplicates(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"text": "Loves Italian food, especially pasta"},
                {"text": "Loves Italian food, pasta above all"},
                {"text": "Really loves Italian food and pasta"},
                {"text": "Enjoys Japanese ramen on cold days"},
            ]
        },
    )
    plain = await search(client, headers, query="favourite food", limit=2)
    diverse = await search(client, headers, query="favourite food", limit=2, mmr_lambda=0.3)
    plain_texts = [hit["memory"]["text"] for hit in plain["hits"]]
    diverse_texts = [hit["memory"]["text"] for hit in diverse["hits"]]
    assert all("Italian" in t for t in plain_texts)
    assert any("ramen" in t for t in diverse_texts)
    assert all(hit["scores"]["mmr_score"] is not None for hit in diverse["hits"])


async def test_mmr_diversifies_a_lexical_search_by_the_hits_stored_vectors(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    # Redundancy is the cosine between the hits' own vectors, which a search without a question
    # vector still has: `mmr_lambda` is applied, not silently dropped, in mode `lexical`.
    headers = bearer(settings, tenant, "lexical-mmr")
    await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"text": "Loves Italian food, especially pasta"},
                {"text": "Loves Italian food, pasta above all"},
                {"text": "Really loves Italian food and pasta"},
                {"text": "Enjoys Japanese food like ramen"},
            ]
        },
    )
    plain = await search(client, headers, query="Italian food pasta", limit=2, mode="lexical")
    diverse = await search(
        client, headers, query="Italian food pasta", limit=2, mode="lexical", mmr_lambda=0.3
    )
    assert all("Italian" in hit["memory"]["text"] for hit in plain["hits"])
    assert any("ramen" in hit["memory"]["text"] for hit in diverse["hits"])
    assert all(hit["scores"]["mmr_score"] is not None for hit in diverse["hits"])
    assert all(hit["scores"]["vector_cosine"] is None for hit in diverse["hits"])


async def test_the_event_filters_date_a_memory_without_an_event_time_by_its_storing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "event-filters")
    written = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"text": "Moved to Lisbon for a new job", "event_at": "2020-03-01T10:00:00Z"},
                {"text": "Prefers Lisbon in the spring"},
            ]
        },
    )
    moved, prefers = (item["id"] for item in written.json()["items"])
    before = await search(client, headers, query="Lisbon", event_before="2021-01-01T00:00:00Z")
    after = await search(client, headers, query="Lisbon", event_after="2021-01-01T00:00:00Z")
    assert ids(before) == [moved]
    assert ids(after) == [prefers]
    # The bounds: `event_after` inclusive, `event_before` exclusive.
    at = "2020-03-01T10:00:00Z"
    assert set(ids(await search(client, headers, query="Lisbon", event_after=at))) == {
        moved,
        prefers,
    }
    assert ids(await search(client, headers, query="Lisbon", event_before=at)) == []


async def test_a_memory_from_centuries_ago_ranks_last_instead_of_breaking_search(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """0.5 ** (age / half-life) underflows for very old memories; it must count as 0, not
    fail the statement (an org memory would otherwise break every user's search)."""
    admin = bearer(settings, tenant, "root", admin=True)
    alice = bearer(settings, tenant, "alice")
    today = datetime.now(UTC).replace(microsecond=0).isoformat()
    for path, headers, kind, when in (
        ("/v1/org/memories", admin, "semantic", "0001-01-01T00:00:01+00:00"),
        ("/v1/users/me/memories", alice, "semantic", "1700-01-01T00:00:00+00:00"),
        ("/v1/users/me/memories", alice, "episodic", today),
    ):
        response = await client.post(
            path,
            headers=headers,
            json={"kind": kind, "text": f"Hiking trip {when}", "event_at": when},
        )
        assert response.status_code == 201, response.text

    result = await search(client, alice, query="hiking trip")
    context = await client.post("/v1/users/me/context", headers=alice, json={"query": "hiking"})

    assert context.status_code == 200, context.text
    factors = {hit["memory"]["text"]: hit["scores"]["recency_factor"] for hit in result["hits"]}
    floor = 1 - settings.search_recency_weight
    assert factors == {
        "Hiking trip 0001-01-01T00:00:01+00:00": pytest.approx(floor),
        "Hiking trip 1700-01-01T00:00:00+00:00": pytest.approx(floor),
        f"Hiking trip {today}": pytest.approx(1.0, abs=1e-3),
    }


CONVERSATION = [
    "Caroline: I went to the adoption agency meeting yesterday",
    "Melanie: How did it go?",
    "Caroline: Really well, they said the paperwork takes six months",
    "Melanie: That is wonderful news",
]
OTHER_SESSION = [
    "Melanie: We painted the garden fence last weekend",
    "Caroline: The fence looks lovely in that blue",
]


async def seed_sessions(client: AsyncClient, headers: dict[str, str]) -> dict[str, str]:
    """Two conversation sessions, each its own source thread, turns one second apart, and
    the plain corpus (no thread) beside them."""
    items: list[dict[str, Any]] = [{"text": t} for t in CORPUS]
    for session, turns in enumerate((CONVERSATION, OTHER_SESSION)):
        items.extend(await session_items(client, headers, turns, day=session + 1))
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": items}
    )
    assert response.status_code == 201, response.text
    return {item["text"]: item["id"] for item in response.json()["items"]}


def expected_conversation_scores(
    hits: list[dict[str, Any]], threads: dict[str, str | None], order: list[str]
) -> dict[str, tuple[float, float]]:
    """Neighbour and thread scores computed here from the hits' fused scores, when every
    candidate is among the hits: a memory's neighbour score is the best fused score of the
    memories right before and after it in its thread (`order`), its thread score the best fused
    score of its thread (its own, outside a thread)."""
    fused = {hit["memory"]["text"]: hit["scores"]["fused_score"] for hit in hits}
    expected = {}
    for text_value in fused:
        thread = threads[text_value]
        neighbour = 0.0
        if thread is not None and text_value in order:
            position = order.index(text_value)
            adjacent = [
                order[p]
                for p in (position - 1, position + 1)
                if 0 <= p < len(order) and threads[order[p]] == thread
            ]
            neighbour = max((fused.get(a, 0.0) for a in adjacent), default=0.0)
        session = [f for t, f in fused.items() if thread is not None and threads[t] == thread]
        expected[text_value] = (neighbour, max([fused[text_value], *session]))
    return expected


async def test_conversation_evidence_scores_are_the_ones_the_sql_computed(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed_sessions(client, headers)
    result = await search(client, headers, query="how did the adoption meeting go", limit=100)
    hits = result["hits"]
    threads = {hit["memory"]["text"]: hit["memory"]["source_thread_id"] for hit in hits}
    # Every memory is a vector candidate here (the pool is larger than the corpus).
    assert len(hits) == len(CORPUS) + len(CONVERSATION) + len(OTHER_SESSION)
    expected = expected_conversation_scores(hits, threads, CONVERSATION + OTHER_SESSION)
    for hit in hits:
        scores = hit["scores"]
        neighbour, thread = expected[hit["memory"]["text"]]
        assert scores["neighbour_score"] == pytest.approx(neighbour)
        assert scores["thread_score"] == pytest.approx(thread)
        assert scores["final_score"] == pytest.approx(
            (
                scores["fused_score"]
                + settings.search_neighbour_weight * neighbour
                + settings.search_thread_weight * thread
            )
            * scores["recency_factor"]
            * scores["confidence_factor"]
        )
    finals = [hit["scores"]["final_score"] for hit in hits]
    assert finals == sorted(finals, reverse=True)


async def test_the_turn_next_to_a_match_is_found_through_it(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Lexically only the question matches; the answer right after it comes back too, with
    no score of its own and the question's fused score as its neighbour score."""
    headers = bearer(settings, tenant, "alice")
    await seed_sessions(client, headers)
    result = await search(client, headers, query="how did it go", mode="lexical", limit=10)
    by_text = {hit["memory"]["text"]: hit["scores"] for hit in result["hits"]}
    question = by_text["Melanie: How did it go?"]
    assert question["lexical_rank"] == 1
    for answer in (CONVERSATION[0], CONVERSATION[2]):
        assert by_text[answer]["lexical_rank"] is None
        assert by_text[answer]["fused_score"] == 0
        assert by_text[answer]["neighbour_score"] == pytest.approx(question["fused_score"])
    assert OTHER_SESSION[0] not in by_text


async def test_the_same_data_and_question_always_rank_the_same(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    """Two users hold the same memories under different random ids; equal final scores are
    ordered by the stronger normalised side, then the other, never by the id. (Recency is off
    and bob's vectors are alice's: their memories were recorded and embedded moments apart.)"""
    for user in ("alice", "bob"):
        await seed_sessions(client, bearer(settings, tenant, user))
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(
            text(
                "UPDATE memory b SET embedding = a.embedding FROM memory a "
                "WHERE b.user_id = 'bob' AND a.user_id = 'alice' AND a.text = b.text"
            )
        )
    rankings = []
    for user in ("alice", "bob"):
        headers = bearer(settings, tenant, user)
        for _ in range(2):
            result = await search(
                client, headers, query="tax report shipment order", limit=100, recency_weight=0
            )
            rankings.append([hit["memory"]["text"] for hit in result["hits"]])
            hits = result["hits"]
            best_lexical = max(h["scores"]["lexical_score"] or 0 for h in hits)

            def sides(scores: dict[str, Any], best: float = best_lexical) -> tuple[float, float]:
                lexical = (scores["lexical_score"] or 0) / best
                vector = scores["vector_cosine"] or 0
                return max(lexical, vector), min(lexical, vector)

            for before, after in itertools.pairwise(hits):
                if before["scores"]["final_score"] == after["scores"]["final_score"]:
                    assert sides(before["scores"]) >= sides(after["scores"])
    assert all(ranking == rankings[0] for ranking in rankings)


async def test_filtered_search_scores_against_the_filtered_memories_only(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    """BM25's statistics (how many memories, how many hold each word, their mean length) are
    those of the memories the filter lets through, so a filtered search ranks exactly as a
    search over just those memories would."""
    headers = bearer(settings, tenant, "alice")
    await seed_sessions(client, headers)
    await seed(client, bearer(settings, tenant, "bob"))
    query = "the fence in the garden"
    result = await search(
        client, headers, query=query, kinds=["episodic"], mode="lexical", limit=100
    )
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        exact = await bm25_scores(connection, CONVERSATION + OTHER_SESSION, query)
    lexical = {
        hit["memory"]["text"]: hit["scores"]["lexical_score"]
        for hit in result["hits"]
        if hit["scores"]["lexical_rank"] is not None
    }
    assert lexical.keys() == exact.keys()
    for text_value, score in exact.items():
        assert lexical[text_value] == pytest.approx(score)
    ranks = {
        hit["memory"]["text"]: hit["scores"]["lexical_rank"]
        for hit in result["hits"]
        if hit["scores"]["lexical_rank"] is not None
    }
    assert sorted(ranks, key=ranks.__getitem__) == sorted(
        exact, key=exact.__getitem__, reverse=True
    )


async def test_context_items_carry_the_conversation_scores(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await seed_sessions(client, headers)
    response = await client.post(
        "/v1/users/me/context", headers=headers, json={"query": "how did it go"}
    )
    assert response.status_code == 200, response.text
    scored = [
        item["scores"]
        for section in response.json()["sections"]
        for item in section["items"]
        if item.get("scores")
    ]
    assert scored
    components = {"neighbour_score", "thread_score", "speaker_score", "date_score"}
    assert all(components <= scores.keys() for scores in scored)
    assert any(scores["thread_score"] > 0 for scores in scored)


async def test_linear_fusion_weighs_each_lexical_candidate_with_its_own_cosine(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The vector side brings only its pool's nearest; a lexical candidate beyond them is read
    for its row anyway, and linear fusion weighs it with its own cosine (RRF, which fuses
    ranks, has none for it)."""
    headers = bearer(settings, tenant, "alice")
    topics = ["ferry", "violin", "tax", "garden", "chess", "marathon", "bakery", "comet"]
    texts = [
        f"The ledger for the {topic} {'club' if index % 2 else 'trip'} lists item {index}"
        for index, topic in enumerate(topics * 3)
    ]
    response = await client.post(
        "/v1/users/me/memories/batch", headers=headers, json={"items": [{"text": t} for t in texts]}
    )
    assert response.status_code == 201, response.text
    embedder = app.state.mneme.embedding_backfill.embedder
    question = "which ledger mentions the violin"
    vector = await embedder.embed_query(question)
    stored = dict(zip(texts, await embedder.embed(texts), strict=True))

    async def rows(fusion: str) -> list[Any]:
        params = search_params(
            MemoryFilter.build([Owner.user("alice")]),
            question,
            query_embedding=vector,
            use_vector=True,
            fusion=fusion,
            vector_pool=10,
            limit=len(texts),
        )
        async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
            return await FusionRepository(session, tenant).search(params)

    linear = await rows("linear")
    assert len(linear) == len(texts)  # every memory holds "ledger": all are lexical candidates
    brought = [row for row in linear if row.scores.vector_rank is not None]
    assert len(brought) == 10
    beyond = [row for row in linear if row.scores.vector_rank is None]
    assert len(beyond) == len(texts) - 10
    best_lexical = max(row.scores.lexical_score for row in linear)
    for row in linear:
        own = float(np.dot(vector, stored[row.memory.text]))
        assert row.scores.vector_cosine == pytest.approx(own, abs=1e-4)
        assert row.scores.fused_score == pytest.approx(
            0.5 * row.scores.lexical_score / best_lexical + 0.5 * max(own, 0.0), abs=1e-6
        )
    # The nearest ten are the vector side's, in their order.
    nearest = sorted(texts, key=lambda t: -float(np.dot(vector, stored[t])))[:10]
    assert sorted(brought, key=lambda row: row.scores.vector_rank) == sorted(
        brought, key=lambda row: nearest.index(row.memory.text)
    )
    assert {row.memory.text for row in brought} == set(nearest)

    rrf = await rows("rrf")
    assert {row.memory.text for row in rrf if row.scores.vector_cosine is None} == {
        row.memory.text for row in beyond
    }


@pytest.mark.parametrize(
    ("body", "vector_candidates"),
    [
        ({}, 50),  # linear hybrid: the vector pool
        ({"limit": 80}, 80),  # at least the request's limit
        ({"fusion": "rrf"}, 100),  # ranks fused: the whole pool on both sides
        ({"mode": "vector"}, 100),  # the vectors are every candidate
    ],
)
async def test_the_vector_side_brings_the_vector_pool_under_linear_fusion_only(
    app: FastAPI, body: dict[str, Any], vector_candidates: int
) -> None:
    search = MemorySearch(
        FusionRepository(AsyncSession(), "t"),
        app.state.mneme.vector_columns,
        "t",
        app.state.mneme.settings,
    )
    request = SearchRequest.model_validate({"query": "which ledger mentions the violin", **body})
    params = search.params(Owner.user("alice"), request, [0.1] * 384)
    assert params.pool == max(100, request.limit)
    assert params.vector_candidates == vector_candidates


@pytest.mark.parametrize("limit", [1, 10, 30, 40, 100])
async def test_mmr_reads_deeper_than_the_search_without_it_ranks_but_through_the_same_pools(
    app: FastAPI, limit: int
) -> None:
    """The pools decide the ranking (what lends evidence to what): a search with MMR ranks as
    the one without, and only reads further down that ranking."""
    search = MemorySearch(
        FusionRepository(AsyncSession(), "t"),
        app.state.mneme.vector_columns,
        "t",
        app.state.mneme.settings,
    )
    body = {"query": "which ledger mentions the violin", "limit": limit}
    plain = search.params(Owner.user("alice"), SearchRequest.model_validate(body), [0.1] * 384)
    with_mmr = search.params(
        Owner.user("alice"),
        SearchRequest.model_validate({**body, "mmr_lambda": 1}),
        [0.1] * 384,
    )
    assert (with_mmr.pool, with_mmr.vector_candidates) == (plain.pool, plain.vector_candidates)
    assert plain.limit == limit
    # Three per hit, and at least 30: a context section of 4 would read only 12.
    assert with_mmr.limit == min(max(3 * limit, 30), 300)
