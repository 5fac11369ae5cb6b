"""A purge of the whole tenant racing writes to its data. Every write to the tenant's data holds
the tenant's write lock (shared; a write to a user's data in the same statement as the user's
lock) from before its first statement on the tenant's rows to its commit, and the tenant's
purge holds it alone: the two happen one after the other. A write in flight commits before the
purge reads anything, so what it wrote is purged (and counted); a write that comes meanwhile
waits, then finds the tenant as the purge left it: one that adds something makes the tenant
anew, as the tenant's first write does; one about something the purge removed is a 404.
Neither side answers a 5xx, and the purge's report is true (what it deleted, and nothing left
of what was there before it)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from fastapi import FastAPI
from httpx import AsyncClient, Response
from pgqueuer.adapters.drivers.asyncpg import AsyncpgDriver
from pgqueuer.domain.models import Job, TracebackRecord
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.admin.repository import AdminRepository
from service.admin.retention import RetentionSweeper
from service.auth.owner import Owner
from service.auth.principal import Principal
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.dependencies import idempotency_store
from service.extraction import health
from service.extraction.health import JobFailureRecorder
from service.extraction.hooks import WritePathScheduler
from service.extraction.recovery import WritePathRecovery
from service.jobs import MEMORY_EXTRACTION_JOB, enqueue_memory_extraction
from service.jobs.queue import UncountedRetry, queries_for
from service.jobs.sweep import enqueue_write_path_sweep
from service.jobs.worker import JobFailure
from service.kit.post_commit import PostCommitTasks
from service.memories.dependencies import memory_service
from service.memories.jobs import search_statistics_job
from service.memories.postings import StatisticsRequests
from service.memories.schemas import MemoryCreate, MemoryUpdate
from service.services import Services, unit_of_work
from service.state import AppState
from service.threads.dependencies import thread_service
from service.threads.schemas import MessageIn
from tests.admin.conftest import JSON_PATCH, rows_of, seed_user
from tests.admin.test_purge import RLS_TABLES_SQL
from tests.admin.test_purge_write_race import AFTER_A_PURGE, COUNTED, WRITES
from tests.conftest import bearer
from tests.fixtures.factories import remember_all
from tests.fixtures.locks import waiting_locks

TENANT_JOBS_SQL = (
    "SELECT count(*) FROM pgqueuer WHERE convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :t"
)


async def tenant_rows(owner_engine: AsyncEngine, tenant_id: str) -> dict[str, int]:
    """The tenant's rows in every table under row-level security, and its jobs in the queue
    (queued or running), counted as the owner: what a tenant purge must leave at zero."""
    counts: dict[str, int] = {}
    async with owner_engine.connect() as connection:
        for table in (await connection.execute(text(RLS_TABLES_SQL))).scalars():
            column = "id" if table == "tenant" else "tenant_id"
            left = await connection.execute(
                text(f"SELECT count(*) FROM {table} WHERE {column} = :t"),
                {"t": tenant_id},
            )
            counts[table] = int(left.scalar_one())
        jobs = await connection.execute(text(TENANT_JOBS_SQL), {"t": tenant_id})
        counts["pgqueuer"] = int(jobs.scalar_one())
    return counts


def purge_tenant(client: AsyncClient, settings: Settings, tenant: str) -> asyncio.Task[Response]:
    admin = bearer(settings, tenant, "root", admin=True)
    return asyncio.create_task(
        client.delete("/v1/admin/tenant", headers=admin, params={"confirm": tenant})
    )


def message(content: str) -> MessageIn:
    return MessageIn(role="user", content=content)


def storing_turns(state: AppState) -> AppState:
    """The app's state with the write path on and no model: an append queues turn storage in
    its own transaction."""
    settings = state.settings.model_copy(update={"extraction_enabled": True, "jobs_enabled": True})
    scheduler = WritePathScheduler(settings, None)
    return replace(state, threads=replace(state.threads, listeners=(scheduler,)))


async def test_a_job_an_append_in_flight_queued_goes_with_the_tenant(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """The append commits its messages and the job it queued before the purge reads the queue,
    so the purge drops that job too: none is left naming the purged tenant."""
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    backend = Principal(tenant_id=tenant, subject="backend", kind="service", credential="jwt")
    async with unit_of_work(storing_turns(app.state.mneme), backend) as services:
        thread = services.get(thread_service)
        await thread.append("ada", uuid.UUID(seeded.thread_ids[0]), [message("In flight.")])
        purge = purge_tenant(client, settings, tenant)
        assert await waiting_locks(owner_engine, 1) == 1
        assert not purge.done()
    purged = await purge
    assert purged.status_code == 200, purged.text
    report = purged.json()
    assert report["verified"] is True, report["remaining"]
    assert report["deleted"]["pgqueuer"] == 1
    assert report["deleted"]["message"] == 5
    assert set((await tenant_rows(owner_engine, tenant)).values()) == {0}


InFlight = Callable[[Services], Awaitable[Any]]


async def remember_for_ada(services: Services) -> None:
    await services.get(memory_service).create(
        Owner.user("ada"), [MemoryCreate(text=f"Fact {uuid.uuid4()}.")]
    )


async def append_for_ada(services: Services) -> None:
    [thread_id] = (
        await services.session.execute(
            text("SELECT id FROM thread WHERE user_id = 'ada' ORDER BY id LIMIT 1")
        )
    ).scalars()
    await services.get(thread_service).append("ada", thread_id, [message("In flight.")])


async def remember_for_the_org(services: Services) -> None:
    await services.get(memory_service).create(
        Owner.org(), [MemoryCreate(text="A new org fact.", scope="org")]
    )


async def change_the_orgs_first_memory(services: Services) -> None:
    [memory_id] = (
        await services.session.execute(
            text("SELECT id FROM memory WHERE scope = 'org' ORDER BY created_at LIMIT 1")
        )
    ).scalars()
    await services.get(memory_service).update(
        Owner.org(), memory_id, MemoryUpdate(text="The org fact, changed.")
    )


async def claim_a_key(services: Services) -> None:
    store = idempotency_store(services)
    await store.begin("in-flight", "POST", "/v1/users/ada/memories", {"text": "Fact."})


# A write in flight, in two steps: the first before the purge starts, the second once it waits.
# Each second step needs a row the purge deletes if it does not wait for the first (a thread, a
# memory, the tenant's row), while the purge waits for a row the first holds: without the
# tenant's write lock the two waited for each other, and the database rolled one back (a 503
# `DATABASE_CONFLICT`, or the write's failure).
IN_FLIGHT: dict[str, tuple[InFlight, InFlight]] = {
    "user": (remember_for_ada, append_for_ada),
    "org": (remember_for_the_org, change_the_orgs_first_memory),
    "keyed": (claim_a_key, remember_for_ada),
}


@pytest.mark.parametrize("kind", sorted(IN_FLIGHT))
async def test_a_tenant_purge_waits_for_a_write_in_flight_then_purges_what_it_wrote(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True, service=True)
    await remember_all(client, admin, {"text": "A seeded org fact.", "scope": "org"}, org=True)
    first, second = IN_FLIGHT[kind]
    root = Principal(
        tenant_id=tenant,
        subject="root",
        kind="service",
        credential="jwt",
        roles=frozenset({"admin"}),
        is_admin=True,
    )
    async with unit_of_work(app.state.mneme, root) as services:
        await first(services)
        purge = purge_tenant(client, settings, tenant)
        assert await waiting_locks(owner_engine, 1) == 1
        await second(services)
        assert not purge.done(), (await purge).text
    purged = await purge
    assert purged.status_code == 200, purged.text
    assert purged.json()["verified"] is True
    assert set((await tenant_rows(owner_engine, tenant)).values()) == {0}


def _api_key(
    client: AsyncClient, h: dict[str, str], user: str, thread: str, i: int
) -> Coroutine[Any, Any, Response]:
    return client.post("/v1/admin/api-keys", headers=h, json={"name": f"key {i}"})


# Writes to the tenant's data that are no user's, by an admin; an admin's purge of a user and
# rerun of its jobs; and a user's write with an `Idempotency-Key` (its claim is a write too,
# before the user's lock).
TENANT_WRITES: dict[str, Callable[..., Coroutine[Any, Any, Response]]] = {
    "keyed_memory": lambda c, h, user, thread, i: c.post(
        f"/v1/users/{user}/memories",
        headers={**h, "Idempotency-Key": f"k{i}"},
        json={"text": f"fact {i}."},
    ),
    "org_memory": lambda c, h, user, thread, i: c.post(
        "/v1/org/memories", headers=h, json={"text": f"org fact {i}.", "scope": "org"}
    ),
    "org_profile": lambda c, h, user, thread, i: c.patch(
        "/v1/org/profile",
        headers={**h, **JSON_PATCH},
        json=[{"op": "add", "path": f"/k{i}", "value": i}],
    ),
    "api_key": _api_key,
    "retention": lambda c, h, user, thread, i: c.put(
        "/v1/admin/retention", headers=h, json={"episodic_days": 30}
    ),
    "user_purge": lambda c, h, user, thread, i: c.delete(f"/v1/admin/users/{user}", headers=h),
    "rerun": lambda c, h, user, thread, i: c.post(
        "/v1/admin/jobs/rerun", headers=h, json={"user_id": user}
    ),
}

# What each finds once a purge of its tenant committed before it, and the rows it leaves: a
# write that adds something makes the tenant anew (its row, and the user's for a user's write).
AFTER_A_TENANT_PURGE: dict[str, tuple[int, dict[str, int]]] = {
    **{
        kind: (status, {**rows, "tenant": 1} if rows else {})
        for kind, (status, rows) in AFTER_A_PURGE.items()
    },
    "keyed_memory": (201, {"tenant": 1, "user_account": 1, "memory": 1, "idempotency_record": 1}),
    "org_memory": (201, {"tenant": 1, "memory": 1}),
    "org_profile": (200, {"tenant": 1, "profile": 1}),
    "api_key": (201, {"tenant": 1, "api_key": 1}),
    "retention": (200, {"tenant": 1, "retention_policy": 1}),
    "user_purge": (404, {}),
    "rerun": (404, {}),
}


CHECKED = (*COUNTED, "tenant", "api_key", "retention_policy", "idempotency_record", "pgqueuer")


@pytest.mark.parametrize("kind", sorted(AFTER_A_TENANT_PURGE))
async def test_a_write_during_a_tenant_purge_waits_for_it_then_finds_the_tenant_purged(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
) -> None:
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    write = WRITES[kind][0] if kind in WRITES else TENANT_WRITES[kind]
    admin = bearer(settings, tenant, "root", admin=True, service=True)
    expected_status, expected_rows = AFTER_A_TENANT_PURGE[kind]
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        # Held as a purge of the tenant holds it: the purge below queues behind it, the write
        # behind both.
        await AdminRepository(session, tenant).lock_tenant_writes()
        purge = purge_tenant(client, settings, tenant)
        assert await waiting_locks(owner_engine, 1) == 1
        writing = asyncio.create_task(write(client, admin, "ada", seeded.thread_ids[0], 0))
        waiting = await waiting_locks(owner_engine, 2)
        assert not writing.done(), (await writing).text
        assert waiting == 2
    purged = await purge
    assert purged.status_code == 200, purged.text
    written = await writing
    assert written.status_code == expected_status, written.text
    left = await tenant_rows(owner_engine, tenant)
    assert {table: left[table] for table in CHECKED} == {
        table: expected_rows.get(table, 0) for table in CHECKED
    }


async def _embed_unembedded(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> None:
    state = app.state.mneme
    column = state.vector_columns.live().name
    async with owner_engine.begin() as connection:
        ids = (
            await connection.execute(
                text(f"UPDATE memory SET {column} = NULL WHERE tenant_id = :t RETURNING id"),
                {"t": tenant},
            )
        ).scalars()
        memory_ids = list(ids)
    await state.embedding_backfill.embed_missing(tenant, memory_ids)


def _sweep_retention(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> Awaitable[Any]:
    return RetentionSweeper(app.state.mneme.sessionmaker, None).sweep_tenant(tenant)


def _sweep_write_path(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> Awaitable[Any]:
    state = app.state.mneme
    settings = state.settings.model_copy(update={"jobs_enabled": True})
    return WritePathRecovery(state.sessionmaker, settings, None).sweep(tenant)


def _recount(user_id: str | None) -> Callable[[FastAPI, AsyncEngine, str], Awaitable[Any]]:
    def recount(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> Awaitable[Any]:
        payload = (
            {"tenant_id": tenant} if user_id is None else {"tenant_id": tenant, "user_id": user_id}
        )
        return search_statistics_job(app.state.mneme)(payload)

    return recount


async def _ask_for_a_recount(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> None:
    post_commit = PostCommitTasks()
    StatisticsRequests(app.state.mneme.sessionmaker, post_commit, tenant).ask({Owner.user("ada")})
    [enqueue] = post_commit.take()
    await enqueue()


# The service's own work on the tenant's data, apart from any request, and what of the tenant
# it leaves once it waited for the purge: nothing. A recount asked for before the purge (after
# a search's or a write's commit) and queued after it finds its owner gone, and is dropped.
MAINTENANCE: dict[
    str, tuple[Callable[[FastAPI, AsyncEngine, str], Awaitable[Any]], dict[str, int]]
] = {
    "embedding_backfill": (_embed_unembedded, {}),
    "retention_sweep": (_sweep_retention, {}),
    "write_path_sweep": (_sweep_write_path, {}),
    "user_statistics": (_recount("ada"), {}),
    "org_statistics": (_recount(None), {}),
    "statistics_request": (_ask_for_a_recount, {}),
}


@pytest.mark.parametrize("kind", sorted(MAINTENANCE))
async def test_maintenance_during_a_tenant_purge_waits_for_it_then_finds_the_tenant_purged(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True, service=True)
    await remember_all(client, admin, {"text": "A seeded org fact.", "scope": "org"}, org=True)
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await AdminRepository(session, tenant).lock_tenant_writes()
        purge = purge_tenant(client, settings, tenant)
        assert await waiting_locks(owner_engine, 1) == 1
        work, expected_rows = MAINTENANCE[kind]
        working = asyncio.ensure_future(work(app, owner_engine, tenant))
        waiting = await waiting_locks(owner_engine, 2)
        assert not working.done(), await working
        assert waiting == 2
    purged = await purge
    assert purged.status_code == 200, purged.text
    await working
    left = await tenant_rows(owner_engine, tenant)
    assert left == {table: expected_rows.get(table, 0) for table in left}


@pytest.mark.parametrize("purged", ["tenant", "user"])
async def test_a_failed_run_recorded_during_a_purge_leaves_nothing_of_what_was_purged(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    purged: str,
) -> None:
    """A job on one of the user's threads was running when the purge started (a purge drops
    the jobs that wait) and gives up meanwhile. Its failure hook, which found the thread, is
    recording the failure (an audit entry about the thread, then a run of the tenant's sweep)
    when the purge comes: holding the user's write lock, it is waited for, and what it records
    is purged with the rest; none of it outlives the purge."""
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    recording, go_on = asyncio.Event(), asyncio.Event()

    async def waits_then_queues(session: AsyncSession, tenant_id: str, *, delay: timedelta) -> None:
        # The audit entry is written; the sweep is queued next, in the same transaction.
        recording.set()
        await go_on.wait()
        await enqueue_write_path_sweep(session, tenant_id, delay=delay)

    monkeypatch.setattr(health, "enqueue_write_path_sweep", waits_then_queues)
    recorder = JobFailureRecorder(app.state.mneme.sessionmaker, timedelta(minutes=5))
    failure = JobFailure(
        MEMORY_EXTRACTION_JOB,
        {"tenant_id": tenant, "thread_id": seeded.thread_ids[0], "org_writes": "false"},
        attempt=5,
        final=True,
        error=RuntimeError("a defect"),
    )
    recorded = asyncio.ensure_future(recorder(failure))
    await recording.wait()
    admin = bearer(settings, tenant, "root", admin=True)
    purge: asyncio.Future[Response] = asyncio.ensure_future(
        purge_tenant(client, settings, tenant)
        if purged == "tenant"
        else client.delete("/v1/admin/users/ada", headers=admin)
    )
    # The purge waits for the record under way, or (were the record made under no lock) ends
    # before it.
    waiting = asyncio.ensure_future(waiting_locks(owner_engine, 1))
    either: list[asyncio.Future[Any]] = [purge, waiting]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    go_on.set()
    await recorded
    done = await purge
    assert done.status_code == 200, done.text

    if purged == "tenant":
        assert done.json()["verified"] is True, done.json()["remaining"]
        left = await tenant_rows(owner_engine, tenant)
        assert left == dict.fromkeys(left, 0)
    else:
        # The tenant's sweep belongs to no user, and stays: it finds no thread to queue again.
        assert (await rows_of(owner_engine, tenant, "ada"))["audit_log"] == 0


CLAIM_SQL = """
    UPDATE pgqueuer SET status = 'picked', heartbeat = now(), queue_manager_id = $2
     WHERE convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = $1 RETURNING *
"""
"""The tenant's job picked as a worker's dequeue picks it (this test's own, by its tenant)."""


@pytest.mark.parametrize("purged", ["tenant", "user"])
async def test_a_job_running_during_a_purge_is_not_queued_again_after_it(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
    purged: str,
) -> None:
    """A job on the user's thread is running when the purge commits, and its run then fails
    (the model did not answer, the database went away): its retry would queue the job of what
    was purged again, after the purge. The purge drops the job whether it waits or runs, and
    counts it; the run's end then changes nothing."""
    seeded = await seed_user(client, settings, owner_engine, tenant, "ada")
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await session.execute(text("SELECT 1"))
        thread_id = uuid.UUID(seeded.thread_ids[0])
        await enqueue_memory_extraction(session, tenant, thread_id, org_writes=False)
    _, connect = runtime_engine.dialect.create_connect_args(runtime_engine.url)
    raw = await asyncpg.connect(**connect)
    try:
        row = await raw.fetchrow(CLAIM_SQL, tenant, uuid.uuid4())
        assert row is not None
        running = Job.model_validate(dict(row))

        admin = bearer(settings, tenant, "root", admin=True)
        done = await (
            purge_tenant(client, settings, tenant)
            if purged == "tenant"
            else client.delete("/v1/admin/users/ada", headers=admin)
        )
        assert done.status_code == 200, done.text
        assert done.json()["deleted"]["pgqueuer"] == 1

        # The run fails after the purge, and asks to run again.
        retry = UncountedRetry(delay=timedelta(0), reason="attempt 1 failed (OSError)")
        record = TracebackRecord.from_exception(exc=retry, job_id=running.id)
        await queries_for(AsyncpgDriver(raw)).retry_job(running, retry.delay, record)
    finally:
        await raw.close()
    assert (await tenant_rows(owner_engine, tenant))["pgqueuer"] == 0
