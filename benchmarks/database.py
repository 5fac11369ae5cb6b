"""A throwaway database for one benchmark run: embedded Postgres in a temporary directory."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import SecretStr

from service import db_migrations
from service.config import Settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, bootstrap, start_cluster

BENCH_DATABASE = "mneme_bench"


@asynccontextmanager
async def throwaway_database(settings: Settings) -> AsyncIterator[Settings]:
    """Start, bootstrap and migrate a fresh embedded cluster; yield `settings` pointed at it
    (runtime role, owner for migrations); stop it and delete its directory on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix="mneme-bench-"))
    try:
        cluster = await asyncio.to_thread(
            start_cluster, workdir, settings.embedded_shared_buffers_mb
        )
        try:
            await bootstrap(cluster, BENCH_DATABASE)
            owner_url = cluster.url(OWNER_ROLE, BENCH_DATABASE)
            owner_engine = create_engine(owner_url, settings, pool_size=1, max_overflow=0)
            try:
                await db_migrations.upgrade(owner_engine, settings)
            finally:
                await owner_engine.dispose()
            yield settings.model_copy(
                update={
                    "database_url": SecretStr(
                        cluster.url(settings.db_runtime_role, BENCH_DATABASE)
                    ),
                    "migration_database_url": SecretStr(owner_url),
                    # Migrated just above, by the owner.
                    "migrate_on_start": False,
                }
            )
        finally:
            await asyncio.to_thread(cluster.stop)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
