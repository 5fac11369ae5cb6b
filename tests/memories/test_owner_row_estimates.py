"""The planner's count of one owner's memories of a kind, among many tenants: the statement
planned for a large owner walks the owner's own vector graph only if the planner knows the owner
holds thousands of memories there, not the few dozen that each condition's share of the table
multiplied together makes of them (a user belongs to one tenant, so the tenant's condition
narrows nothing the user's has not)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.memories.filters import MemoryFilter
from service.memories.index_builds import (
    create_index_concurrently,
    drop_index_concurrently,
    hnsw_definition,
)
from service.memories.owner_index_names import owner_index_name
from service.memories.owner_indexes import live_column
from tests.conftest import new_tenant
from tests.memories.large_owners import explained_as_served
from tests.plans import plan_nodes
from tests.search_params import search_params

OWNER_FACTS = 3_000
OTHER_TENANTS = 12
OTHER_TENANTS_MEMORIES = 1_500
USER = "owner"

# Each row a vector of its own: the subquery names the row's number, so it runs once per row,
# not once for the statement.
INSERT_MEMORIES_SQL = """
INSERT INTO memory (tenant_id, scope, user_id, kind, text, embedding)
SELECT CAST(:tenant AS text), 'user', CAST(:user AS text), CAST(:kind AS text),
       'User keeps note ' || n || ' about ' || (ARRAY['tea', 'piano', 'chess', 'rain'])[n % 4 + 1],
       CASE WHEN :vectors THEN
            (SELECT CAST(CAST(array_agg(random()) AS real[]) AS vector)
               FROM generate_series(1, CAST(:dims AS int)) WHERE n > 0)
       END
  FROM generate_series(1, CAST(:count AS int)) AS n
"""


async def _write(
    owner_engine: AsyncEngine, tenant: str, kind: str, count: int, *, dims: int | None
) -> None:
    """`count` memories of `kind` for `USER` of `tenant` (vectors of `dims` when given)."""
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("SELECT set_config('app.tenant_id', :t, true)"), {"t": tenant}
        )
        await connection.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
        await connection.execute(
            text("INSERT INTO user_account (tenant_id, id) VALUES (:t, :u)"),
            {"t": tenant, "u": USER},
        )
        await connection.execute(
            text(INSERT_MEMORIES_SQL),
            {
                "tenant": tenant,
                "user": USER,
                "kind": kind,
                "count": count,
                "vectors": dims is not None,
                "dims": dims or 0,
            },
        )


async def _dimensions(owner_engine: AsyncEngine) -> int:
    async with owner_engine.connect() as connection:
        column = await live_column(owner_engine)
        if column.dims is not None:
            return column.dims
        typmod = await connection.scalar(
            text(
                "SELECT atttypmod FROM pg_attribute "
                "WHERE attrelid = 'memory'::regclass AND attname = :column"
            ),
            {"column": column.name},
        )
        assert isinstance(typmod, int) and typmod > 0
        return typmod


@pytest.fixture
async def large_owner_among_tenants(owner_engine: AsyncEngine) -> AsyncIterator[tuple[str, str]]:
    """`USER` of a tenant of its own with `OWNER_FACTS` facts and an HNSW index partial to them,
    among `OTHER_TENANTS` tenants of `OTHER_TENANTS_MEMORIES` memories each, the table analyzed;
    the tenant and the index's name. Everything removed afterwards."""
    dims = await _dimensions(owner_engine)
    tenant = new_tenant()
    others = [new_tenant() for _ in range(OTHER_TENANTS)]
    await _write(owner_engine, tenant, "semantic", OWNER_FACTS, dims=dims)
    for other in others:
        await _write(owner_engine, other, "episodic", OTHER_TENANTS_MEMORIES, dims=None)
    column = await live_column(owner_engine)
    name = owner_index_name(tenant, Owner.user(USER).key, column.name, "semantic")
    condition = (
        f"WHERE tenant_id = '{tenant}' AND scope = 'user' AND user_id = '{USER}' "
        "AND kind = 'semantic'"
    )
    autocommit = await owner_engine.connect()
    await autocommit.execution_options(isolation_level="AUTOCOMMIT")
    try:
        await create_index_concurrently(autocommit, name, f"{hnsw_definition(column)} {condition}")
        await autocommit.execute(text("ANALYZE memory"))
        yield tenant, name
    finally:
        await drop_index_concurrently(autocommit, name)
        await autocommit.close()
        async with owner_engine.begin() as connection:
            for each in (tenant, *others):
                await connection.execute(
                    text("SELECT set_config('app.tenant_id', :t, true)"), {"t": each}
                )
                # Its users and memories go with it (ON DELETE CASCADE).
                await connection.execute(text("DELETE FROM tenant WHERE id = :t"), {"t": each})


async def _estimated_rows(owner_engine: AsyncEngine, tenant: str, kind: str) -> float:
    """The planner's estimate of `USER`'s memories of `kind`, the owner written in as the
    statement planned for a large owner writes it."""
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("SELECT set_config('app.tenant_id', :t, true)"), {"t": tenant}
        )
        explained: Any = await connection.scalar(
            text(
                "EXPLAIN (FORMAT JSON) SELECT id FROM memory "
                f"WHERE tenant_id = '{tenant}' AND scope = 'user' AND user_id = '{USER}' "
                f"AND kind = '{kind}'"
            )
        )
    document = json.loads(explained) if isinstance(explained, str) else explained
    return float(document[0]["Plan"]["Plan Rows"])


async def test_a_large_owners_memories_of_a_kind_are_counted_as_they_are_and_walked(
    app: FastAPI, owner_engine: AsyncEngine, large_owner_among_tenants: tuple[str, str]
) -> None:
    tenant, index_name = large_owner_among_tenants
    # Each condition's share multiplied would make them 3,000 times the tenant's share of the
    # table (at most a sixth here, far less in a deployment of many tenants) times the share
    # of facts.
    estimate = await _estimated_rows(owner_engine, tenant, "semantic")
    assert OWNER_FACTS / 2 <= estimate <= OWNER_FACTS * 2
    # A kind the owner has none of is not taken for the owner's share of the table's episodes.
    assert await _estimated_rows(owner_engine, tenant, "episodic") < 100

    # The statement planned for the owner (its ids written in), on the generic plan the
    # service makes for it, with no plan priced out: the planner chooses between sorting the
    # owner's 3,000 facts and walking their graph on its own estimates, as for the service.
    dims = len(await app.state.mneme.embedding_backfill.embedder.embed_query("piano"))
    question = np.random.default_rng(3).random(dims).astype(np.float32).tolist()
    params = search_params(
        MemoryFilter.build([Owner.user(USER)], kinds=["semantic"]),
        "what does the user play",
        query_embedding=question,
        use_lexical=False,
        use_vector=True,
    )
    written = frozenset({f"semantic:{Owner.user(USER).key}"})
    document = await explained_as_served(app, tenant, params, written)
    [plan] = json.loads(document) if isinstance(document, str) else document
    scans = [node for node in plan_nodes(plan["Plan"]) if node.get("Index Name") == index_name]
    assert scans, json.dumps(plan)[:3000]
    # The walk returned the pool, not all of the owner's facts.
    assert all(node["Actual Rows"] <= params.pool for node in scans)
