"""On Citus the workers run a search's statements with the service's own settings: no JIT, and
pgvector's walk as configured. A connection's start-up parameters stay on the coordinator, so
the service sends them as `SET LOCAL` with every BEGIN, which Citus forwards to each worker the
transaction reaches (`citus.propagate_set_commands = 'local'`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import as_async_url, create_engine, create_sessionmaker, tenant_transaction
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_texts

pytestmark = pytest.mark.citus

WORKER_SETTINGS_SQL = text(
    """
SELECT current_setting('jit') AS jit,
       current_setting('hnsw.iterative_scan') AS iterative_scan,
       current_setting('hnsw.max_scan_tuples') AS max_scan_tuples,
       current_setting('hnsw.ef_search') AS ef_search,
       (SELECT setting FROM pg_settings WHERE name = 'port') AS port
  FROM memory
 WHERE tenant_id = :tenant_id
 LIMIT 1
"""
)
"""The settings in force where one of the tenant's rows is read: a router query, run on the
worker holding the tenant's shard (its port tells which node answered)."""


@pytest.fixture
async def unusual_engine(citus_settings: Settings) -> AsyncIterator[AsyncEngine]:
    """The service's engine with settings no node of the cluster has as its own
    (`deploy/citus/cluster.sh` configures the nodes with strict order, a candidate list of 100
    and the default limit of tuples)."""
    settings = citus_settings.model_copy(
        update={
            "hnsw_iterative_scan": "relaxed_order",
            "hnsw_max_scan_tuples": 12_345,
            "owner_vector_index_ef_search": 234,
        }
    )
    assert settings.database_url is not None
    url = as_async_url(settings.database_url.get_secret_value())
    engine = create_engine(url, settings, pool_size=1)
    yield engine
    await engine.dispose()


async def test_the_workers_run_a_tenants_statements_with_the_services_settings(
    citus_client: AsyncClient, citus_settings: Settings, unusual_engine: AsyncEngine
) -> None:
    tenant = new_tenant()
    await remember_texts(citus_client, bearer(citus_settings, tenant, "ada"), ["I play chess"])
    async with tenant_transaction(create_sessionmaker(unusual_engine), tenant) as session:
        row = (await session.execute(WORKER_SETTINGS_SQL, {"tenant_id": tenant})).one()
    assert row.port != "9700", "answered by the coordinator, not a worker"
    assert row.jit == "off"
    assert row.iterative_scan == "relaxed_order"
    assert row.max_scan_tuples == "12345"
    # The owners' own graphs' candidate list: the only vector indexes a search reads there.
    assert row.ef_search == "234"


async def test_the_workers_walk_owners_graphs_with_twice_the_candidate_pool_at_least(
    citus_client: AsyncClient, citus_settings: Settings
) -> None:
    """A search with the whole candidate pool on its vector side (RRF, or a vector-mode
    search) walks a list of twice that, whatever the configured least: the workers get one
    list with BEGIN, before a search says what it needs."""
    tenant = new_tenant()
    await remember_texts(citus_client, bearer(citus_settings, tenant, "ada"), ["I play chess"])
    settings = citus_settings.model_copy(
        update={"owner_vector_index_ef_search": 100, "search_candidate_pool": 150}
    )
    assert settings.database_url is not None
    engine = create_engine(as_async_url(settings.database_url.get_secret_value()), settings)
    try:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            row = (await session.execute(WORKER_SETTINGS_SQL, {"tenant_id": tenant})).one()
    finally:
        await engine.dispose()
    assert row.port != "9700", "answered by the coordinator, not a worker"
    assert row.ef_search == "300"
