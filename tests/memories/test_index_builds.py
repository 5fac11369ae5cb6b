"""An index built concurrently (an owner's graph, a new vector column's) runs without the
statement limit, which a build of minutes would exceed, and leaves its pooled connection with
the limit it had: the one the connection got when it was made, which `RESET` would not restore."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.memories.index_builds import create_index_concurrently, drop_index_concurrently


async def test_a_concurrent_build_lifts_the_statement_limit_and_gives_it_back(
    owner_engine: AsyncEngine,
) -> None:
    name = f"ix_memory_build_test_{uuid.uuid4().hex[:8]}"
    async with owner_engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        before = (await autocommit.execute(text("SHOW statement_timeout"))).scalar_one()
        # A partial index no row is in (and no query can use): nothing else notices it.
        await create_index_concurrently(autocommit, name, "(created_at) WHERE false")
        try:
            built = await autocommit.scalar(
                text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
                {"name": name},
            )
            after = (await autocommit.execute(text("SHOW statement_timeout"))).scalar_one()
        finally:
            await drop_index_concurrently(autocommit, name)
    assert built is True
    assert before == "15s"
    assert after == before
