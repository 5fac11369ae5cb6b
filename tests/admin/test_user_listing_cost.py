"""A page of the admin's user listing costs its users' look-ups, not their memories: each user's
last activity is its newest entries (no user's memories are aggregated for it), and the memories
are counted for the page's users alone. On one node: a Citus coordinator's plan names no
table's scans."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from httpx import AsyncClient
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.repository import USERS_SQL
from service.config import Settings
from tests.admin.conftest import seed_user
from tests.plans import plan_nodes


async def test_a_page_of_one_user_reads_each_users_newest_memory_and_counts_one_users(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    for user in ("ada", "bob", "cy", "dee"):
        await seed_user(client, settings, owner_engine, tenant, user)
    async with runtime_engine.connect() as connection:
        raw = (await connection.get_raw_connection()).driver_connection
        async with raw.transaction():
            await raw.execute(f"SELECT set_config('app.tenant_id', '{tenant}', true)")
            sql = str(USERS_SQL.compile(dialect=postgresql.dialect()))
            for n, name in enumerate(
                ("tenant_id", "user_id", "after_id", "active_after", "active_before", "limit")
            ):
                sql = sql.replace(f"%({name})s", f"${n + 1}")
            explained = await raw.fetchval(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                *(tenant, None, None, datetime.now(UTC) - timedelta(days=1), None, 1),
            )
    # The service's connections decode JSON themselves.
    [plan] = json.loads(explained) if isinstance(explained, str) else explained
    memory_reads = [
        node for node in plan_nodes(plan["Plan"]) if node.get("Relation Name") == "memory"
    ]
    # Read for the activity: the four users, one newest entry each (a LIMIT 1 over the index in
    # time order); for the counts: the page's one user.
    assert sorted(node["Actual Loops"] for node in memory_reads) == [1, 4], memory_reads
