"""Fixtures for the `citus` marker: the same service and raw SQL against a Citus cluster.

The cluster comes from `deploy/citus/cluster.sh start` (which `.ci/run` runs); its URLs reach
the tests through the variables `deploy/citus/cluster.sh urls` prints. Without them every test
here is skipped with that instruction. Deselected from the default `pytest` run (pyproject's
`-m "not citus"`); run them with `pytest -m citus`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import as_async_url, create_engine
from service.main import create_app
from tests.conftest import TEST_SECRET

URL_VARIABLES = ("MNEME_CITUS_APP_URL", "MNEME_CITUS_OWNER_URL")


@pytest.fixture(scope="session")
def citus_urls() -> dict[str, str]:
    missing = [name for name in URL_VARIABLES if not os.environ.get(name)]
    if missing:
        pytest.skip(
            f"no Citus cluster ({', '.join(missing)} unset): run deploy/citus/build.sh and "
            "deploy/citus/cluster.sh start, then export $(deploy/citus/cluster.sh urls)"
        )
    return {name: os.environ[name] for name in URL_VARIABLES}


@pytest.fixture(scope="session")
def citus_settings(citus_urls: dict[str, str]) -> Settings:
    return Settings(
        _env_file=None,
        database_url=SecretStr(citus_urls["MNEME_CITUS_APP_URL"]),
        migration_database_url=SecretStr(citus_urls["MNEME_CITUS_OWNER_URL"]),
        jwt_hs256_secret=SecretStr(TEST_SECRET),
        rate_limit_default="10000/minute",
        db_pool_size=5,
        jobs_enabled=False,
    )


@pytest.fixture(scope="session")
async def citus_app(citus_settings: Settings) -> AsyncIterator[FastAPI]:
    # The lifespan runs the migrations against the coordinator: at head already, this proves
    # Alembic reads and locks its version table there.
    application = create_app(citus_settings)
    async with LifespanManager(application):
        yield application


@pytest.fixture
async def citus_client(citus_app: FastAPI) -> AsyncIterator[AsyncClient]:
    transport = ASGITransport(app=citus_app)
    async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
        yield client


@pytest.fixture(scope="session")
async def citus_runtime_engine(citus_settings: Settings) -> AsyncIterator[AsyncEngine]:
    assert citus_settings.database_url is not None
    url = as_async_url(citus_settings.database_url.get_secret_value())
    engine = create_engine(url, citus_settings, pool_size=2)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
async def citus_owner_engine(citus_urls: dict[str, str]) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(
        as_async_url(citus_urls["MNEME_CITUS_OWNER_URL"]), Settings(_env_file=None), pool_size=2
    )
    yield engine
    await engine.dispose()
