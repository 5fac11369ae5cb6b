"""A large owner's own vector index (of its facts) on Citus: built concurrently on every shard
of the memory table by the owner role; the owner's searches answer alike with it and without it
(whether a worker reads it is the worker planner's choice by cost: a 60-memory owner's vectors
are sorted); dropped again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from service.memories.fusion.statement import owner_literal
from service.memories.owner_index_names import owner_index_name
from service.memories.owner_indexes import OwnerIndexes
from tests.conftest import bearer, new_tenant
from tests.fixtures.apps import app_client, running_app
from tests.fixtures.factories import remember_texts
from tests.memories.large_owners import count_statistics, own_indexes_found
from tests.memories.test_bounded_search import corpus
from tests.search_params import search_params

pytestmark = pytest.mark.citus

BUILD_FROM = 40
QUESTION = "what does the user like to play"


@pytest.fixture
async def indexed_citus_app(citus_settings: Settings) -> AsyncIterator[FastAPI]:
    async with running_app(
        citus_settings,
        search_bounded_from=BUILD_FROM,
        owner_vector_index_from=BUILD_FROM,
        owner_vector_index_refresh_seconds=0,
    ) as application:
        yield application


FILTERS: tuple[dict[str, object], ...] = (
    {"categories": ["travel"]},
    {"event_after": "1970-01-01T00:00:00Z"},
)
"""A filter few of the owner's facts pass (sorted exactly) and one all pass (walked)."""


async def _search(
    app: FastAPI, headers: dict[str, str], conditions: dict[str, object] | None = None
) -> list[str]:
    async with app_client(app) as client:
        response = await client.post(
            "/v1/users/me/memories/search",
            headers=headers,
            json={"query": QUESTION, "limit": 10, "mode": "hybrid", **(conditions or {})},
        )
    assert response.status_code == 200, response.text
    return [hit["memory"]["id"] for hit in response.json()["hits"]]


async def test_an_owner_index_on_citus_is_on_every_shard_and_serves_the_owners_search(
    indexed_citus_app: FastAPI, citus_settings: Settings, citus_owner_engine: AsyncEngine
) -> None:
    tenant = new_tenant()
    headers = bearer(citus_settings, tenant, "ada")
    async with app_client(indexed_citus_app) as client:
        await remember_texts(client, headers, corpus(31, 60))
        await remember_texts(
            client,
            headers,
            ["User flew to Lisbon in May", "User plans a rail trip through the Alps"],
            category="travel",
        )
    await count_statistics(indexed_citus_app, tenant, Owner.user("ada"))
    name = owner_index_name(tenant, Owner.user("ada").key, "embedding", "semantic")
    indexes = OwnerIndexes(citus_owner_engine, build_from=BUILD_FROM, most=1_000)
    try:
        # A recount of the owner (its 62 memories, past the threshold) finds its facts' index
        # missing and asks for a refresh; once it is built, the next asks for none.
        assert await indexes.build_soon_if_wanted(tenant, Owner.user("ada"), 62)
        report = await indexes.refresh()
        assert name in [index.name for index in report.built + report.kept]
        assert not await indexes.build_soon_if_wanted(tenant, Owner.user("ada"), 62)
        async with citus_owner_engine.connect() as connection:
            shards = (
                await connection.execute(
                    text(
                        "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'memory'::regclass"
                    )
                )
            ).scalar_one()
            on_workers = (
                await connection.execute(
                    text(
                        "SELECT sum(result::int) FROM run_command_on_workers($$SELECT count(*) "
                        "FROM pg_indexes WHERE indexname LIKE '" + name + "\\_%'$$)"
                    )
                )
            ).scalar_one()
        # One copy per shard (named after it), besides the shell table's on each worker.
        assert on_workers == shards

        with_index = [await _search(indexed_citus_app, headers) for _ in range(2)]
        # Each search finds the user's index of its facts before its statement (two queries:
        # the owners' counts on the tenant's shard, the index in the coordinator's catalog)
        # and runs the statement with the owner written in and its facts scanned apart, which
        # the index serves.
        key = Owner.user("ada").key
        owners = (Owner.user("ada"), Owner.org())
        assert await own_indexes_found(indexed_citus_app, tenant, owners) == {f"semantic:{key}"}
        async with tenant_transaction(indexed_citus_app.state.mneme.sessionmaker, tenant) as s:
            await FusionRepository(s, tenant).search(
                search_params(
                    MemoryFilter.build([Owner.user("ada"), Owner.org()]),
                    QUESTION,
                    bounded_from=BUILD_FROM,
                )
            )
            driver = await transaction_driver(await s.connection())
            written = await driver.fetchval(
                "SELECT count(*) FROM pg_prepared_statements "
                "WHERE strpos(statement, $1) > 0 AND strpos(statement, $2) > 0",
                f"m.user_id IN ({owner_literal('ada')})",
                "AND m.kind = E'semantic'\n ORDER BY m.embedding <=> ",
            )
        assert written == 1
        # Filtered searches run the count of what passes, and the exact sort or the walk, on
        # the shards too.
        filtered = [await _search(indexed_citus_app, headers, each) for each in FILTERS]

        # Built again with other graph settings: beside the old one, then renamed to its name
        # on the coordinator and on every shard.
        replaced = await OwnerIndexes(
            citus_owner_engine, build_from=BUILD_FROM, most=1_000, ef_construction=64
        ).refresh()
        assert name in [index.name for index in replaced.rebuilt]
        async with citus_owner_engine.connect() as connection:
            shard_indexes = (
                await connection.execute(
                    text(
                        "SELECT result FROM run_command_on_workers($$SELECT string_agg("
                        "indexname || ' ' || indexdef, E'\\n') FROM pg_indexes "
                        "WHERE indexname LIKE '" + name + "\\_%'$$)"
                    )
                )
            ).scalars()
            lines = "\n".join(result or "" for result in shard_indexes).splitlines()
        # One per shard as before, named after the owner's index and with the new settings;
        # no `_next` or `_prev` copy left on any worker.
        assert len(lines) == shards
        assert all("ef_construction='64'" in line for line in lines)
        assert not [line for line in lines if "_next" in line or "_prev" in line]
        with_index.append(await _search(indexed_citus_app, headers))
    finally:
        await OwnerIndexes(citus_owner_engine, build_from=0, most=0).refresh()
    without_index = await _search(indexed_citus_app, headers)

    assert with_index[0] == with_index[1] == with_index[2] == without_index
    assert len(without_index) == 10
    assert filtered == [await _search(indexed_citus_app, headers, each) for each in FILTERS]
    assert [len(each) for each in filtered] == [2, 10]
