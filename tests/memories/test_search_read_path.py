"""The search's read path runs `HYBRID_SEARCH_SQL` as driver SQL compiled once per filter shape;
it must return exactly what SQLAlchemy returns for the same statement built per request."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_engine, create_sessionmaker, tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    FusionRepository,
    SearchParams,
    hybrid_search_statement,
)
from service.memories.schemas import SearchRequest, SearchResponse
from service.memories.search import MemorySearch
from tests.conftest import bearer, new_tenant
from tests.db.sent_queries import sent_queries
from tests.memories.large_owners import count_statistics
from tests.memories.test_fusion_module import nearest_orders
from tests.search_params import search_params

TEXTS = [
    ("semantic", "Prefers green tea in the morning"),
    ("semantic", "Her sister Lena lives in Lisbon"),
    ("episodic", "Went hiking near Porto with Lena on a rainy day"),
    ("episodic", "Missed the tea ceremony because the train was late"),
    ("procedural", "Answer in Portuguese when the user writes in Portuguese"),
    ("semantic", "Allergic to peanuts and shellfish"),
]


async def _tenant_with_texts(client: AsyncClient, settings: Settings) -> str:
    """A new tenant whose user `ada` holds `TEXTS`."""
    tenant = new_tenant()
    created = await client.post(
        "/v1/users/me/memories/batch",
        headers=bearer(settings, tenant, "ada"),
        json={"items": [{"kind": kind, "text": text} for kind, text in TEXTS]},
    )
    assert created.status_code == 201, created.text
    return tenant


OWNERS_QUESTION = "\nSELECT set_config('plan_cache_mode', 'force_generic_plan', true)"
"""How the question a search asks about its owners before its statement begins, when it also
makes the generic plan's setting (`OWNERS_SEARCHED_SQL`)."""


def _params(query: str, vector: list[float], **changes: Any) -> SearchParams:
    return search_params(
        MemoryFilter.build([Owner.user("ada"), Owner.org()]),
        query,
        **{
            "query_embedding": vector,
            "use_vector": True,
            "recency_weight": 0.2,
            "confidence_weight": 0.2,
            "half_life_semantic": 120.0,
            **changes,
        },
    )


def _as_before(rows: Any) -> list[tuple[Any, ...]]:
    return [
        (
            row["id"],
            {key: row[key] for key in row if key != "embedding"},
            None if row["embedding"] is None else Vector.from_binary(row["embedding"]).to_list(),
        )
        for row in rows
    ]


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"fusion": "linear", "recency_weight": 0.0},
        {
            "window_start": datetime(2020, 1, 1, tzinfo=UTC),
            "window_end": datetime(2100, 1, 1, tzinfo=UTC),
        },
        {"with_embeddings": True, "limit": 30},
        {"use_lexical": False, "pool": 3, "limit": 3},
        {
            "filter": MemoryFilter.build(
                [Owner.user("ada")],
                kinds=["episodic", "semantic"],
                lifecycles=["confirmed"],
                event_after=datetime(2000, 1, 1, tzinfo=UTC),
            )
        },
    ],
)
async def test_the_compiled_read_path_returns_what_the_statement_returns(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    changes: dict[str, Any],
) -> None:
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    query = "Where does Lena live and what tea does she like?"
    params = _params(query, await embedder.embed_query(query), **changes)
    sessionmaker = create_sessionmaker(runtime_engine)

    # One transaction: the same now() for the recency factors of both.
    async with tenant_transaction(sessionmaker, tenant) as session:
        hits = await FusionRepository(session, tenant).search(params)
        statement = hybrid_search_statement(tenant, params)
        rows = (await session.execute(statement)).mappings().all()
        stored: dict[Any, Any] = dict(
            (
                await session.execute(
                    text("SELECT id, embedding::real[] FROM memory WHERE id = ANY(:ids)"),
                    {"ids": [hit.memory.id for hit in hits]},
                )
            ).all()
        )

    assert hits, "the search found nothing to compare"
    assert [hit.memory.id for hit in hits] == [row["id"] for row in rows]
    for hit, (_, columns, embedding) in zip(hits, _as_before(rows), strict=True):
        scores = hit.scores
        assert (
            scores.lexical_rank,
            scores.lexical_score,
            scores.vector_rank,
            scores.vector_cosine,
            scores.fused_score,
            scores.neighbour_score,
            scores.thread_score,
            scores.recency_factor,
            scores.confidence_factor,
            scores.final_score,
        ) == tuple(
            None if columns[name] is None else float(columns[name])
            for name in (
                "lexical_rank",
                "lexical_score",
                "vector_rank",
                "vector_cosine",
                "fused_score",
                "neighbour_score",
                "thread_score",
                "recency_factor",
                "confidence_factor",
                "final_score",
            )
        )
        assert hit.memory.text == columns["text"]
        assert hit.memory.metadata == columns["metadata"]
        assert hit.memory.created_at == columns["created_at"]
        vector = None if hit.embedding is None else hit.embedding.tolist()
        assert vector == embedding
        assert (hit.embedding is not None) == params.with_embeddings
        # The vector the hit carries is the one stored, value for value.
        if hit.embedding is not None:
            assert vector == list(stored[hit.memory.id])


def _sections(query: str, vector: list[float], count: int) -> list[SearchParams]:
    """One search over the user's and the organization's memories, or the context block's
    three sections (the organization's memories, the user's facts, the user's episodes)."""
    if count == 1:
        return [_params(query, vector)]
    filters = [
        MemoryFilter.build([Owner.org()]),
        MemoryFilter.build([Owner.user("ada")], kinds=["semantic"]),
        MemoryFilter.build([Owner.user("ada")], kinds=["episodic"]),
    ]
    return [replace(_params(query, vector), filter=each) for each in filters]


@pytest.mark.parametrize("sections", [1, 3])
async def test_a_search_runs_on_its_generic_plan_and_leaves_the_planner_as_configured(
    app: FastAPI, client: AsyncClient, settings: Settings, sections: int
) -> None:
    """Left to choose, PostgreSQL plans a new prepared statement for its values (a custom plan)
    at least five times, and for this statement it keeps doing so: the search forces the
    generic plan for itself only.

    The statement is prepared once per connection however long its text: the context's three
    sections make ~21 KiB, more than asyncpg keeps prepared by default (15 KiB), and an
    unprepared statement is parsed and planned again on every call."""
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    query = "Where does Lena live?"
    params = _sections(query, await embedder.embed_query(query), sections)
    plans = text(
        "SELECT count(*), coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0),"
        "       max(length(statement)),"
        "       (SELECT array_agg(DISTINCT each::text) FROM unnest(array_agg(parameter_types))"
        "            AS each)"
        "  FROM pg_prepared_statements"
        " WHERE statement LIKE '%WITH query_terms AS%' AND statement NOT LIKE '%pg_prepared%'"
    )

    # A connection of its own: every plan it makes for a fusion statement is counted here, and
    # under `auto` the first five executions of a new prepared statement are custom plans.
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), settings, pool_size=1)
    try:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            for _ in range(3):
                found = await FusionRepository(session, tenant).search_sections(params)
                assert any(found)
            prepared, generic, custom, length, parameter_types = (
                await session.execute(plans)
            ).one()
            planner = await session.scalar(text("SELECT current_setting('plan_cache_mode')"))
    finally:
        await engine.dispose()

    assert (prepared, generic, custom) == (1, 3, 0)
    assert planner == "auto"
    if sections == 3:
        assert length > 15 * 1024
    # The question's vector travels as a float array (binary), not as pgvector's text.
    assert "real[]" in parameter_types
    assert "vector" not in parameter_types


Search = Callable[[AsyncSession], Awaitable[list[str]]]
"""A search run in a session: the texts it found, best first."""


def _through_the_repository(tenant: str, params: SearchParams) -> Search:
    async def search(session: AsyncSession) -> list[str]:
        [found] = await FusionRepository(session, tenant).search_sections([params])
        return [row.memory.text for row in found]

    return search


async def _sent_by_a_search(
    settings: Settings, tenant: str, search: Search
) -> tuple[list[str], list[str]]:
    """The queries a request's transaction that runs `search` sends, on a connection that has
    searched before, and what the search found."""
    assert settings.database_url is not None
    engine = create_engine(
        settings.database_url.get_secret_value(), settings, pool_size=1, max_overflow=0
    )
    sessionmaker = create_sessionmaker(engine)
    try:
        # The connection's first search asks what the server runs and learns the types.
        async with tenant_transaction(sessionmaker, tenant) as session:
            await search(session)
        async with engine.connect() as connection:
            sent = await sent_queries(connection)
        async with tenant_transaction(sessionmaker, tenant) as session:
            found = await search(session)
    finally:
        await engine.dispose()
    return sent, found


async def test_a_search_as_a_transactions_last_statement_restores_no_setting(
    app: FastAPI, client: AsyncClient, settings: Settings
) -> None:
    """A request's search is usually its last statement: the transaction commits, which ends
    the search's plan settings with it, and restoring them first would be a round trip for
    nothing. Two round trips besides BEGIN and COMMIT: the question about the search's owners,
    which makes the generic plan's setting, and the statement."""
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    query = "Where does Lena live?"
    params = _params(query, await embedder.embed_query(query))
    sent, found = await _sent_by_a_search(settings, tenant, _through_the_repository(tenant, params))
    assert "Lisbon" in found[0]
    assert [query[:40] for query in sent] == [
        f"BEGIN; SET LOCAL app.tenant_id = '{tenant}';"[:40],
        OWNERS_QUESTION[:40],
        "\nWITH query_terms AS (\n    -- An OR over",
        "COMMIT;",
    ]
    assert not any("plan_cache_mode TO DEFAULT" in query for query in sent)


async def test_a_counted_owner_without_indexes_of_its_own_is_sorted_exactly_on_the_generic_plan(
    app: FastAPI, client: AsyncClient, settings: Settings
) -> None:
    """However large an owner is counted, without vector indexes of its own its nearest vectors
    are sorted exactly, in every section, on the generic plan the question about the owners
    set: no other setting is sent, and no scan is in the order a graph would serve (the memory
    table has none of its own)."""
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    query = "Where does Lena live?"
    params = _params(query, await embedder.embed_query(query), bounded_from=1)
    sections = [
        replace(params, filter=MemoryFilter.build([owner]))
        for owner in (Owner.user("ada"), Owner.org())
    ]
    await count_statistics(app, tenant, Owner.user("ada"))

    async def search(session: AsyncSession) -> list[str]:
        found = await FusionRepository(session, tenant).search_sections(sections)
        return [row.memory.text for rows in found for row in rows]

    sent, found = await _sent_by_a_search(settings, tenant, search)
    assert "Lisbon" in found[0]
    assert sum(query.startswith(OWNERS_QUESTION) for query in sent) == 1
    assert not [query for query in sent if query.startswith("SET LOCAL")]
    [statement] = [query for query in sent if query.startswith("\nWITH query_terms")]
    assert nearest_orders(statement) == [("0", "exact"), ("1", "exact")]


async def test_a_search_whose_vector_has_arrived_sets_its_plan_with_the_statement(
    app: FastAPI, client: AsyncClient, settings: Settings
) -> None:
    """A question asked before has its vector at once (the cache): nothing to overlap, so the
    question about the search's owners, which makes the generic plan's setting, goes with the
    search; a small owner's search needs no other setting."""
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    question = "Where does Lena live?"
    vector = await embedder.embed_query(question)

    async def search(session: AsyncSession) -> list[str]:
        arrived: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
        arrived.set_result(vector)
        response = await MemorySearch(
            FusionRepository(session, tenant), app.state.mneme.vector_columns, tenant, settings
        ).search(
            Owner.user("ada"), SearchRequest(query=question, limit=3), embedding_question=arrived
        )
        return [hit.memory.text for hit in response.hits]

    sent, found = await _sent_by_a_search(settings, tenant, search)
    assert "Lisbon" in found[0]
    [setting] = [query for query in sent if "plan_cache_mode" in query]
    assert setting.startswith(OWNERS_QUESTION)
    assert not [query for query in sent if query.startswith("SET LOCAL")]


async def test_the_search_plans_for_itself_while_its_question_is_still_embedded(
    app: FastAPI, client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine
) -> None:
    """The question about the search's owners and the generic-plan setting are one round trip:
    made while the vector is on its way, it is not on the search's path once the vector
    arrives, and not asked again."""
    tenant = await _tenant_with_texts(client, settings)
    embedder = app.state.mneme.embedding_backfill.embedder
    question = "Where does Lena live?"
    vector = await embedder.embed_query(question)
    last_query = text("SELECT state, query FROM pg_stat_activity WHERE pid = :pid")

    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        backend = await session.scalar(text("SELECT pg_backend_pid()"))
        sent = await sent_queries(await session.connection())
        search = MemorySearch(
            FusionRepository(session, tenant), app.state.mneme.vector_columns, tenant, settings
        )
        on_its_way: asyncio.Future[list[float] | None] = asyncio.get_running_loop().create_future()
        searching: asyncio.Future[SearchResponse] = asyncio.ensure_future(
            search.search(
                Owner.user("ada"),
                SearchRequest(query=question, limit=3),
                embedding_question=on_its_way,
            )
        )
        async with runtime_engine.connect() as observer:
            # Up to 30 s for the setting to arrive: on a loaded machine the search task may
            # wait seconds for its turn (nothing here measures time; the vector never comes
            # until the setting has been seen). Each look is a transaction of its own: within
            # one, PostgreSQL answers every read of pg_stat_activity from its first.
            for _ in range(3000):
                state, query = (await observer.execute(last_query, {"pid": backend})).one()
                await observer.rollback()
                if state == "idle in transaction" and "plan_cache_mode" in query:
                    break
                await asyncio.sleep(0.01)
        assert not searching.done()
        assert query.startswith(OWNERS_QUESTION)
        on_its_way.set_result(vector)
        response = await searching
    assert sum(each.startswith(OWNERS_QUESTION) for each in sent) == 1
    assert response.query_embedded
    assert "Lisbon" in response.hits[0].memory.text
