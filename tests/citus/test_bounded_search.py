"""A large owner's bounded search on Citus: postings written with the memories on the tenant's
shard, statistics counted by the background job there, and the same ranking as single-node
Postgres gives for the same memories and settings."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.jobs import SEARCH_STATISTICS_JOB
from service.main import create_app
from service.memories.jobs import search_statistics_job
from tests.conftest import bearer, new_tenant
from tests.memories.test_bounded_search import (
    BOUNDED_FROM,
    POSTINGS_PER_LEXEME,
    QUESTIONS,
    corpus,
    remember,
    search_ids,
)

pytestmark = pytest.mark.citus

BOUNDED = {
    "search_bounded_from": BOUNDED_FROM,
    "search_postings_per_lexeme": POSTINGS_PER_LEXEME,
}


@pytest.fixture
async def bounded_citus_app(citus_settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(citus_settings.model_copy(update=BOUNDED))
    async with LifespanManager(application):
        yield application


@pytest.fixture
async def bounded_single_app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings.model_copy(update=BOUNDED))
    async with LifespanManager(application):
        yield application


def _client(app: FastAPI) -> AsyncClient:
    return AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test")


async def _count_statistics(app: FastAPI, engine: AsyncEngine, tenant: str) -> None:
    """Run the tenant's queued statistics jobs with the service's handler (the worker's part)."""
    async with engine.begin() as connection:
        payloads = (
            await connection.execute(
                text(
                    "DELETE FROM pgqueuer WHERE entrypoint = :kind "
                    "AND convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant "
                    "RETURNING convert_from(payload, 'UTF8')::jsonb"
                ),
                {"kind": SEARCH_STATISTICS_JOB, "tenant": tenant},
            )
        ).scalars()
        jobs = [dict(payload) for payload in payloads]
    assert jobs, "the search asked for no statistics"
    for payload in jobs:
        await search_statistics_job(app.state.mneme)(payload)


async def test_a_bounded_search_on_citus_ranks_as_on_single_node_postgres(
    bounded_citus_app: FastAPI,
    bounded_single_app: FastAPI,
    settings: Settings,
    citus_settings: Settings,
    owner_engine: AsyncEngine,
    citus_owner_engine: AsyncEngine,
) -> None:
    tenant = new_tenant()
    texts = corpus(23, 3 * BOUNDED_FROM)
    rankings: list[list[list[str]]] = []
    for app, app_settings, engine in (
        (bounded_single_app, settings, owner_engine),
        (bounded_citus_app, citus_settings, citus_owner_engine),
    ):
        headers = bearer(app_settings, tenant, "ada")
        async with _client(app) as client:
            ids = await remember(client, headers, texts)
            by_id = dict(zip(ids, texts, strict=True))
            await search_ids(client, headers, QUESTIONS[0])
            await _count_statistics(app, engine, tenant)
            async with engine.begin() as connection:
                postings = await connection.execute(
                    text("SELECT count(*) FROM memory_posting WHERE tenant_id = :tenant"),
                    {"tenant": tenant},
                )
                assert postings.scalar_one() > len(texts)
            rankings.append(
                [
                    [by_id[hit] for hit in await search_ids(client, headers, question)]
                    for question in QUESTIONS
                ]
            )
    single, sharded = rankings
    assert all(single), single
    # The same memories score the same; only the order of exact ties (broken by the ids, which
    # each database made itself) may pick another one at the tenth place.
    agreed = sum(len(set(a) & set(b)) for a, b in zip(single, sharded, strict=True))
    assert agreed >= 0.95 * sum(len(a) for a in single)
