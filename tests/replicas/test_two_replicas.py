"""Stateless replicas: two `mneme serve` processes behave as one service.

Both start together on an empty database (the migrations run once, behind an advisory lock),
share rate-limit counters through Redis, replay each other's idempotent responses, run each
durable job exactly once between them, and a replica killed mid-stream loses no write it had
acknowledged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db_migrations
from service.config import Settings
from tests.conftest import assert_problem, bearer, new_tenant
from tests.replicas.conftest import (
    AUTH_FAILURES_ALLOWED,
    PRINCIPAL_QUOTA,
    ReplicaSet,
    wait_until_ready,
)

pytestmark = pytest.mark.replicas

JOBS_SECONDS = 90


def _replica(replica_set: ReplicaSet, name: str) -> str:
    return next(r.url for r in replica_set.replicas if r.name == name)


async def test_both_replicas_serve_one_schema_migrated_once(
    replica_set: ReplicaSet, replica_owner_engine: AsyncEngine, settings: Settings
) -> None:
    head = db_migrations.head_revision(settings)
    for name in ("a", "b"):
        async with httpx.AsyncClient(base_url=_replica(replica_set, name)) as client:
            ready = (await client.get("/readyz")).json()
        assert ready["schema_revision"] == head
    async with replica_owner_engine.connect() as connection:
        versions = (await connection.execute(text("SELECT version_num FROM alembic_version"))).all()
    assert [row[0] for row in versions] == [head]


async def test_rate_limits_are_shared_by_the_replicas(
    replica_set: ReplicaSet, settings: Settings
) -> None:
    headers = bearer(settings, new_tenant(), "chatty")
    statuses = []
    async with (
        httpx.AsyncClient(base_url=_replica(replica_set, "a")) as a,
        httpx.AsyncClient(base_url=_replica(replica_set, "b")) as b,
    ):
        for i in range(PRINCIPAL_QUOTA):
            client = a if i % 2 == 0 else b
            statuses.append((await client.get("/v1/users/me", headers=headers)).status_code)
        assert statuses == [200] * PRINCIPAL_QUOTA
        for client in (a, b):
            refused = await client.get("/v1/users/me", headers=headers)
            assert_problem(refused, 429, "RATE_LIMITED")
            assert '"principal";r=0;' in refused.headers["RateLimit"]


async def test_an_idempotent_retry_on_the_other_replica_gets_the_first_response(
    replica_set: ReplicaSet, settings: Settings
) -> None:
    headers = {**bearer(settings, new_tenant(), "ada"), "Idempotency-Key": str(uuid.uuid4())}
    body = {"text": "Prefers the aisle seat"}
    async with (
        httpx.AsyncClient(base_url=_replica(replica_set, "a")) as a,
        httpx.AsyncClient(base_url=_replica(replica_set, "b")) as b,
    ):
        first = await a.post("/v1/users/me/memories", headers=headers, json=body)
        retry = await b.post("/v1/users/me/memories", headers=headers, json=body)
        listed = await b.get("/v1/users/me/memories", headers=headers)
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert [item["id"] for item in listed.json()["items"]] == [first.json()["id"]]


async def test_each_durable_job_runs_exactly_once_across_replicas(
    replica_set: ReplicaSet, replica_owner_engine: AsyncEngine, settings: Settings
) -> None:
    tenant = new_tenant()
    async with (
        httpx.AsyncClient(base_url=_replica(replica_set, "a")) as a,
        httpx.AsyncClient(base_url=_replica(replica_set, "b")) as b,
    ):
        for i in range(8):
            headers = bearer(settings, tenant, f"user{i}")
            created = await a.post("/v1/users/me/threads", headers=headers, json={})
            assert created.status_code == 201, created.text
            appended = await b.post(
                f"/v1/users/me/threads/{created.json()['id']}/messages",
                headers=headers,
                json={
                    "messages": [
                        {"role": "user", "content": f"My locker number is {100 + i}."},
                        {"role": "assistant", "content": "Noted, I will remember the locker."},
                    ]
                },
            )
            assert appended.status_code == 201, appended.text

    # Every job of this test's tenant leaves the queue once one of the two workers finished it.
    deadline = time.monotonic() + JOBS_SECONDS
    while True:
        async with replica_owner_engine.connect() as connection:
            waiting = (
                await connection.execute(
                    text(
                        "SELECT count(*) FROM pgqueuer WHERE convert_from(payload, 'UTF8') LIKE :t"
                    ),
                    {"t": f"%{tenant}%"},
                )
            ).scalar_one()
        if waiting == 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert waiting == 0

    async with replica_owner_engine.connect() as connection:
        picks = (
            await connection.execute(
                text(
                    "SELECT job_id, count(*) FILTER (WHERE status = 'picked') AS picked, "
                    "count(*) FILTER (WHERE status = 'successful') AS succeeded "
                    "FROM pgqueuer_log GROUP BY job_id"
                )
            )
        ).all()
        stored = (
            await connection.execute(
                text(
                    "SELECT user_id, count(*) FROM memory WHERE tenant_id = :t "
                    "AND text LIKE '%locker number%' GROUP BY user_id"
                ),
                {"t": tenant},
            )
        ).all()
    # pgqueuer logs every pick: a job taken by both workers would show two.
    assert any(row.picked == 1 and row.succeeded == 1 for row in picks), picks
    assert all(row.picked <= 1 and row.succeeded <= 1 for row in picks), picks
    assert sorted(row[0] for row in stored) == sorted(f"user{i}" for i in range(8))
    assert all(row[1] == 1 for row in stored), stored


async def test_a_replica_killed_mid_stream_loses_no_acknowledged_write(
    replica_set: ReplicaSet, settings: Settings
) -> None:
    victim = replica_set.start("victim")
    wait_until_ready(victim)
    tenant = new_tenant()
    acknowledged: list[tuple[dict[str, str], str, str]] = []
    some_acknowledged = asyncio.Event()

    async def write(client: httpx.AsyncClient, i: int) -> None:
        headers = bearer(settings, tenant, f"writer{i}")
        note = f"Write number {i} from the stream"
        try:
            response = await client.post(
                "/v1/users/me/memories", headers=headers, json={"text": note}
            )
        except httpx.TransportError:
            return
        if response.status_code == 201:
            acknowledged.append((headers, response.json()["id"], note))
            if len(acknowledged) >= 3:
                some_acknowledged.set()

    async with httpx.AsyncClient(base_url=victim.url, timeout=30) as client:
        writes = asyncio.gather(*(write(client, i) for i in range(40)))
        acknowledged_soon = asyncio.ensure_future(some_acknowledged.wait())
        first_of: set[asyncio.Future[Any]] = {writes, acknowledged_soon}
        await asyncio.wait(first_of, return_when=asyncio.FIRST_COMPLETED)
        victim.kill()
        await writes
        acknowledged_soon.cancel()

    assert acknowledged
    async with httpx.AsyncClient(base_url=_replica(replica_set, "a")) as survivor:
        for headers, memory_id, note in acknowledged:
            read = await survivor.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
            assert read.status_code == 200, read.text
            assert read.json()["text"] == note


async def test_failed_authentications_are_counted_across_the_replicas(
    replica_set: ReplicaSet, settings: Settings
) -> None:
    # Every request here comes from 127.0.0.1: the failures sent to `a` and `b` add up, so two
    # replicas do not allow twice the guesses. Valid credentials from the same address are
    # served throughout, so the other tests sharing it are not disturbed.
    forged = {"Authorization": "Bearer mneme.YWNtZQ." + "0" * 32 + ".made-up"}
    good = bearer(settings, new_tenant(), "patient")
    async with (
        httpx.AsyncClient(base_url=_replica(replica_set, "a")) as a,
        httpx.AsyncClient(base_url=_replica(replica_set, "b")) as b,
    ):
        for i in range(AUTH_FAILURES_ALLOWED):
            client = a if i % 2 == 0 else b
            assert_problem(await client.get("/v1/users/me", headers=forged), 401, "UNAUTHENTICATED")
        for client in (a, b):
            refused = await client.get("/v1/users/me", headers=forged)
            problem = assert_problem(refused, 429, "RATE_LIMITED")
            assert problem["title"] == "Too many failed authentications"
            assert (await client.get("/v1/users/me", headers=good)).status_code == 200
