"""The job tests get a database of their own.

pgqueuer's tables are shared by every tenant, so a worker sees every job of its kind in its
database; a database of their own keeps the service's worker (and other tests' jobs) out of
these tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service import db_migrations
from service.config import Settings
from service.db import create_engine, create_sessionmaker
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from tests.conftest import make_settings

JOBS_DATABASE = "mneme_jobs_test"


@pytest.fixture(scope="session")
async def jobs_settings(cluster: EmbeddedCluster, base_settings: Settings) -> Settings:
    # base_settings first: it creates the runtime role this database's migrations grant to.
    await bootstrap(cluster, JOBS_DATABASE)
    settings = make_settings(
        cluster,
        database_url=SecretStr(cluster.url("mneme_app", JOBS_DATABASE)),
        migration_database_url=SecretStr(cluster.url(OWNER_ROLE, JOBS_DATABASE)),
        jobs_enabled=True,
    )
    owner = create_engine(settings.migration_url_for_tests, settings, pool_size=1, max_overflow=0)
    try:
        await db_migrations.upgrade(owner, settings)
    finally:
        await owner.dispose()
    return settings


@pytest.fixture(scope="session")
async def jobs_engine(jobs_settings: Settings) -> AsyncIterator[AsyncEngine]:
    assert jobs_settings.database_url is not None
    engine = create_engine(jobs_settings.database_url.get_secret_value(), jobs_settings)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="session")
def jobs_sessions(jobs_engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return create_sessionmaker(jobs_engine)
