"""The raw baseline is the service's own statement with the service's own parameters: run
straight on asyncpg it ranks exactly what the HTTP API returns."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import numpy as np
import pytest
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.bulk import BulkLoader, BulkLoadRefused, BulkSettings
from benchmarks.corpus import Corpus, CorpusShape, build_pool
from benchmarks.rawsql import (
    EXACT,
    NEVER_BOUNDED,
    FusionStatement,
    Variant,
    _as_the_service,
    asyncpg_connection,
    exact_search_statement,
    service_search_params,
)
from service.auth.owner import Owner
from service.config import Settings
from service.memories.filters import MemoryFilter
from service.memories.fusion import HYBRID_SEARCH_SQL, hybrid_search_statement
from service.memories.schemas import SearchRequest
from service.providers import Embedder, build_embedder, embedder_config_from_settings
from tests.conftest import bearer
from tests.memories.large_owners import TABLE_GRAPHS_SQL
from tests.search_params import search_params

MEMORIES = [
    "Prefers green tea in the morning and usually has 3 cups before noon.",
    "The user's sister Lena lives in Porto and works as a nurse.",
    "On 4 March 2024 the user flew to Osaka for a conference talk with Marco.",
    "Is allergic to shellfish and carries an antihistamine when travelling.",
    "Plays tennis with friends from Northwind on Tuesday nights.",
]

QUESTION = "What does the user like to drink in the morning?"


@pytest.fixture
async def embedder(settings: Settings) -> AsyncIterator[Embedder]:
    built = build_embedder(embedder_config_from_settings(settings))
    yield built
    await built.aclose()


async def test_the_parameters_are_those_the_service_builds_for_the_request(
    settings: Settings,
) -> None:
    params = await service_search_params(
        settings, "t-x", "alice", SearchRequest(query=QUESTION, limit=10), [0.1] * 384
    )

    assert params.filter.owners == (Owner.user("alice"), Owner.org())
    assert params.use_lexical and params.use_vector
    assert params.pool == settings.search_candidate_pool
    assert params.limit == 10
    assert params.rrf_k == settings.search_rrf_k
    assert params.recency_weight == settings.search_recency_weight
    assert params.filter.lifecycles == ("proposed", "confirmed")
    assert params.query_embedding == [0.1] * 384


async def test_the_statement_is_the_repositorys_with_positional_arguments(
    settings: Settings, runtime_engine: AsyncEngine
) -> None:
    statement = FusionStatement(runtime_engine.dialect)
    params = await service_search_params(
        settings, "t-x", "alice", SearchRequest(query=QUESTION, mode="vector"), [0.25] * 384
    )

    arguments = statement.arguments("t-x", params)

    assert ":tenant_id" not in statement.sql and "m.tenant_id = $" in statement.sql
    # Same statement, every named parameter now a positional one, nothing else changed.
    assert statement.sql.count("WITH query_terms AS") == HYBRID_SEARCH_SQL.count(
        "WITH query_terms AS"
    )
    assert "t-x" in arguments and ["alice"] in arguments and QUESTION in arguments
    # The question's vector as a float array (the statement casts it to a vector).
    assert [0.25] * 384 in arguments
    assert len(arguments) == len(set(re.findall(r"\$(\d+)", statement.sql)))
    assert statement.text(EXACT) != statement.sql
    assert statement.text(EXACT).endswith(statement.sql)


async def test_the_statement_on_asyncpg_ranks_what_the_api_returns(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    embedder: Embedder,
) -> None:
    headers = bearer(settings, tenant, "svc", service=True)
    response = await client.post(
        "/v1/users/alice/memories/batch",
        headers=headers,
        json={"items": [{"text": text} for text in MEMORIES]},
    )
    assert response.status_code == 201, response.text
    stored = {item["text"]: item["id"] for item in response.json()["items"]}
    response = await client.post(
        "/v1/users/alice/memories/search", headers=headers, json={"query": QUESTION, "limit": 3}
    )
    assert response.status_code == 200, response.text
    api_ids = [hit["memory"]["id"] for hit in response.json()["hits"]]

    statement = FusionStatement(runtime_engine.dialect)
    params = await service_search_params(
        settings,
        tenant,
        "alice",
        SearchRequest(query=QUESTION, limit=3),
        await embedder.embed_query(QUESTION),
    )
    arguments = statement.arguments(tenant, params)
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        raw_ids = [str(i) for i in await statement.ids(driver, tenant, arguments)]
        exact_ids = [str(i) for i in await statement.ids(driver, tenant, arguments, EXACT)]
        planned = await statement.explain(driver, tenant, arguments)
        exact = await statement.explain(driver, tenant, arguments, EXACT)
        table_graphs = await driver.fetch(TABLE_GRAPHS_SQL)
        # Under row-level security another tenant's transaction sees none of these memories.
        assert await statement.ids(driver, tenant + "-other", arguments) == []

    assert stored[MEMORIES[0]] in api_ids
    assert raw_ids == api_ids
    # An owner without indexes of its own has its vectors sorted exactly, as planned too: the
    # memory table has no vector graph of its own to walk, and neither plan reads one.
    assert exact_ids == raw_ids
    assert table_graphs == []
    assert planned.scans and exact.scans
    assert not any(planned.uses(name) or exact.uses(name) for name in ("hnsw", "ix_memory_owner_"))


async def test_the_bulk_path_refuses_a_role_under_row_level_security(
    runtime_engine: AsyncEngine,
) -> None:
    loader = BulkLoader(
        runtime_engine,
        Corpus(CorpusShape(2, 1, 0, 1), build_pool(4, 1)),
        np.eye(4, 384, dtype=np.float32),
        BulkSettings(1, 0.1, "model"),
    )

    with pytest.raises(BulkLoadRefused, match="BYPASSRLS"):
        await loader.check_privileges()
    # The connection it changed (vector codec, no timeout) never went back to the pool.
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        assert await driver.fetchval("SHOW statement_timeout") == "15s"
        assert await driver.fetchval("SELECT CAST($1 AS vector)::text", "[1,2]") == "[1,2]"


def test_the_exact_reference_never_takes_the_bounded_lexical_path() -> None:
    """However low the search's own threshold, the reference scores every matching memory."""
    params = search_params(MemoryFilter.build([Owner.user("ada")]), "tea", bounded_from=1)
    bound = exact_search_statement("t-1", params).compile().params
    assert bound["bounded_from"] == NEVER_BOUNDED
    assert hybrid_search_statement("t-1", params).compile().params["bounded_from"] == 1


async def test_a_variants_settings_come_after_those_the_service_made_for_the_search(
    runtime_engine: AsyncEngine, tenant: str
) -> None:
    """A variant changes what the service's search set for its owners (the candidate list of a
    walk of their own indexes, say), so its settings are made last."""
    variant = Variant("smaller", ("SET LOCAL work_mem = '2MB'",))
    planned = ("SET LOCAL work_mem = '8MB'",)
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        async with _as_the_service(driver, tenant, variant, planned) as generic_plan:
            work_mem = await driver.fetchval("SHOW work_mem")
            plan_cache_mode = await driver.fetchval("SHOW plan_cache_mode")
            scoped_to = await driver.fetchval("SELECT current_setting('app.tenant_id')")
        async with _as_the_service(driver, tenant, Variant("none", ()), planned):
            planned_work_mem = await driver.fetchval("SHOW work_mem")

    assert generic_plan and plan_cache_mode == "force_generic_plan"
    assert scoped_to == tenant
    assert work_mem == "2MB"
    assert planned_work_mem == "8MB"
