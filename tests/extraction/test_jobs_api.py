"""The jobs endpoints read pgqueuer's shared tables (no row-level security there): a tenant and
a user see only their own jobs, whatever another tenant queued."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest
from httpx import AsyncClient
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.domain.errors import RetryRequested
from pgqueuer.domain.models import Job, TracebackRecord
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.jobs import enqueue_memory_extraction, enqueue_thread_summary
from service.jobs.queue import UncountedRetry, queries_for
from service.jobs.status import JobStatusRepository
from tests.conftest import bearer, new_tenant
from tests.extraction.conftest import jobs
from tests.fixtures.factories import start_thread
from tests.plans import statements_sent, tenant_plan


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


async def test_a_pending_job_reads_its_thread_by_its_key(
    client: AsyncClient,
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
) -> None:
    """The listing finds each job's thread by the thread's key, not by reading the tenant's
    threads for each job; a payload whose thread id is not a UUID lists with no thread."""
    tenant = "t-jobsapi-" + new_tenant()
    alice = bearer(settings, tenant, "alice")
    threads = [uuid.UUID(await start_thread(client, alice)) for _ in range(2)]
    # Enough of the tenant's threads that reading them all costs more than a look-up per job.
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO thread (tenant_id, id, user_id) "
                "SELECT :tenant, gen_random_uuid(), 'alice' FROM generate_series(1, 3000)"
            ),
            {"tenant": tenant},
        )
        await connection.execute(text("ANALYZE thread"))
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(text("SELECT 1"))
        await enqueue_thread_summary(session, tenant, threads[0])
    async with runtime_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO pgqueuer (priority, entrypoint, payload, status) "
                "VALUES (0, 'thread_summary', convert_to(:body, 'UTF8'), 'queued')"
            ),
            {"body": f'{{"tenant_id": "{tenant}", "thread_id": "not-a-uuid"}}'},
        )

    admin = await client.get("/v1/admin/jobs", headers=bearer(settings, tenant, "root", admin=True))
    assert admin.status_code == 200, admin.text
    assert sorted(str(job["thread_id"]) for job in admin.json()["pending"]) == sorted(
        [str(threads[0]), "None"]
    )
    with statements_sent(runtime_engine) as sent:
        async with tenant_transaction(sessions, tenant) as session:
            pending = await JobStatusRepository(session, tenant).pending(
                ["thread_summary"], user_id=None, limit=10
            )
    assert [job.thread_id for job in pending] == [threads[0], None]
    [listing] = [(s, p) for s, p in sent if "LEFT JOIN thread t" in s]
    nodes = await tenant_plan(runtime_engine, tenant, listing, analyze=True)
    thread_reads = [node for node in nodes if node.get("Relation Name") == "thread"]
    # One look-up per job by the thread's key, never a read of the tenant's 3,002 threads.
    assert thread_reads and all(
        node.get("Index Name") == "pk_thread" and float(node["Actual Rows"]) <= 1
        for node in thread_reads
    ), thread_reads


CLAIM_SQL = """
    UPDATE pgqueuer SET status = 'picked', heartbeat = now(), queue_manager_id = $2
     WHERE id = $1 RETURNING *
"""
"""The job picked as a worker's dequeue picks it (only this test's job, by its id)."""


async def fail_a_run(engine: AsyncEngine, job_id: int, retry: RetryRequested) -> None:
    """One run of the job that failed, recorded as the worker records it: picked, then queued
    again with pgqueuer's retry record of `retry`."""
    _, connect = engine.dialect.create_connect_args(engine.url)
    raw = await asyncpg.connect(**connect)
    try:
        row = await raw.fetchrow(CLAIM_SQL, job_id, uuid.uuid4())
        assert row is not None
        job = Job.model_validate(dict(row))
        record = TracebackRecord.from_exception(
            exc=retry, job_id=job.id, additional_context={"attempt": job.attempts}
        )
        await queries_for(AsyncpgDriver(raw)).retry_job(job, retry.delay, record)
    finally:
        await raw.close()


async def test_runs_that_failed_for_a_cause_outside_the_job_are_not_reported_as_attempts(
    client: AsyncClient,
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    runtime_engine: AsyncEngine,
) -> None:
    """pgqueuer's `attempts` counts every failed run; the worker does not count those that failed
    for a cause outside the job (a database outage, a busy pool, a shutdown), and neither do the
    jobs views: in the list, for the user and the tenant, and in the tenant's counts."""
    tenant = "t-jobsapi-" + new_tenant()
    alice = bearer(settings, tenant, "alice")
    extracting, summarising = [uuid.UUID(await start_thread(client, alice)) for _ in range(2)]
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(text("SELECT 1"))
        await enqueue_memory_extraction(session, tenant, extracting, org_writes=False)
        await enqueue_thread_summary(session, tenant, summarising)
    async with runtime_engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT entrypoint, id FROM pgqueuer "
                "WHERE convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :t"
            ),
            {"t": tenant},
        )
        ids: dict[str, int] = {row.entrypoint: row.id for row in rows}
    outage = UncountedRetry(delay=timedelta(0), reason="database unavailable")
    defect = RetryRequested(delay=timedelta(0), reason="attempt failed (RuntimeError)")
    # Extraction: two runs a database outage cut short. Summary: one such run, then a defect.
    for job_id, retries in (
        (ids["memory_extraction"], [outage, outage]),
        (ids["thread_summary"], [outage, defect]),
    ):
        for retry in retries:
            await fail_a_run(runtime_engine, job_id, retry)

    expected = [("memory_extraction", 0, 2), ("thread_summary", 1, 1)]
    mine = await jobs(client, alice)
    assert sorted((j["kind"], j["attempts"], j["uncounted_runs"]) for j in mine["pending"]) == (
        expected
    )
    admin = await client.get("/v1/admin/jobs", headers=bearer(settings, tenant, "root", admin=True))
    assert admin.status_code == 200, admin.text
    body = admin.json()
    assert sorted((j["kind"], j["attempts"], j["uncounted_runs"]) for j in body["pending"]) == (
        expected
    )
    assert {
        (c["kind"], c["status"]): (c["jobs"], c["retrying"], c["interrupted"])
        for c in body["counts"]
    } == {("memory_extraction", "queued"): (1, 0, 1), ("thread_summary", "queued"): (1, 1, 0)}
