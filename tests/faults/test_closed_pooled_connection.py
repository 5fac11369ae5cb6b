"""The pool hands out connections without pinging them (`db_pool_pre_ping` off): a request
whose pooled connection the server has closed meanwhile (a restart, an idle timeout, an
administrator) starts its transaction again on a new connection instead of failing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.embedded_postgres import SUPERUSER, EmbeddedCluster
from service.main import create_app
from tests.conftest import TEST_DATABASE, bearer, new_tenant


@pytest.fixture
async def own_app(settings: Settings) -> AsyncIterator[FastAPI]:
    # An app of its own: the test closes its pooled connections from the server side.
    # One connection in the pool, so every request gets the one the test closes.
    application = create_app(
        settings.model_copy(
            update={"db_pool_pre_ping": False, "db_pool_size": 1, "db_max_overflow": 0}
        )
    )
    async with LifespanManager(application):
        yield application


async def _pooled_backend(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int(await connection.scalar(text("SELECT pg_backend_pid()")))


async def test_a_request_on_a_connection_the_server_closed_succeeds_on_a_new_one(
    own_app: FastAPI, cluster: EmbeddedCluster
) -> None:
    engine: AsyncEngine = own_app.state.mneme.engine
    settings: Settings = own_app.state.mneme.settings
    headers = bearer(settings, new_tenant(), "ada")
    async with AsyncClient(transport=ASGITransport(app=own_app), base_url="http://t") as client:
        created = await client.post(
            "/v1/users/me/memories", json={"text": "Likes tea"}, headers=headers
        )
        assert created.status_code == 201, created.text
        closed = await _pooled_backend(engine)
        admin = await asyncpg.connect(
            host=str(cluster.socket_dir), user=SUPERUSER, database=TEST_DATABASE
        )
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 10000)", closed)
        finally:
            await admin.close()

        searched = await client.post(
            "/v1/users/me/memories/search", json={"query": "tea"}, headers=headers
        )

        assert searched.status_code == 200, searched.text
        assert [hit["memory"]["text"] for hit in searched.json()["hits"]] == ["Likes tea"]
        assert await _pooled_backend(engine) != closed
