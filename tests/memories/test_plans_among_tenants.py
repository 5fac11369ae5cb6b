"""The plans of the search statement in a database of many tenants, where the planner's
estimate of one tenant's rows is the average tenant's, and a user belongs to one tenant.

A large owner's memories of a kind are counted as they are, not as the few dozen that the
tenant's, the user's and the kind's shares of the table multiplied together make of them, so
the statement planned for the owner walks the owner's own vector graph. And the organization's
memories in the plan made once for every owner (a tenant's average size unknown to it) are
found by their own index, not by reading every memory of the tenant; and on that plan, the
memories the statement reads by their keys (candidates, neighbours, hits) are looked up one by
one, never read with all of a large tenant's memories in key order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.auth.owner import Owner
from service.db import create_sessionmaker, tenant_transaction
from service.memories.dates import query_time_window
from service.memories.filters import MemoryFilter
from service.memories.index_builds import (
    create_index_concurrently,
    drop_index_concurrently,
    hnsw_definition,
)
from service.memories.owner_index_names import owner_index_name
from service.memories.owner_indexes import indexed_columns
from service.providers import Embedder
from tests.conftest import new_tenant
from tests.memories.large_owners import explained_as_served
from tests.plans import plan_nodes
from tests.search_params import search_params

OWNER_FACTS = 3_000
OTHER_TENANTS = 12
USERS_OF_OTHER_TENANTS = 1_000
MEMORIES_OF_OTHER_USERS = 2
SMALL_TENANTS = 1_000
USER = "owner"
SMALL_USER = "ada"

# Each row a vector of its own: the subquery names the row's number, so it runs once per row,
# not once for the statement. Without a user, the organization's.
INSERT_MEMORIES_SQL = """
INSERT INTO memory (tenant_id, scope, user_id, kind, text, embedding)
SELECT CAST(:tenant AS text), CASE WHEN CAST(:user AS text) IS NULL THEN 'org' ELSE 'user' END,
       CAST(:user AS text), CAST(:kind AS text),
       'User keeps note ' || n || ' about ' || (ARRAY['tea', 'piano', 'chess', 'rain'])[n % 4 + 1],
       CASE WHEN :vectors THEN
            (SELECT CAST(CAST(array_agg(random()) AS real[]) AS vector)
               FROM generate_series(1, CAST(:dims AS int)) WHERE n > 0)
       END
  FROM generate_series(1, CAST(:count AS int)) AS n
"""


def _as_tenant(owner_engine: AsyncEngine, tenant: str) -> AbstractAsyncContextManager[AsyncSession]:
    """A transaction of the table's owner role in `tenant` (row-level security applies)."""
    return tenant_transaction(create_sessionmaker(owner_engine), tenant)


async def _add_tenant(owner_engine: AsyncEngine, tenant: str, *users: str) -> None:
    async with _as_tenant(owner_engine, tenant) as session:
        await session.execute(text("INSERT INTO tenant (id) VALUES (:t)"), {"t": tenant})
        for user in users:
            await session.execute(
                text("INSERT INTO user_account (tenant_id, id) VALUES (:t, :u)"),
                {"t": tenant, "u": user},
            )


async def _write(
    owner_engine: AsyncEngine,
    tenant: str,
    user: str | None,
    kind: str,
    count: int,
    *,
    dims: int | None,
) -> None:
    """`count` memories of `kind` for `user` of `tenant`, or its organization's for None
    (vectors of `dims` when given)."""
    async with _as_tenant(owner_engine, tenant) as session:
        await session.execute(
            text(INSERT_MEMORIES_SQL),
            {
                "tenant": tenant,
                "user": user,
                "kind": kind,
                "count": count,
                "vectors": dims is not None,
                "dims": dims or 0,
            },
        )


# `{tenants}` tenants named `{prefix}<n>`, each of `{users}` users of `{memories}` memories, in
# one statement: the tenant setting changes before each tenant's rows, as row-level security
# checks them against it.
OTHER_TENANTS_SQL = """
DO $$
BEGIN
    FOR n IN 1..{tenants} LOOP
        PERFORM set_config('app.tenant_id', '{prefix}' || n, true);
        INSERT INTO tenant (id) VALUES ('{prefix}' || n);
        INSERT INTO user_account (tenant_id, id)
        SELECT '{prefix}' || n, 'user-' || u FROM generate_series(1, {users}) AS u;
        INSERT INTO memory (tenant_id, scope, user_id, kind, text)
        SELECT '{prefix}' || n, 'user', 'user-' || u, 'episodic', 'User shared: note ' || m
          FROM generate_series(1, {users}) AS u CROSS JOIN generate_series(1, {memories}) AS m;
    END LOOP;
END $$
"""

# Each of those tenants removed, its users and memories with it (ON DELETE CASCADE).
DELETE_OTHER_TENANTS_SQL = """
DO $$
BEGIN
    FOR n IN 1..{tenants} LOOP
        PERFORM set_config('app.tenant_id', '{prefix}' || n, true);
        DELETE FROM tenant WHERE id = '{prefix}' || n;
    END LOOP;
END $$
"""


@asynccontextmanager
async def _among_other_tenants(
    owner_engine: AsyncEngine,
    tenant: str,
    *,
    tenants: int = OTHER_TENANTS,
    users: int = USERS_OF_OTHER_TENANTS,
    memories: int = MEMORIES_OF_OTHER_USERS,
) -> AsyncIterator[None]:
    """`tenants` tenants of `users` users of `memories` memories each beside `tenant` (as in a
    deployment, most users are other tenants' and small), the table analyzed; afterwards every
    one of them removed, `tenant` too."""
    shape = {"tenants": tenants, "prefix": f"{tenant}-other-"}
    async with owner_engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        try:
            await connection.exec_driver_sql(
                OTHER_TENANTS_SQL.format(users=users, memories=memories, **shape)
            )
            await connection.execute(text("ANALYZE memory"))
            yield
        finally:
            await connection.exec_driver_sql(DELETE_OTHER_TENANTS_SQL.format(**shape))
            async with _as_tenant(owner_engine, tenant) as session:
                await session.execute(text("DELETE FROM tenant WHERE id = :t"), {"t": tenant})


@pytest.fixture
async def large_owner_among_tenants(
    app: FastAPI, owner_engine: AsyncEngine
) -> AsyncIterator[tuple[str, str]]:
    """`USER` of a tenant of its own with `OWNER_FACTS` facts and an HNSW index partial to them,
    among other tenants; the tenant and the index's name."""
    dims = _dimensions(app)
    tenant = new_tenant()
    await _add_tenant(owner_engine, tenant, USER)
    await _write(owner_engine, tenant, USER, "semantic", OWNER_FACTS, dims=dims)
    [column] = await indexed_columns(owner_engine)
    name = owner_index_name(tenant, Owner.user(USER).key, column.name, "semantic")
    condition = (
        f"WHERE tenant_id = '{tenant}' AND scope = 'user' AND user_id = '{USER}' "
        "AND kind = 'semantic'"
    )
    autocommit = await owner_engine.connect()
    await autocommit.execution_options(isolation_level="AUTOCOMMIT")
    try:
        graph = hnsw_definition(column, app.state.mneme.settings.owner_vector_index_ef_construction)
        await create_index_concurrently(autocommit, name, f"{graph} {condition}")
        async with _among_other_tenants(owner_engine, tenant):
            yield tenant, name
    finally:
        await drop_index_concurrently(autocommit, name)
        await autocommit.close()


@pytest.fixture
async def organization_in_a_large_tenant(
    app: FastAPI, owner_engine: AsyncEngine
) -> AsyncIterator[str]:
    """A tenant of `USER` with `OWNER_FACTS` facts, `SMALL_USER` with 20 and an organization
    with 30 (both with vectors), among other tenants; the tenant."""
    dims = _dimensions(app)
    tenant = new_tenant()
    await _add_tenant(owner_engine, tenant, USER, SMALL_USER)
    await _write(owner_engine, tenant, USER, "semantic", OWNER_FACTS, dims=None)
    await _write(owner_engine, tenant, SMALL_USER, "semantic", 20, dims=dims)
    await _write(owner_engine, tenant, None, "semantic", 30, dims=dims)
    async with _among_other_tenants(owner_engine, tenant):
        yield tenant


@pytest.fixture
async def large_tenant_among_many_small_ones(
    app: FastAPI, owner_engine: AsyncEngine
) -> AsyncIterator[str]:
    """A tenant of `USER` with `OWNER_FACTS` facts among `SMALL_TENANTS` tenants of two
    memories each, the table analyzed: the average tenant, all a plan made for every tenant
    knows of one, holds a few memories. The tenant."""
    tenant = new_tenant()
    await _add_tenant(owner_engine, tenant, USER)
    await _write(owner_engine, tenant, USER, "semantic", OWNER_FACTS, dims=None)
    async with _among_other_tenants(
        owner_engine, tenant, tenants=SMALL_TENANTS, users=1, memories=2
    ):
        yield tenant


def _dimensions(app: FastAPI) -> int:
    """The dimension of the vectors the service stores and searches with."""
    embedder: Embedder = app.state.mneme.embedding_backfill.embedder
    return embedder.dims


def _question(dims: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(3).random(dims).astype(np.float32)]


async def _estimated_rows(owner_engine: AsyncEngine, tenant: str, kind: str) -> float:
    """The planner's estimate of `USER`'s memories of `kind`, the owner written in as the
    statement planned for a large owner writes it."""
    async with _as_tenant(owner_engine, tenant) as session:
        explained: Any = await session.scalar(
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

    # The statement planned for the owner (its ids written in), on the generic plan the
    # service makes for it, with no plan priced out: the planner chooses between sorting the
    # owner's 3,000 facts and walking their graph on its own estimates, as for the service.
    dims = _dimensions(app)
    params = search_params(
        MemoryFilter.build([Owner.user(USER)], kinds=["semantic"]),
        "what does the user play",
        query_embedding=_question(dims),
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


async def test_the_organizations_memories_are_found_by_their_index_on_the_plan_for_any_owner(
    app: FastAPI, organization_in_a_large_tenant: str
) -> None:
    tenant = organization_in_a_large_tenant
    dims = _dimensions(app)
    params = search_params(
        MemoryFilter.build([Owner.user(SMALL_USER), Owner.org()]),
        "what does the user keep about tea",
        query_embedding=_question(dims),
        use_vector=True,
    )
    # The small user's search (with the organization's memories) on the generic plan, made
    # once for every owner: it knows the tenant only as an average tenant of the table.
    document = await explained_as_served(app, tenant, params, None)
    [plan] = json.loads(document) if isinstance(document, str) else document
    nodes = plan_nodes(plan["Plan"])
    # The organization's memories are read through the index of them alone (those without a
    # user). Stated by their scope, they were read through an index of every owner's memories
    # or the tenant's key, whichever the table's statistics made look cheaper: on a database
    # of many small tenants, every memory of a large tenant, for a few of its organization's.
    assert any(node.get("Index Name") == "ix_memory_org_newest" for node in nodes)
    scans = [node for node in nodes if node.get("Relation Name") == "memory"]
    read = sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in scans
    )
    # The user's 20 memories and the organization's 30, each read a few times (its lexical
    # matches, its statistics, its nearest vectors, the candidates' rows), never the other
    # user's 3,000.
    assert read < 1_000, json.dumps(scans)[:3000]


async def test_a_large_tenants_memories_are_read_by_their_keys_on_the_plan_for_any_tenant(
    app: FastAPI, large_tenant_among_many_small_ones: str
) -> None:
    tenant = large_tenant_among_many_small_ones
    params = search_params(
        MemoryFilter.build([Owner.user(USER)]),
        "what does the user keep about tea",
    )
    # The statement of any owner on its generic plan: to it, the tenant holds a few memories.
    document = await explained_as_served(app, tenant, params, None)
    [plan] = json.loads(document) if isinstance(document, str) else document
    by_key = [node for node in plan_nodes(plan["Plan"]) if node.get("Index Name") == "pk_memory"]
    # The candidates', the neighbours' and the hits' rows are read by their keys, one look-up
    # each. Joined to the table by the key's columns, the planner read the tenant's memories
    # in key order instead (a merge join, cheap for the few memories it expected): all 3,000
    # of them, for each of those joins.
    assert by_key, json.dumps(plan)[:3000]
    for node in by_key:
        assert "AND (id = " in node["Index Cond"], json.dumps(node)[:3000]
        assert node["Actual Rows"] <= node["Actual Loops"], json.dumps(node)[:3000]


async def test_the_memories_of_a_named_time_are_read_by_the_owners_index_on_the_plan_for_any_owner(
    app: FastAPI, organization_in_a_large_tenant: str
) -> None:
    tenant = organization_in_a_large_tenant
    window = query_time_window("what did I do last week", datetime.now(UTC))
    assert window is not None
    # A context's section (kinds and lifecycles bound) of the small user with the organization,
    # on the plan made once for every owner: the scans of the memories of the time the query
    # names read an index of the owner's own memories, never the tenant's memories (the other
    # user's 3,000, whose event times are not in it). The user's is the index of event times
    # by owner and kind; for the organization's 30 the planner may as well read the index of
    # the organization's memories (`ix_memory_org_newest`), as cheap for so few, by the
    # statistics its sample drew. A large owner's searches run on a plan of their own.
    params = search_params(
        MemoryFilter.build(
            [Owner.user(SMALL_USER), Owner.org()], kinds=["episodic"], lifecycles=["confirmed"]
        ),
        "what did I do",
        window_start=window.start,
        window_end=window.end,
    )
    document = await explained_as_served(app, tenant, params, None)
    [plan] = json.loads(document) if isinstance(document, str) else document
    scans = [
        node
        for node in plan_nodes(plan["Plan"])
        if "event_at >= " in f"{node.get('Index Cond')} {node.get('Filter')}"
    ]
    ran = [node for node in scans if node["Actual Loops"] > 0]
    assert len(ran) == 2, json.dumps(scans)[:3000]
    owners_indexes = {"ix_memory_event_time", "ix_memory_org_newest"}
    assert {node.get("Index Name") for node in ran} <= owners_indexes, json.dumps(ran)[:3000]
    for node in ran:
        if node["Index Name"] == "ix_memory_event_time":
            assert "event_at >= " in node["Index Cond"], json.dumps(node)[:3000]
    read = sum(
        (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        for node in ran
    )
    # The user's 20 and the organization's 30, each read a few times at most, never the other
    # user's 3,000.
    assert read < 1_000, json.dumps(ran)[:3000]
