"""Run the Alembic migrations from inside the service (start-up, `mneme migrate`, tests)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import NO_STATEMENT_LIMIT_SQL, create_engine, refuse_unsupported_server

PROJECT_ROOT = Path(__file__).resolve().parent.parent

_reading_revision: ContextVar[bool] = ContextVar("reading_schema_revision", default=False)


class _QuietRevisionRead(logging.Filter):
    """Drops Alembic's set-up lines ("Context impl …", "Will assume … DDL") while the schema
    revision is only being read: readiness probes read it every few seconds, and a migration
    still logs them."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _reading_revision.get()


logging.getLogger("alembic.runtime.migration").addFilter(_QuietRevisionRead())


def alembic_config(settings: Settings) -> Config:
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    config.attributes["runtime_role"] = settings.db_runtime_role
    config.attributes["embedding_dims"] = settings.embedding_dims
    return config


def head_revision(settings: Settings) -> str | None:
    return ScriptDirectory.from_config(alembic_config(settings)).get_current_head()


async def upgrade(owner_engine: AsyncEngine, settings: Settings, revision: str = "head") -> None:
    await _run(owner_engine, settings, command.upgrade, revision)


async def upgrade_as_owner(owner_url: str, settings: Settings) -> None:
    """Upgrade to the head over a one-connection engine of the owner role, closed after."""
    owner_engine = create_engine(owner_url, settings, pool_size=1, max_overflow=0)
    try:
        await upgrade(owner_engine, settings)
    finally:
        await owner_engine.dispose()


async def downgrade(owner_engine: AsyncEngine, settings: Settings, revision: str) -> None:
    await _run(owner_engine, settings, command.downgrade, revision)


async def _run(
    owner_engine: AsyncEngine,
    settings: Settings,
    alembic_command: Callable[[Config, str], None],
    revision: str,
) -> None:
    """Run an Alembic command on one owner connection, in one transaction."""
    config = alembic_config(settings)

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        alembic_command(config, revision)

    async with owner_engine.begin() as connection:
        # A migration backfills or indexes whole tables: the request timeout (a protection for
        # the service's own statements) would cancel it at a size any real deployment reaches.
        await connection.exec_driver_sql(NO_STATEMENT_LIMIT_SQL)
        # Before any migration: a server the service cannot run on is left as it was found,
        # not migrated and then refused at start-up.
        await refuse_unsupported_server(connection)
        await connection.run_sync(run)


async def current_revision(engine: AsyncEngine) -> str | None:
    def read(connection: Connection) -> str | None:
        quiet = _reading_revision.set(True)
        try:
            return MigrationContext.configure(connection).get_current_revision()
        finally:
            _reading_revision.reset(quiet)

    async with engine.connect() as connection:
        return await connection.run_sync(read)
