"""Shared fixtures: one embedded Postgres per test session, schema built by the migrations.

Tests isolate themselves by using fresh random tenant ids rather than by truncating tables,
so they can share one migrated database and stay fast.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.server import RunningServer, loopback_server
from service import db_migrations
from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.db import create_engine, set_tenant
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap, start_cluster
from service.main import create_app

TEST_DATABASE = "mneme_test"
TEST_SECRET = "test-secret-that-is-long-enough-for-hs256-0123456789"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    data_dir: Path = tmp_path_factory.mktemp("pg")
    started = start_cluster(data_dir)
    yield started
    started.stop()


@pytest.fixture(scope="session")
async def base_settings(cluster: EmbeddedCluster) -> Settings:
    await bootstrap(cluster, TEST_DATABASE)
    settings = make_settings(cluster)
    engine = create_engine(settings.migration_url_for_tests, settings, pool_size=1, max_overflow=0)
    try:
        await db_migrations.upgrade(engine, settings)
    finally:
        await engine.dispose()
    return settings


class _TestSettings(Settings):
    @property
    def migration_url_for_tests(self) -> str:
        assert self.migration_database_url is not None
        return self.migration_database_url.get_secret_value()


def make_settings(cluster: EmbeddedCluster, **overrides: Any) -> _TestSettings:
    values: dict[str, Any] = {
        "database_url": SecretStr(cluster.url("mneme_app", TEST_DATABASE)),
        "migration_database_url": SecretStr(cluster.url(OWNER_ROLE, TEST_DATABASE)),
        "jwt_hs256_secret": SecretStr(TEST_SECRET),
        "rate_limit_default": "10000/minute",
        # Tests share one client address; the limit on failed authentications has its own test.
        "auth_failure_limit": "100000/minute",
        "db_pool_size": 5,
        # Apps under test run no job worker unless a test asks for one: a worker of another
        # app sharing the database would otherwise take that test's jobs.
        "jobs_enabled": False,
        # Nor a keeper of the owners' vector indexes: it refreshes as its app starts, and one
        # keeping other thresholds would drop the indexes a test built for its own owner.
        "owner_vector_index_refresh_seconds": 0,
    }
    values.update(overrides)
    return _TestSettings(_env_file=None, **values)


async def database_of_its_own(cluster: EmbeddedCluster, **overrides: Any) -> _TestSettings:
    """Settings (`make_settings`' with `overrides`) for a new database, migrated: for an app that
    runs another embedding model than the shared database's. A database's vector column holds
    one model's vectors, the first app to serve it records which, and every later app serves the
    column with that model whatever it is configured with."""
    name = "mneme_own_" + uuid.uuid4().hex[:8]
    await bootstrap(cluster, name)
    settings = make_settings(
        cluster,
        database_url=SecretStr(cluster.url("mneme_app", name)),
        migration_database_url=SecretStr(cluster.url(OWNER_ROLE, name)),
        **overrides,
    )
    engine = create_engine(settings.migration_url_for_tests, settings, pool_size=1, max_overflow=0)
    try:
        await db_migrations.upgrade(engine, settings)
    finally:
        await engine.dispose()
    return settings


@pytest.fixture(scope="session")
def settings(base_settings: Settings) -> Settings:
    return base_settings


@pytest.fixture(scope="session")
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with LifespanManager(application):
        yield application


@pytest.fixture(scope="session")
async def live_server(settings: Settings) -> AsyncIterator[RunningServer]:
    """One live server (uvicorn on loopback, as `mneme serve` runs it) for every test that
    talks real HTTP to it: the MCP SDK's client, the LangGraph store, the documented examples."""
    async with loopback_server(settings) as server:
        yield server


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(transport=ASGITransport(app=app), base_url="http://mneme.test") as c:
        yield c


@pytest.fixture(scope="session")
async def owner_engine(settings: _TestSettings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings.migration_url_for_tests, settings, pool_size=2)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def runtime_engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), settings, pool_size=2)
    yield engine
    await engine.dispose()


def new_tenant() -> str:
    return "t-" + uuid.uuid4().hex[:12]


@pytest.fixture
def tenant() -> str:
    return new_tenant()


def bearer(
    settings: Settings,
    tenant_id: str,
    user_id: str,
    *,
    admin: bool = False,
    service: bool = False,
    **claims: Any,
) -> dict[str, str]:
    token = mint_dev_token(
        settings,
        tenant_id=tenant_id,
        user_id=user_id,
        admin=admin,
        service=service,
        extra_claims=claims or None,
    )
    return {"Authorization": f"Bearer {token}"}


def assert_problem(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status and stable code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code
    for field in ("type", "title", "detail", "instance"):
        assert isinstance(body[field], str) and body[field]
    return body


def assert_precondition_failed(response: Any, current: str) -> dict[str, Any]:
    """A 412 problem that names the resource's current tag, in its body and its ETag."""
    body = assert_problem(response, 412, "PRECONDITION_FAILED")
    assert response.headers["etag"] == body["current_etag"] == current
    return body


async def as_tenant(connection: Any, tenant_id: str) -> None:
    """Scope a raw test connection's transaction to one tenant, as the service does."""
    await set_tenant(connection, tenant_id)
