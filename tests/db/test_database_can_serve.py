"""The service refuses a database it cannot serve at all or safely: a PostgreSQL older than 16
(its search statement needs `any_value()`), a pgvector older than 0.8 or none (filtered searches
need its iterative scans), or a runtime role that could bypass row-level security. The server
is checked before the migrations change anything."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db, db_migrations
from service.db import (
    PrivilegedRuntimeRole,
    UnsupportedServer,
    assert_database_can_serve,
    create_engine,
    unsupported_server,
)
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from tests.conftest import make_settings


async def test_the_runtime_role_on_the_tests_server_can_serve(runtime_engine: AsyncEngine) -> None:
    await assert_database_can_serve(runtime_engine)


async def test_a_role_that_bypasses_row_level_security_is_refused(
    owner_engine: AsyncEngine,
) -> None:
    # The owner role has BYPASSRLS and owns the tables.
    with pytest.raises(PrivilegedRuntimeRole, match="BYPASSRLS"):
        await assert_database_can_serve(owner_engine)


def test_a_server_older_than_postgresql_16_is_refused_with_what_it_runs() -> None:
    assert unsupported_server(180003, "18.3", "0.8.2") is None
    assert unsupported_server(160000, "16.0", "0.8.0") is None
    problem = unsupported_server(150020, "15.20 (Debian 15.20-0+deb12u1)", "0.8.2")
    assert problem is not None
    assert "PostgreSQL 15.20 (Debian 15.20-0+deb12u1)" in problem
    assert "PostgreSQL 16 or later" in problem


def test_a_pgvector_older_than_0_8_or_none_is_refused_with_what_it_has() -> None:
    assert unsupported_server(180003, "18.3", "0.10.0") is None
    older = unsupported_server(170002, "17.2", "0.7.4")
    assert older is not None
    assert "pgvector 0.7.4" in older
    assert "pgvector 0.8 or later" in older
    missing = unsupported_server(170002, "17.2", None)
    assert missing is not None
    assert "no pgvector" in missing


async def test_a_refused_server_is_not_migrated(
    cluster: EmbeddedCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests' server stands for a server too old by asking for a PostgreSQL that does not
    # exist yet: the migrations must refuse it before they create anything.
    database = "mneme_refused_server"
    await bootstrap(cluster, database)
    settings = make_settings(cluster)
    owner_url = cluster.url(OWNER_ROLE, database)
    monkeypatch.setattr(db, "MINIMUM_SERVER_VERSION_NUM", 990000)
    with pytest.raises(UnsupportedServer, match="PostgreSQL 16 or later"):
        await db_migrations.upgrade_as_owner(owner_url, settings)
    engine = create_engine(owner_url, settings, pool_size=1)
    try:
        async with engine.connect() as connection:
            tables = (
                await connection.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
                )
            ).scalars()
            assert list(tables) == []
        assert await db_migrations.current_revision(engine) is None
        # The same database, on a server the service supports, migrates as usual.
        monkeypatch.undo()
        await db_migrations.upgrade(engine, settings)
        assert await db_migrations.current_revision(engine) == db_migrations.head_revision(settings)
    finally:
        await engine.dispose()
