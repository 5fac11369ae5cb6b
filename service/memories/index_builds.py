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


STATEMENT_LIMIT_SQL = text("SELECT current_setting('statement_timeout')")
SET_STATEMENT_LIMIT_SQL = text("SELECT set_config('statement_timeout', :limit, false)")

HNSW_M = 16
"""Neighbours per node of every HNSW graph on the memory table (pgvector's default)."""


def hnsw_options(ef_construction: int) -> list[str]:
    """An HNSW index's storage parameters as the catalog keeps them (`pg_class.reloptions`)."""
    return [f"m={HNSW_M}", f"ef_construction={ef_construction}"]


def hnsw_definition(column: VectorColumn, ef_construction: int) -> str:
    """An HNSW index over `column` as searches compare with it (`VectorColumn.expression`),
    built with a candidate list of `ef_construction`."""
    return (
        f"USING hnsw ({column.expression()} vector_cosine_ops) "
        f"WITH ({', '.join(hnsw_options(ef_construction))})"
    )


async def drop_index_concurrently(autocommit: AsyncConnection, name: str) -> None:
    """`DROP INDEX CONCURRENTLY IF EXISTS <name>` on a connection in autocommit mode: searches
    and writes go on while it waits for them."""
    await autocommit.execute(text(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"'))


async def create_index_concurrently(
    autocommit: AsyncConnection, name: str, definition: str
) -> None:
    """`CREATE INDEX CONCURRENTLY IF NOT EXISTS <name> ON memory <definition>` on a connection
    in autocommit mode. An index a killed or failed build left invalid is dropped first: `IF
    NOT EXISTS` alone would keep it."""
    valid = (await autocommit.execute(INDEX_VALID_SQL, {"name": name})).scalar_one_or_none()
    if valid is False:
        await drop_index_concurrently(autocommit, name)
    # A build takes minutes: no statement limit for it, and the connection's own limit back
    # afterwards (set when the connection was made, which RESET would not restore).
    limit = (await autocommit.execute(STATEMENT_LIMIT_SQL)).scalar_one()
    await autocommit.execute(SET_STATEMENT_LIMIT_SQL, {"limit": "0"})
    try:
        await autocommit.execute(
            text(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON memory {definition}')
        )
    finally:
        await autocommit.execute(SET_STATEMENT_LIMIT_SQL, {"limit": limit})


async def replace_index_concurrently(
    autocommit: AsyncConnection, name: str, definition: str
) -> None:
    """Index `name` replaced by one of `definition`, on a connection in autocommit mode: the new
    one is built concurrently beside it (`<name>_next`), takes its name in one transaction and
    the old one (`<name>_prev` by then) is dropped concurrently. Searches read the old index
    until the new one is complete, and never find neither (a search may learn from the name
    whether an index exists). A killed replacement leaves `_next` or `_prev` behind, under
    names a caller that owns `name`'s prefix drops as unwanted."""
    building, retiring = f"{name}_next", f"{name}_prev"
    await create_index_concurrently(autocommit, building, definition)
    await drop_index_concurrently(autocommit, retiring)
    # One transaction on the driver: the connection's autocommit mode leaves it none.
    driver = (await autocommit.get_raw_connection()).driver_connection
    if driver is None:
        raise RuntimeError(f"the connection replacing {name} has no driver connection")
    async with driver.transaction():
        await driver.execute(f'ALTER INDEX "{name}" RENAME TO "{retiring}"')
        await driver.execute(f'ALTER INDEX "{building}" RENAME TO "{name}"')
    await drop_index_concurrently(autocommit, retiring)
