"""What a change of embedding model leaves in the schema: the live column keeps the partial
index the embedding backfill reads, and the column being filled takes vectors of the new
model's size only, from `start` on."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.memories.repository import unembedded_among_statement
from service.memories.vector_columns import VectorColumns
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import EMBEDDING_MODEL, FakeOpenAIServer
from tests.memories.model_change import (
    NEW_DIMS,
    ServerVectors,
    own_database,
    owner_engine_for,
    running_app,
    second_model,
)

SETTLE = 0.5
FILLER = 500
OTHER_DIMS = 512
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena is allergic to peanuts",
    "Lena prefers tea over coffee",
]


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

        # A live column that lacks it (its change finished without building it) gets it back
        # when the next change starts, which goes into the emptied first column...
        async with owner.begin() as connection:
            await connection.execute(text("DROP INDEX ix_memory_embedding_alt_unembedded"))
        third = ServerVectors("third-model", dims=32)
        assert await reembed.start(owner, new, third) == "embedding"
        await _assert_backfill_index_on(owner, tenant, "embedding_alt")
        # ...which gets one of its own again when it becomes live.
        await reembed.run(owner, third, batch_size=FILLER, settle_seconds=SETTLE)
        assert await reembed.finish(owner, third, settle_seconds=SETTLE) == "embedding"
        await _assert_backfill_index_on(owner, tenant, "embedding")
        assert set(await _unembedded_indexes(owner)) == {"embedding"}


@pytest.fixture(scope="module")
def other_size_server() -> Iterator[FakeOpenAIServer]:
    """The same model's name, served at another size than the change claimed the column for."""
    with FakeOpenAIServer(native_dims=OTHER_DIMS) as server:
        yield server


async def _alt_sizes(owner: AsyncEngine, tenant: str) -> dict[str, int | None]:
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT text, vector_dims(embedding_alt) AS dims FROM memory WHERE tenant_id = :t"
            ),
            {"t": tenant},
        )
        return {row.text: row.dims for row in rows}


async def test_from_start_on_the_column_being_filled_takes_only_the_new_models_size(
    cluster: EmbeddedCluster,
    embeddings_server: FakeOpenAIServer,
    other_size_server: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    misconfigured = settings.model_copy(
        update={
            "embedding_second": {
                **second_model(other_size_server.base_url),
                "dims": OTHER_DIMS,
            }
        }
    )
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        tenant = new_tenant()
        lena = bearer(settings, tenant, "lena")
        await remember_all(client, lena, *({"text": t} for t in TEXTS))
        assert await reembed.start(owner, old, new) == "embedding_alt"

        # The database refuses another size in the column, before its index exists.
        async with owner.connect() as connection:
            with pytest.raises(IntegrityError, match="ck_memory_embedding_alt_dims"):
                await connection.execute(
                    text(
                        "UPDATE memory SET embedding_alt = '[1,2,3]', "
                        "embedding_alt_model = :model WHERE tenant_id = :t"
                    ),
                    {"t": tenant, "model": new.model_name},
                )
            await connection.rollback()
            validated = (
                await connection.execute(
                    text(
                        "SELECT convalidated FROM pg_constraint "
                        "WHERE conname = 'ck_memory_embedding_alt_dims'"
                    )
                )
            ).scalar_one()
        assert validated

        # A process that runs the new model's name at another size writes, but stores none of
        # its vectors of that size: the command fills them.
        async with running_app(misconfigured) as (other_app, other_client):
            await other_app.state.mneme.vector_columns.refresh(other_app.state.mneme.engine)
            with caplog.at_level(logging.ERROR, logger="mneme.vector_columns"):
                await remember_all(other_client, lena, {"text": "Lena sings in a choir"})
        assert await _alt_sizes(owner, tenant) == {
            **dict.fromkeys(TEXTS),
            "Lena sings in a choir": None,
        }
        assert any(
            f"{OTHER_DIMS}" in record.getMessage() and f"{NEW_DIMS}" in record.getMessage()
            for record in caplog.records
        ), caplog.text
        # A write through a process that runs the model at its size stores the new vector.
        await columns.refresh(app.state.mneme.engine)
        await remember_all(client, lena, {"text": "Lena learns the cello"})
        assert (await _alt_sizes(owner, tenant))["Lena learns the cello"] == NEW_DIMS

        # The command refuses an embedder of another size for the column.
        with pytest.raises(reembed.ReembedRefused, match=f"{OTHER_DIMS}"):
            await reembed.run(
                owner, ServerVectors(EMBEDDING_MODEL, OTHER_DIMS), settle_seconds=SETTLE
            )
        current = await reembed.run(owner, new, batch_size=4, settle_seconds=SETTLE)
        assert (current.memories_missing, current.filled) == (0, True)
        assert set((await _alt_sizes(owner, tenant)).values()) == {NEW_DIMS}


async def test_an_import_of_a_vector_of_another_size_than_its_models_column_is_refused(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        new = ServerVectors(EMBEDDING_MODEL)
        tenant = new_tenant()
        admin = bearer(settings, tenant, "root", admin=True)
        await remember_all(client, bearer(settings, tenant, "lena"), *({"text": t} for t in TEXTS))
        await reembed.start(owner, columns.configured, new)
        await columns.refresh(app.state.mneme.engine)
        exported = await client.get("/v1/users/lena/export", headers=admin)
        assert exported.status_code == 200, exported.text
        records = [json.loads(line) for line in exported.text.splitlines()]
        assert (await client.delete("/v1/admin/users/lena", headers=admin)).status_code == 200

        first = next(n for n, record in enumerate(records) if record["type"] == "memory")
        records[first]["data"] |= {
            "embedding_alt": str([0.5] * OTHER_DIMS),
            "embedding_alt_model": new.model_name,
        }
        body = "".join(json.dumps(record) + "\n" for record in records)
        response = await client.post(
            "/v1/admin/users/lena/import",
            headers={**admin, "content-type": "application/x-ndjson"},
            content=body,
        )
        problem = assert_problem(response, 422, "IMPORT_LINE_INVALID")
        assert problem["line"] == first + 1
        assert f"{OTHER_DIMS}" in problem["detail"] and f"{NEW_DIMS}" in problem["detail"]
        assert await _alt_sizes(owner, tenant) == {}
