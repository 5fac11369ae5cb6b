"""What a pooled connection keeps prepared: the driver's statements
(`MNEME_DB_STATEMENT_CACHE_SIZE`) and, apart from them, the search statements of each filter
shape (`MNEME_DB_SEARCH_STATEMENT_CACHE_SIZE`): at most that many of each, least recently used
first out, each one closed on the server when it leaves (a kept search statement's plan holds
~2.7 MB of its backend's memory); 0 keeps none, and every statement is then planned where it
runs. And the pool hands out the connection returned last, so a steady load runs on the
connections that hold its plans."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_engine, create_sessionmaker, tenant_transaction, transaction_driver
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from tests.search_params import search_params

HELD_SQL = "SELECT statement FROM pg_prepared_statements"
"""The statements the session holds prepared on the server (this one among them once run)."""


@pytest.mark.parametrize(
    ("driver_kept", "shapes_kept", "searches_held"),
    [(100, 100, 3), (100, 2, 2), (2, 100, 3), (0, 0, 0)],
)
async def test_a_connection_keeps_at_most_the_configured_statements_prepared(
    settings: Settings, tenant: str, driver_kept: int, shapes_kept: int, searches_held: int
) -> None:
    assert settings.database_url is not None
    configured = settings.model_copy(
        update={
            "db_statement_cache_size": driver_kept,
            "db_search_statement_cache_size": shapes_kept,
        }
    )
    engine = create_engine(
        settings.database_url.get_secret_value(), configured, pool_size=1, max_overflow=0
    )
    try:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            repository = FusionRepository(session, tenant)
            # Three filter shapes: three texts of the search statement on one connection.
            for kinds in (None, ["semantic"], ["episodic"]):
                memory_filter = MemoryFilter.build([Owner.user("ada")], kinds=kinds)
                assert await repository.search(search_params(memory_filter, "tea")) == []
            driver = await transaction_driver(await session.connection())
            held = [row["statement"] for row in await driver.fetch(HELD_SQL)]
    finally:
        await engine.dispose()
    # With room for two shapes, the last two searches; the first was closed on the server as it
    # left. The driver's own cache holds none of them: a cache of two (the question each search
    # asks first, and this one) keeps all three searches all the same.
    assert sum("query_terms" in statement for statement in held) == searches_held
    assert (HELD_SQL in held) == (driver_kept > 0)


async def test_after_a_burst_one_request_at_a_time_runs_on_the_connection_returned_last(
    settings: Settings,
) -> None:
    """Each pooled connection plans a statement the first time it runs it and keeps the plan;
    handing out the connection returned last keeps a steady load on the ones that hold them."""
    assert settings.database_url is not None
    engine = create_engine(
        settings.database_url.get_secret_value(), settings, pool_size=4, max_overflow=0
    )
    try:
        burst = [await engine.connect() for _ in range(4)]
        backends = []
        for connection in burst:
            backends.append(await connection.scalar(text("SELECT pg_backend_pid()")))
            await connection.close()
        assert len(set(backends)) == 4
        steady = set()
        for _ in range(8):
            async with engine.connect() as connection:
                steady.add(await connection.scalar(text("SELECT pg_backend_pid()")))
        assert steady == {backends[-1]}
    finally:
        await engine.dispose()
