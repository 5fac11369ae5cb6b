"""Changing the embedding model on Citus: the second column is filled across shards, its
expression index is built concurrently on every shard, a large owner's own vector graphs are
built on it (on every shard) before its tenant switches, tenants switch one by one, and the old
column is dropped and added again through Citus's DDL propagation; searches compare with one
model's vectors throughout. The change is made back at the end, so the cluster's other tests
find the column they started with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.memories import reembed
from service.memories.owner_index_names import owner_index_name
from service.memories.owner_indexes import OwnerIndexes
from service.memories.vector_columns import VectorColumns
from service.providers import Embedder
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import EMBEDDING_MODEL, FakeOpenAIServer
from tests.memories.large_owners import BUILD_FROM, USER, large_owner
from tests.memories.model_change import (
    NEW_DIMS,
    REFRESH_SECONDS,
    ServerVectors,
    assert_one_model,
    running_app,
    search_memories,
    second_model,
)
from tests.memories.test_bounded_search import owners_found

pytestmark = pytest.mark.citus

SETTLE = 2 * REFRESH_SECONDS + 0.5
KINDS_WITH_GRAPHS = ("semantic", "episodic")
"""The kinds `large_owner` gives its user enough memories of for a graph of their own."""
TEXTS = [
    "Lena lives in Lisbon and cycles to work",
    "Lena's sister Ana is a nurse in Porto",
    "Lena is allergic to peanuts",
    "Lena prefers tea over coffee",
]


@pytest.fixture
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(native_dims=NEW_DIMS) as server:
        yield server


async def _shard_indexes_valid(owner: AsyncEngine, name: str) -> list[bool]:
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT result FROM run_command_on_shards('memory', $$SELECT bool_and(i.indisvalid)"
                " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                # run_command_on_shards reads the command as a format() string: %% is a %.
                f" WHERE c.relname LIKE '{name}%%'$$)"
            )
        )
        return [row.result == "t" for row in rows]


async def _shard_table_graphs(owner: AsyncEngine) -> set[int]:
    """How many HNSW indexes each shard of memory holds that are not an owner's own."""
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT result FROM run_command_on_shards('memory', $$SELECT count(*)"
                " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = '%s'::regclass"
                " AND a.amname = 'hnsw' AND c.relname NOT LIKE 'ix\\_memory\\_owner\\_%%'$$)"
            )
        )
        return {int(row.result) for row in rows}


async def _shard_indexes_present(owner: AsyncEngine, names: list[str]) -> list[str]:
    """Those of `names` with a copy on any shard."""
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT result FROM run_command_on_workers($$SELECT string_agg(indexname, ' ') "
                "FROM pg_indexes WHERE indexname LIKE 'ix\\_memory\\_owner\\_%'$$)"
            )
        )
        on_workers = " ".join(result or "" for result in rows.scalars())
    return [name for name in names if name + "_" in on_workers]


async def test_a_change_of_model_on_citus_switches_tenants_and_drops_the_old_column(
    citus_settings: Settings, citus_owner_engine: AsyncEngine, embeddings_server: FakeOpenAIServer
) -> None:
    settings = citus_settings.model_copy(
        update={
            "embedding_second": second_model(embeddings_server.base_url),
            "embedding_columns_refresh_seconds": REFRESH_SECONDS,
        }
    )
    owner = citus_owner_engine
    async with running_app(settings) as (app, client):
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        embedders: dict[str, Embedder] = {old.model_name: old, new.model_name: new}
        tenants = [new_tenant(), new_tenant()]
        headers = [bearer(settings, tenant, "lena") for tenant in tenants]
        for each in headers:
            await remember_all(client, each, *({"text": t} for t in TEXTS))
        query = "Where does Lena live?"
        # A tenant whose user has graphs of their own (facts and episodes) on the live column.
        large_tenant = new_tenant()
        await large_owner(app, client, settings, large_tenant)
        user = Owner.user(USER).key
        graphs = OwnerIndexes(owner, build_from=BUILD_FROM, most=1_000)

        def graph_names(column: str) -> list[str]:
            return [owner_index_name(large_tenant, user, column, k) for k in KINDS_WITH_GRAPHS]

        await graphs.refresh()
        for name in graph_names("embedding"):
            assert all(await _shard_indexes_valid(owner, name))

        column = await reembed.start(owner, old, new)
        # From the start, every shard refuses a vector of another size in the claimed column.
        async with owner.connect() as connection:
            with pytest.raises(IntegrityError, match=f"ck_memory_{column}_dims"):
                await connection.execute(
                    text(f"UPDATE memory SET {column} = '[1,2,3]' WHERE tenant_id = :t"),
                    {"t": tenants[0]},
                )
        await columns.refresh(app.state.mneme.engine)
        for each in headers:
            assert (
                await assert_one_model(
                    await search_memories(client, each, query, limit=3), query, embedders
                )
                == columns.live().model
            )
        current = await reembed.run(
            owner, new, batch_size=16, settle_seconds=SETTLE, owner_indexes=graphs
        )
        assert current.memories_missing == 0 and current.tenants_switched == current.tenants
        # No shard keeps a graph of the table's own on either column: only the owners' graphs.
        assert await _shard_table_graphs(owner) == {0}
        # The large owner's graphs are on the new column, on every shard, and its tenant's
        # search finds them there; the old column's stay until the finish.
        for name in graph_names(column) + graph_names("embedding"):
            assert all(await _shard_indexes_valid(owner, name)), name
        await columns.refresh(app.state.mneme.engine)
        read = columns.read_by(large_tenant)
        assert read.name == column
        found = await owners_found(app, large_tenant, (Owner.user(USER), Owner.org()), read)
        assert {f"{kind}:{user}" for kind in KINDS_WITH_GRAPHS} <= found.own_indexes
        for each in headers:
            answered = await search_memories(client, each, query, limit=3)
            assert await assert_one_model(answered, query, embedders) == new.model_name

        assert await reembed.finish(owner, new, settle_seconds=SETTLE) == column
        assert not await _shard_indexes_present(owner, graph_names("embedding"))
        # The backfill's index of unembedded memories, on every shard, for the live column.
        assert all(await _shard_indexes_valid(owner, f"ix_memory_{column}_unembedded"))
        await columns.refresh(app.state.mneme.engine)
        for each in headers:
            answered = await search_memories(client, each, query, limit=3)
            assert await assert_one_model(answered, query, embedders) == new.model_name

        # And back, so the cluster's other tests read the configured model's column again.
        back = await reembed.start(owner, old, old)
        await reembed.run(owner, old, batch_size=16, settle_seconds=SETTLE, owner_indexes=graphs)
        for name in graph_names("embedding"):
            assert all(await _shard_indexes_valid(owner, name)), name
        assert await reembed.finish(owner, old, settle_seconds=SETTLE) == back
        assert back == "embedding"
        assert not await _shard_indexes_present(owner, graph_names(column))
        # The owners' graphs dropped again, as the cluster's other tests expect none.
        await OwnerIndexes(owner, build_from=0, most=0).refresh()
        assert all(await _shard_indexes_valid(owner, "ix_memory_unembedded"))
        await columns.refresh(app.state.mneme.engine)
        for each in headers:
            answered = await search_memories(client, each, query, limit=3)
            assert await assert_one_model(answered, query, embedders) == old.model_name
