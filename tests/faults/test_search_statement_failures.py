"""The fusion statement runs on the asyncpg connection itself (`service.db.transaction_driver`),
so its failures arrive as the driver's own errors, not SQLAlchemy's. They must still be the same
problems: a statement past its time limit is a 503 `DATABASE_TIMEOUT`, a connection lost in the
middle of it a 503 `DATABASE_UNAVAILABLE`, and the next search works.

The search is held at the statement by an ACCESS EXCLUSIVE lock on `memory` that another
transaction holds: the statement waits for it, which is real time spent inside the statement.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from service.config import Settings
from service.embedded_postgres import SUPERUSER, EmbeddedCluster
from service.main import create_app
from tests.conftest import TEST_DATABASE, assert_problem, bearer, make_settings, new_tenant

BLOCKED_SEARCH_SQL = """
SELECT pid FROM pg_stat_activity
 WHERE usename = 'mneme_app' AND wait_event_type = 'Lock' AND query LIKE '%query_terms%'
"""
"""The backend of a search waiting for the lock (the fusion statement opens with `query_terms`).
Asked as the superuser: other roles see neither another role's statement nor may end it."""


@pytest.fixture
async def short_timeout_client(
    cluster: EmbeddedCluster, base_settings: Settings
) -> AsyncIterator[AsyncClient]:
    """An app whose statements may run for 1.5 s (`base_settings`: the schema is migrated).

    The limit binds every statement of a request, the first search's planning on a cold backend
    included, which took over 300 ms on a loaded 2-core machine. The locked search waits the
    whole limit, so it stays short."""
    application = create_app(make_settings(cluster, db_statement_timeout_ms=1_500))
    async with LifespanManager(application):
        transport = ASGITransport(app=application)
        async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
            yield client


async def _search(client: AsyncClient, headers: dict[str, str]) -> Response:
    return await client.post(
        "/v1/users/ada/memories/search", json={"query": "where does ada live"}, headers=headers
    )


async def _lock_memories(owner: AsyncConnection) -> None:
    await owner.execute(text("LOCK TABLE memory IN ACCESS EXCLUSIVE MODE"))


async def test_a_search_past_the_statement_timeout_is_a_503_and_the_next_one_works(
    short_timeout_client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, new_tenant(), "svc", service=True)
    assert (await _search(short_timeout_client, headers)).status_code == 200
    async with owner_engine.connect() as owner:
        await _lock_memories(owner)
        response = await _search(short_timeout_client, headers)
        await owner.rollback()
    body = assert_problem(response, 503, "DATABASE_TIMEOUT")
    assert int(response.headers["Retry-After"]) >= 1
    assert "statement time limit" in body["detail"]
    again = await _search(short_timeout_client, headers)
    assert again.status_code == 200, again.text


async def test_a_search_whose_connection_dies_mid_statement_is_a_503_and_the_next_one_works(
    client: AsyncClient, cluster: EmbeddedCluster, settings: Settings, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, new_tenant(), "svc", service=True)
    assert (await _search(client, headers)).status_code == 200
    admin = await asyncpg.connect(
        host=str(cluster.socket_dir), user=SUPERUSER, database=TEST_DATABASE
    )
    try:
        async with owner_engine.connect() as owner:
            await _lock_memories(owner)
            searching = asyncio.create_task(_search(client, headers))
            blocked: list[int] = []
            for _ in range(200):
                blocked = [row["pid"] for row in await admin.fetch(BLOCKED_SEARCH_SQL)]
                if blocked:
                    break
                await asyncio.sleep(0.025)
            assert len(blocked) == 1, "the search never reached its statement"
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", blocked[0])
            response = await searching
            await owner.rollback()
    finally:
        await admin.close()
    assert_problem(response, 503, "DATABASE_UNAVAILABLE")
    again = await _search(client, headers)
    assert again.status_code == 200, again.text


async def test_a_listing_past_the_statement_timeout_is_a_503_and_the_next_one_works(
    short_timeout_client: AsyncClient, settings: Settings, owner_engine: AsyncEngine
) -> None:
    """A page of memories is planned with settings of its own (`planned_for_its_values`), set
    before its statement and reset after it: when the statement is cancelled, the transaction
    is aborted and a reset sent then would fail in its place, a 500 hiding the 503."""
    headers = bearer(settings, new_tenant(), "ada")
    listing = "/v1/users/me/memories"
    assert (await short_timeout_client.get(listing, headers=headers)).status_code == 200
    async with owner_engine.connect() as owner:
        await _lock_memories(owner)
        response = await short_timeout_client.get(listing, headers=headers)
        await owner.rollback()
    assert_problem(response, 503, "DATABASE_TIMEOUT")
    again = await short_timeout_client.get(listing, headers=headers)
    assert again.status_code == 200, again.text
