"""Re-embedding: give every memory a vector from the configured embedder.

Picks up rows with no embedding (the embedder was down when they were written) and rows
embedded by another model (the embedder was changed). It works across tenants, so it runs as
the owner role, which must be allowed to bypass row-level security (the embedded database's
owner is; see docs/configuration.md § Database). Each batch commits on its own: an
interrupted run resumes where it stopped, because finished rows no longer match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.providers import Embedder

STALE_FILTER = "(embedding IS NULL OR embedding_model IS DISTINCT FROM :model)"

COUNT_STALE_SQL = text(f"SELECT count(*) FROM memory WHERE {STALE_FILTER}")  # noqa: S608

NEXT_STALE_BATCH_SQL = text(
    f"""
    SELECT tenant_id, id, text FROM memory
     WHERE {STALE_FILTER} AND (tenant_id, id) > (:after_tenant, CAST(:after_id AS uuid))
     ORDER BY tenant_id, id
     LIMIT :batch_size
    """  # noqa: S608 - constant filter
)
"""The next rows needing a vector, in (tenant, id) order after the given key."""

STORE_EMBEDDING_SQL = text(
    """
    UPDATE memory SET embedding = CAST(:embedding AS vector), embedding_model = :model
     WHERE tenant_id = :tenant_id AND id = :id AND text = :text
    """
)
"""Store a vector unless the text changed since it was read (the vector would be stale)."""

CAN_SEE_ALL_TENANTS_SQL = text(
    "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
)
COLUMN_DIMS_SQL = text(
    "SELECT atttypmod FROM pg_attribute "
    "WHERE attrelid = 'memory'::regclass AND attname = 'embedding'"
)


class ReembedRefused(RuntimeError):
    """The run cannot be done as configured (role, dimensions); the message says why."""


@dataclass
class ReembedReport:
    total: int
    embedded: int


async def reembed(
    owner_engine: AsyncEngine,
    embedder: Embedder,
    *,
    batch_size: int = 64,
    on_progress: Callable[[int], None] | None = None,
) -> ReembedReport:
    async with owner_engine.connect() as connection:
        if not (await connection.execute(CAN_SEE_ALL_TENANTS_SQL)).scalar_one():
            raise ReembedRefused(
                "the migration role cannot bypass row-level security, so it cannot see every "
                "tenant's memories; grant it BYPASSRLS or use a superuser URL for this command"
            )
        column_dims = (await connection.execute(COLUMN_DIMS_SQL)).scalar_one()
        if column_dims != embedder.dims:
            raise ReembedRefused(
                f"memory.embedding holds {column_dims}-dimensional vectors but the embedder "
                f"produces {embedder.dims}; changing dimensions needs a schema migration"
            )
        total = (
            await connection.execute(COUNT_STALE_SQL, {"model": embedder.model_name})
        ).scalar_one()

    embedded = 0
    after: tuple[str, str] = ("", "00000000-0000-0000-0000-000000000000")
    while True:
        async with owner_engine.connect() as connection:
            rows = (
                await connection.execute(
                    NEXT_STALE_BATCH_SQL,
                    {
                        "model": embedder.model_name,
                        "after_tenant": after[0],
                        "after_id": after[1],
                        "batch_size": batch_size,
                    },
                )
            ).all()
        if not rows:
            break
        vectors = await embedder.embed([row.text for row in rows])
        async with owner_engine.begin() as connection:
            for row, vector in zip(rows, vectors, strict=True):
                await connection.execute(
                    STORE_EMBEDDING_SQL,
                    {
                        "embedding": str(vector),
                        "model": embedder.model_name,
                        "tenant_id": row.tenant_id,
                        "id": row.id,
                        "text": row.text,
                    },
                )
        embedded += len(rows)
        after = (rows[-1].tenant_id, str(rows[-1].id))
        if on_progress is not None:
            on_progress(len(rows))
    return ReembedReport(total=total, embedded=embedded)
