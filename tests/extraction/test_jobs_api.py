"""The jobs endpoints read pgqueuer's shared tables (no row-level security there): a tenant and
a user see only their own jobs, whatever another tenant queued."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.jobs import enqueue_memory_extraction, enqueue_thread_summary
from tests.conftest import bearer, new_tenant
from tests.extraction.conftest import jobs
from tests.fixtures.factories import start_thread


@pytest.fixture
async def sessions(runtime_engine: AsyncEngine) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    yield create_sessionmaker(runtime_engine)
    # No worker runs in this module's app; leave no job behind for another module's worker.
    async with runtime_engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM pgqueuer WHERE convert_from(payload, 'UTF8') LIKE '%t-jobsapi-%'")
        )


async def test_each_tenant_and_user_sees_only_its_own_pending_jobs(
    client: AsyncClient, settings: Settings, sessions: async_sessionmaker[AsyncSession]
) -> None:
    tenant, other = "t-jobsapi-" + new_tenant(), "t-jobsapi-" + new_tenant()
    alice = bearer(settings, tenant, "alice")
    thread_id = uuid.UUID(await start_thread(client, alice))
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(text("SELECT 1"))
        await enqueue_memory_extraction(session, tenant, thread_id, org_writes=False)
        await enqueue_thread_summary(session, tenant, thread_id)
        # Deduplicated: the same pass is not queued twice while it waits.
        await enqueue_memory_extraction(session, tenant, thread_id, org_writes=False)

    mine = await jobs(client, alice)
    assert mine["extraction"] == "off"  # this app runs no worker
    assert sorted((j["kind"], j["status"], j["attempts"]) for j in mine["pending"]) == [
        ("memory_extraction", "queued", 0),
        ("thread_summary", "queued", 0),
    ]
    assert {j["thread_id"] for j in mine["pending"]} == {str(thread_id)}
    assert {j["user_id"] for j in mine["pending"]} == {"alice"}

    assert (await jobs(client, bearer(settings, tenant, "bob")))["pending"] == []
    assert (await jobs(client, bearer(settings, other, "alice")))["pending"] == []

    admin = await client.get("/v1/admin/jobs", headers=bearer(settings, tenant, "root", admin=True))
    counts = {(c["kind"], c["status"]): c["jobs"] for c in admin.json()["counts"]}
    assert counts == {("memory_extraction", "queued"): 1, ("thread_summary", "queued"): 1}
    elsewhere = await client.get(
        "/v1/admin/jobs", headers=bearer(settings, other, "root", admin=True)
    )
    assert elsewhere.json()["counts"] == [] and elsewhere.json()["pending"] == []
