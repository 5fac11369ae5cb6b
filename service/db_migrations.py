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

logger = logging.getLogger("mneme.migrations")

_creating_schema: ContextVar[bool] = ContextVar("creating_schema", default=False)


class _AlembicLines(logging.Filter):
    """Alembic's own lines as the service logs them: its set-up lines ("Context impl …", "Will
    assume … DDL", at every connection that reads the revision: a readiness probe's too)
    dropped; each revision's "Running upgrade A -> B, message" on one line, as it starts (what
    a long release migration is doing), except while a new database is given the whole schema,
    which `_log_moved` says in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        if not (isinstance(record.msg, str) and record.msg.startswith("Running ")):
            return False
        if _creating_schema.get():
            return False
        record.msg = " ".join(record.getMessage().split())
        record.args = None
        return True


logging.getLogger("alembic.runtime.migration").addFilter(_AlembicLines())


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
        before = _revision_of(connection)
        creating = _creating_schema.set(before is None)
        try:
            alembic_command(config, revision)
        finally:
            _creating_schema.reset(creating)
        upgrade = alembic_command is not command.downgrade
        _log_moved(config, before, _revision_of(connection), upgrade=upgrade)

    async with owner_engine.begin() as connection:
        # A migration backfills or indexes whole tables: the request timeout (a protection for
        # the service's own statements) would cancel it at a size any real deployment reaches.
        await connection.exec_driver_sql(NO_STATEMENT_LIMIT_SQL)
        # Before any migration: a server the service cannot run on is left as it was found,
        # not migrated and then refused at start-up.
        await refuse_unsupported_server(connection)
        await connection.run_sync(run)


def _revision_of(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _log_moved(config: Config, before: str | None, after: str | None, *, upgrade: bool) -> None:
    """One line for the whole run (an `upgrade` or a downgrade), after it: where the schema was
    and is now. For a new database it stands for Alembic's line per revision (every revision of
    the schema at its first start), whose titles are then at debug."""
    if before == after:
        return
    upper, lower = (after, before) if upgrade else (before, after)
    steps = list(ScriptDirectory.from_config(config).iterate_revisions(upper, lower or "base"))
    if before is None:
        for step in reversed(steps):
            # Its message's first paragraph, on one line.
            title = " ".join((step.doc or "").strip().split("\n\n")[0].split())
            logger.debug("applied %s: %s", step.revision, title)
    logger.info(
        "schema %s from %s to %s (%d revision%s)",
        "migrated" if upgrade else "downgraded",
        before or "an empty database",
        after or "base",
        len(steps),
        "" if len(steps) == 1 else "s",
    )


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as connection:
        return await connection.run_sync(_revision_of)
