"""A large owner's bounded search on Citus: postings written with the memories on the tenant's
shard, statistics counted by the background job there, and the top 10 the exact search gives."""

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
from tests.fixtures.factories import remember_texts
from tests.memories.test_bounded_search import (
    BOUNDED_FROM,
    POSTINGS_PER_LEXEME,
    QUESTIONS,
    assert_narrowed_searches_find_them,
    corpus,
    remember_preferences_below_the_top,
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


def _client(app: FastAPI) -> AsyncClient:
    return AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test")


async def _count_statistics(app: FastAPI, engine: AsyncEngine, tenant: str) -> None:
    """Run the tenant's queued statistics jobs with the service's handler (the worker's part),
    once the app has queued them (after the search's commit, in the background)."""
    await app.state.mneme.background.drain()
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


async def test_a_bounded_search_on_citus_ranks_as_the_exact_search_does(
    bounded_citus_app: FastAPI,
    citus_client: AsyncClient,
    citus_settings: Settings,
    citus_owner_engine: AsyncEngine,
) -> None:
    tenant = new_tenant()
    headers = bearer(citus_settings, tenant, "ada")
    texts = corpus(23, 3 * BOUNDED_FROM)
    async with _client(bounded_citus_app) as bounded:
        await remember_texts(bounded, headers, texts)
        exact = [await search_ids(citus_client, headers, question) for question in QUESTIONS]
        await search_ids(bounded, headers, QUESTIONS[0])
        await _count_statistics(bounded_citus_app, citus_owner_engine, tenant)
        async with citus_owner_engine.begin() as connection:
            counts = await connection.execute(
                text(
                    "SELECT (SELECT count(*) FROM memory_posting WHERE tenant_id = :tenant), "
                    "(SELECT documents FROM memory_owner_stats WHERE tenant_id = :tenant)"
                ),
                {"tenant": tenant},
            )
            postings, documents = counts.one()
        assert postings > len(texts)
        assert documents == len(texts)
        found = [await search_ids(bounded, headers, question) for question in QUESTIONS]
    assert all(exact), exact
    agreed = sum(len(set(a) & set(b)) for a, b in zip(exact, found, strict=True))
    assert agreed >= 0.9 * sum(len(a) for a in exact)


async def test_a_filter_few_memories_pass_is_searched_exactly_on_citus(
    bounded_citus_app: FastAPI,
    citus_client: AsyncClient,
    citus_settings: Settings,
    citus_owner_engine: AsyncEngine,
) -> None:
    """The owner's memories that a category, a window or a lifecycle passes sit below the top
    of the word's postings: the bounded search counts them on the tenant's shard and searches
    them exactly, as the exact search does."""
    tenant = new_tenant()
    headers = bearer(citus_settings, tenant, "ada")
    async with _client(bounded_citus_app) as bounded:
        preferences = await remember_preferences_below_the_top(bounded, headers)
        await search_ids(bounded, headers, "marimba")
        await _count_statistics(bounded_citus_app, citus_owner_engine, tenant)
        await assert_narrowed_searches_find_them(citus_client, bounded, headers, preferences)
