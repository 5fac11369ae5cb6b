"""Indexes the owner role builds on the memory table while the service runs: concurrently, so
writes and searches go on, and without the connection's statement timeout, which a build over
a large table outlasts. Changing the embedding model (`reembed`) builds a new column's
indexes; `owner_indexes` builds one per large owner."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from service.memories.vector_columns import VectorColumn

CAN_SEE_ALL_TENANTS_SQL = text(
    "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
)
"""Whether the connection's role reads every tenant's rows (row-level security aside)."""

INDEX_VALID_SQL = text(
    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE c.relname = :name"
)


async def sees_all_tenants(connection: AsyncConnection) -> bool:
    return bool((await connection.execute(CAN_SEE_ALL_TENANTS_SQL)).scalar_one())


def hnsw_definition(column: VectorColumn) -> str:
    """An HNSW index over `column` as searches compare with it (`VectorColumn.expression`),
    with the graph settings of the table's first index."""
    return (
        f"USING hnsw ({column.expression()} vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )


async def create_index_concurrently(
    autocommit: AsyncConnection, name: str, definition: str
) -> None:
    """`CREATE INDEX CONCURRENTLY IF NOT EXISTS <name> ON memory <definition>` on a connection
    in autocommit mode. An index a killed or failed build left invalid is dropped first: `IF
    NOT EXISTS` alone would keep it."""
    valid = (await autocommit.execute(INDEX_VALID_SQL, {"name": name})).scalar_one_or_none()
    if valid is False:
        await autocommit.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))
    await autocommit.execute(text("SET statement_timeout = 0"))
    try:
        await autocommit.execute(
            text(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON memory {definition}')
        )
    finally:
        await autocommit.execute(text("RESET statement_timeout"))
