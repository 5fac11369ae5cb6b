"""A page of the admin's user listing costs its users' look-ups, not their memories: each user's
last activity is its newest entries (no user's memories are aggregated for it), and the memories
are counted for the page's users alone. On one node: a Citus coordinator's plan names no
table's scans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.repository import AdminRepository
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from tests.admin.conftest import seed_user
from tests.plans import statements_sent, tenant_plan


async def test_a_page_of_one_user_reads_each_users_newest_memory_and_counts_one_users(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    for user in ("ada", "bob", "cy", "dee"):
        await seed_user(client, settings, owner_engine, tenant, user)
    with statements_sent(runtime_engine) as sent:
        async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
            page = await AdminRepository(session, tenant).users(
                active_after=datetime.now(UTC) - timedelta(days=1), limit=1
            )
    assert [row.id for row in page] == ["ada"]
    [listing] = [(s, p) for s, p in sent if "WITH page AS" in s]
    nodes = await tenant_plan(runtime_engine, tenant, listing, analyze=True)
    memory_reads = [node for node in nodes if node.get("Relation Name") == "memory"]
    # Read for the activity: at most the four users, one newest entry each (a LIMIT 1 over the
    # index in time order; a plan that walks the users in id order stops at the page's first,
    # and which plan the planner takes depends on the tables' statistics, so on what the tests
    # run before it stored); for the counts: the page's one user.
    activity, counts = sorted((node["Actual Loops"] for node in memory_reads), reverse=True)
    assert 1 <= activity <= 4 and counts == 1, memory_reads
