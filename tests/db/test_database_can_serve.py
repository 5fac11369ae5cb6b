"""The service refuses a database it cannot serve at all or safely: a PostgreSQL older than 16
(its search statement needs `any_value()`), a pgvector older than 0.8 or none (filtered searches
need its iterative scans), or a runtime role that could bypass row-level security. The server
is checked before the migrations change anything. A database it cannot connect to stops the
start with what the network or the server said, naming the URL without its password."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db, db_migrations
from service.config import Settings
from service.db import (
    DatabaseUnreachable,
    PrivilegedRuntimeRole,
    UnsupportedServer,
    assert_database_can_serve,
    create_engine,
    reaching,
    shown_url,
    unsupported_server,
)
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from service.main import create_app
from tests.conftest import TEST_DATABASE, make_settings
from tests.service_process import free_port
from tests.test_refused_start import start_messages


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


async def test_a_privileged_runtime_role_stops_the_start_with_one_line(
    cluster: EmbeddedCluster,
) -> None:
    owner_url = cluster.url(OWNER_ROLE, TEST_DATABASE)
    app = create_app(
        make_settings(cluster, database_url=SecretStr(owner_url), migrate_on_start=False)
    )
    sent = await start_messages(app)
    assert len(sent) == 1
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert sent[0]["message"] == (
        "mneme cannot start: the runtime database role is a superuser, has BYPASSRLS or owns "
        "tables; connect MNEME_DATABASE_URL as the non-owner runtime role "
        "(see docs/configuration.md § Database)"
    )


async def _connect(url: str, settings: Settings) -> None:
    engine = create_engine(url, settings, pool_size=1)
    try:
        async with reaching(url, "MNEME_DATABASE_URL"), engine.connect():
            pass
    finally:
        await engine.dispose()


async def test_a_server_that_is_not_there_is_named_without_the_password(
    settings: Settings,
) -> None:
    port = free_port()
    url = f"postgresql+asyncpg://mneme_app:hunter2@127.0.0.1:{port}/mneme"
    with pytest.raises(DatabaseUnreachable) as refused:
        await _connect(url, settings)
    said = str(refused.value)
    assert said.startswith(
        f"cannot connect to the database at postgresql://mneme_app:***@127.0.0.1:{port}/mneme "
        "(MNEME_DATABASE_URL): "
    )
    assert "hunter2" not in said
    assert isinstance(refused.value.__cause__, OSError)


def test_a_url_is_shown_without_its_passwords() -> None:
    assert shown_url("postgresql+asyncpg://app:hunter2@db:5432/mneme") == (
        "postgresql://app:***@db:5432/mneme"
    )
    assert shown_url(
        "postgresql://app@db/mneme?sslmode=require&password=hunter2&sslpassword=hunter3"
    ) == ("postgresql://app@db/mneme?sslmode=require&password=***&sslpassword=***")
    assert shown_url("postgresql://app@/mneme?host=/var/run/pg") == (
        "postgresql://app@/mneme?host=/var/run/pg"
    )


async def test_a_role_or_database_the_server_does_not_know_is_said_in_its_words(
    cluster: EmbeddedCluster, settings: Settings
) -> None:
    with pytest.raises(DatabaseUnreachable, match='role "no_such_role" does not exist') as refused:
        await _connect(cluster.url("no_such_role", TEST_DATABASE), settings)
    # A role other than the runtime one is the operator's to make, not the migrations'.
    assert "first migration" not in str(refused.value)
    with pytest.raises(DatabaseUnreachable, match='database "no_such_database" does not exist'):
        await _connect(cluster.url(OWNER_ROLE, "no_such_database"), settings)


async def test_a_statements_own_error_is_not_taken_for_an_unreachable_database(
    owner_engine: AsyncEngine,
) -> None:
    with pytest.raises(DBAPIError, match="division by zero"):
        async with (
            reaching("postgresql://x@y/z", "MNEME_DATABASE_URL"),
            owner_engine.connect() as connection,
        ):
            await connection.execute(text("SELECT 1 / 0"))


def _app_not_migrating(cluster: EmbeddedCluster, runtime_role: str, database: str) -> FastAPI:
    """The app on `database` as `runtime_role`, with `MNEME_MIGRATE_ON_START=false`."""
    return create_app(
        make_settings(
            cluster,
            database_url=SecretStr(cluster.url(runtime_role, database)),
            migration_database_url=SecretStr(cluster.url(OWNER_ROLE, database)),
            migrate_on_start=False,
        )
    )


async def test_a_database_never_migrated_stops_the_start_with_what_to_run(
    cluster: EmbeddedCluster,
) -> None:
    database = "mneme_never_migrated"
    await bootstrap(cluster, database)
    # The runtime role is the cluster's, made by the tests' own database's first migration.
    app = _app_not_migrating(cluster, "mneme_app", database)
    assert await start_messages(app) == [
        {
            "type": "lifespan.startup.failed",
            "message": "mneme cannot start: the database holds no schema of Mneme's: run "
            "`mneme migrate` as the owner role (MNEME_MIGRATION_DATABASE_URL) first, or start "
            "with MNEME_MIGRATE_ON_START=true",
        }
    ]


async def test_a_runtime_role_not_made_yet_says_the_first_migration_makes_it(
    cluster: EmbeddedCluster,
) -> None:
    # A new database started with migrations off: its runtime role (which the first migration
    # creates) is not on the server yet.
    app = _app_not_migrating(cluster, "mneme_app_never_created", TEST_DATABASE)
    [failed] = await start_messages(app)
    assert failed["type"] == "lifespan.startup.failed"
    said = failed["message"]
    assert said.startswith("mneme cannot start: cannot connect to the database at ")
    assert 'role "mneme_app_never_created" does not exist' in said
    assert "the runtime role is created by the first migration: run `mneme migrate`" in said
