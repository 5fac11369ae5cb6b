"""Alembic environment: runs migrations as the database owner, one runner at a time.

The service calls the migrations with an open connection (`config.attributes["connection"]`);
the `alembic` command line resolves the database from MNEME_* settings like the service does.
Values the DDL needs (runtime role name, embedding dimensions) travel in `config.attributes`.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from service.config import get_settings
from service.db import Base, create_engine, open_database_target

config = context.config
target_metadata = Base.metadata

# Any 64-bit constant shared by all replicas: concurrent starts migrate one after another.
MIGRATION_LOCK_KEY = 0x6D6E656D65


def _fill_attributes() -> None:
    settings = get_settings()
    config.attributes.setdefault("runtime_role", settings.db_runtime_role)
    config.attributes.setdefault("embedding_dims", settings.embedding_dims)


def _run(connection: Connection) -> None:
    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    context.configure(
        connection=connection, target_metadata=target_metadata, transaction_per_migration=False
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_from_settings() -> None:
    settings = get_settings()
    target = await open_database_target(settings)
    engine = create_engine(target.urls.owner, settings, pool_size=1, max_overflow=0)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()
        target.close()


_fill_attributes()
if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: the DDL depends on settings")
existing = config.attributes.get("connection")
if existing is not None:
    _run(existing)
else:
    asyncio.run(_run_from_settings())
