"""Tenant isolation on Citus, in raw SQL as the runtime role, with the two tenants' rows on
different workers: RLS holds on every shard because the tenant context reaches the workers."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from service.db import set_tenant
from tests.db.test_rls import TENANT_TABLES, seed_every_table

pytestmark = pytest.mark.citus

WORKER_OF_TENANT_SQL = text(
    """
    SELECT n.nodeport
      FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
     WHERE p.shardid = get_shard_id_for_distribution_column('tenant', CAST(:tenant AS text))
    """
)


async def _worker_port(engine: AsyncEngine, tenant: str) -> int:
    async with engine.connect() as connection:
        port = (await connection.execute(WORKER_OF_TENANT_SQL, {"tenant": tenant})).scalar_one()
    return int(port)


async def _tenants_on_two_workers(engine: AsyncEngine) -> tuple[str, str]:
    first = "t-" + uuid.uuid4().hex[:12]
    first_port = await _worker_port(engine, first)
    while True:
        second = "t-" + uuid.uuid4().hex[:12]
        if await _worker_port(engine, second) != first_port:
            return first, second


@pytest.fixture(scope="module")
async def two_tenants(
    citus_runtime_engine: AsyncEngine, citus_owner_engine: AsyncEngine
) -> tuple[str, str]:
    tenant_a, tenant_b = await _tenants_on_two_workers(citus_owner_engine)
    await seed_every_table(citus_runtime_engine, tenant_a)
    await seed_every_table(citus_runtime_engine, tenant_b)
    return tenant_a, tenant_b


async def test_every_tenant_table_is_distributed_and_colocated_with_tenant(
    citus_owner_engine: AsyncEngine,
) -> None:
    async with citus_owner_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT logicalrelid::text AS name, partmethod::text AS method, colocationid "
                    "FROM pg_dist_partition"
                )
            )
        ).all()
    distributed = {row.name: (row.method, row.colocationid) for row in rows}
    assert set(TENANT_TABLES) <= set(distributed)
    assert {distributed[t] for t in TENANT_TABLES} == {distributed["tenant"]}
    assert distributed["tenant"][0] == "h"
    assert not any(name.startswith("pgqueuer") for name in distributed)


@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_an_unfiltered_select_sees_only_the_current_tenant_across_shards(
    citus_runtime_engine: AsyncEngine, two_tenants: tuple[str, str], table: str
) -> None:
    tenant_a, tenant_b = two_tenants
    column = "id" if table == "tenant" else "tenant_id"
    async with citus_runtime_engine.begin() as connection:
        await set_tenant(connection, tenant_a)
        seen = (await connection.execute(text(f"SELECT DISTINCT {column} FROM {table}"))).all()
    assert [row[0] for row in seen] == [tenant_a]
    async with citus_runtime_engine.begin() as connection:
        await set_tenant(connection, tenant_b)
        seen = (await connection.execute(text(f"SELECT DISTINCT {column} FROM {table}"))).all()
    assert [row[0] for row in seen] == [tenant_b]


async def test_an_unfiltered_update_touches_only_the_current_tenant(
    citus_runtime_engine: AsyncEngine, two_tenants: tuple[str, str]
) -> None:
    tenant_a, _ = two_tenants
    async with citus_runtime_engine.begin() as connection:
        await set_tenant(connection, tenant_a)
        result = await connection.execute(text("UPDATE user_account SET name = 'renamed'"))
    assert result.rowcount == 1


async def test_writing_a_row_for_another_tenant_is_refused_by_the_worker(
    citus_runtime_engine: AsyncEngine, two_tenants: tuple[str, str]
) -> None:
    tenant_a, tenant_b = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with citus_runtime_engine.begin() as connection:
            await set_tenant(connection, tenant_a)
            await connection.execute(
                text("INSERT INTO user_account (tenant_id, id) VALUES (:t, 'intruder')"),
                {"t": tenant_b},
            )


async def test_set_config_does_not_reach_the_workers_which_is_why_set_local_is_used(
    citus_runtime_engine: AsyncEngine, two_tenants: tuple[str, str]
) -> None:
    tenant_a, _ = two_tenants
    async with citus_runtime_engine.begin() as connection:
        await connection.execute(
            text("SELECT set_config('app.tenant_id', :t, true)"), {"t": tenant_a}
        )
        count = (await connection.execute(text("SELECT count(*) FROM user_account"))).scalar()
    assert count == 0
