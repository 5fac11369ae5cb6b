"""What a change of embedding model leaves in the schema: the live column keeps the partial
index the embedding backfill reads, and the column being filled takes vectors of the new
model's size only, from `start` on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.memories.repository import unembedded_among_statement
from service.memories.vector_columns import VectorColumns
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import EMBEDDING_MODEL, FakeOpenAIServer
from tests.memories.model_change import (
    NEW_DIMS,
    ServerVectors,
    own_database,
    owner_engine_for,
    running_app,
)

SETTLE = 0.5
FILLER = 500
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena is allergic to peanuts",
    "Lena prefers tea over coffee",
]


@pytest.fixture(scope="module")
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer(native_dims=NEW_DIMS)
    server.start()
    yield server
    server.stop()


async def _unembedded_indexes(owner: AsyncEngine) -> dict[str, tuple[str, str, bool]]:
    """Every partial index of `memory` whose predicate is a vector column's `IS NULL`, by the
    column it covers: (name, definition, valid)."""
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT c.relname, pg_get_indexdef(i.indexrelid) AS definition, i.indisvalid, "
                "pg_get_expr(i.indpred, i.indrelid) AS predicate FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'memory'::regclass AND i.indpred IS NOT NULL"
            )
        )
        found: dict[str, tuple[str, str, bool]] = {}
        for row in rows:
            for column in ("embedding", "embedding_alt"):
                if row.predicate == f"({column} IS NULL)":
                    found[column] = (row.relname, row.definition, row.indisvalid)
        return found


async def _backfill_plan(owner: AsyncEngine, tenant: str, column: str) -> str:
    """The plan of the embedding backfill's look-up of unembedded memories in `column`."""
    statement = unembedded_among_statement(tenant, [uuid.uuid4(), uuid.uuid4()], column)
    sql = str(
        statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    )
    async with owner.begin() as connection:
        await connection.execute(text("ANALYZE memory"))
    async with owner.begin() as connection:
        # A handful of rows: without this the planner reads the table whole.
        await connection.execute(text("SET LOCAL enable_seqscan = off"))
        return "\n".join((await connection.execute(text(f"EXPLAIN {sql}"))).scalars())


async def _assert_backfill_index_on(owner: AsyncEngine, tenant: str, column: str) -> None:
    indexes = await _unembedded_indexes(owner)
    assert column in indexes, indexes
    name, definition, valid = indexes[column]
    assert valid, definition
    assert "(tenant_id, id)" in definition, definition
    assert name in await _backfill_plan(owner, tenant, column)


async def test_after_each_change_of_model_the_backfill_finds_unembedded_memories_by_index(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        tenant = new_tenant()
        await remember_all(client, bearer(settings, tenant, "lena"), *({"text": t} for t in TEXTS))
        # Enough embedded memories for the planner to prefer a small partial index.
        async with owner.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO memory (tenant_id, scope, kind, text, embedding, embedding_model) "
                    "SELECT :t, 'org', 'semantic', 'filler ' || g, "
                    f"array_fill(0.1, ARRAY[{old.dims}])::vector, :model "
                    f"FROM generate_series(1, {FILLER}) g"
                ),
                {"t": tenant, "model": old.model_name},
            )
        await _assert_backfill_index_on(owner, tenant, "embedding")  # as first migrated

        assert await reembed.start(owner, old, new) == "embedding_alt"
        await reembed.run(owner, new, batch_size=FILLER, settle_seconds=SETTLE)
        assert await reembed.finish(owner, new, settle_seconds=SETTLE) == "embedding_alt"
        await _assert_backfill_index_on(owner, tenant, "embedding_alt")
        # The old column's went with it.
        assert set(await _unembedded_indexes(owner)) == {"embedding_alt"}

        # The next change goes into the emptied first column, which gets one of its own again.
        third = ServerVectors("third-model", dims=32)
        assert await reembed.start(owner, new, third) == "embedding"
        await reembed.run(owner, third, batch_size=FILLER, settle_seconds=SETTLE)
        assert await reembed.finish(owner, third, settle_seconds=SETTLE) == "embedding"
        await _assert_backfill_index_on(owner, tenant, "embedding")
        assert set(await _unembedded_indexes(owner)) == {"embedding"}
