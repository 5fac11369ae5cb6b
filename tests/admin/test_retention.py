"""Retention: the per-tenant policy (admin API), the sweep that removes expired and too-old
rows of that tenant only, its metric, and its cron schedule in pgqueuer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.rawsql import explain_prepared
from service.admin import retention
from service.admin.retention import (
    RETENTION_SWEEP_JOB,
    TENANT_IDS_SQL,
    RetentionScheduler,
    RetentionSweeper,
)
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction, transaction_driver
from service.memories.fusion import runs_generic_plans
from service.observability import Metrics
from tests.admin.conftest import seed_user
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.plans import plan_nodes, statements_sent


async def test_admins_set_the_tenants_retention_policy(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    unset = await client.get("/v1/admin/retention", headers=admin)
    assert unset.json() == {"episodic_days": None, "messages_days": None, "summaries_days": None}

    policy = {"episodic_days": 30, "messages_days": 90, "summaries_days": None}
    assert (await client.put("/v1/admin/retention", headers=admin, json=policy)).json() == policy
    assert (await client.get("/v1/admin/retention", headers=admin)).json() == policy

    zero = await client.put("/v1/admin/retention", headers=admin, json={"episodic_days": 0})
    assert_problem(zero, 422, "VALIDATION_FAILED")
    user = bearer(settings, tenant, "ada")
    assert_problem(await client.get("/v1/admin/retention", headers=user), 403, "FORBIDDEN")
    audit = await client.get(
        "/v1/admin/audit", headers=admin, params={"action": "admin.retention_set"}
    )
    [entry] = audit.json()["items"]
    assert entry["detail"]["after"] == policy and entry["request_id"]


async def test_an_expired_memory_leaves_nothing_whether_a_write_or_the_sweep_removes_it(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    later = "2999-01-01T00:00:00Z"
    by_text, swept = [
        (
            await client.post(
                "/v1/users/me/memories", json={"text": words, "expires_at": later}, headers=headers
            )
        ).json()
        for words in ("On call this weekend.", "In Porto.")
    ]
    keyed_path = "/v1/users/me/keyed-memories?kind=semantic&key=seat"
    by_key = (await client.put(keyed_path, json={"text": "Aisle."}, headers=headers)).json()
    expired = [by_text["id"], swept["id"], by_key["id"]]
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE memory SET expires_at = now() - interval '1 second' "
                "WHERE id = ANY(CAST(:ids AS uuid[]))"
            ),
            {"ids": expired},
        )

    again = await client.post(
        "/v1/users/me/memories", json={"text": by_text["text"]}, headers=headers
    )
    assert again.status_code == 201 and again.json()["id"] != by_text["id"]
    assert (await client.put(keyed_path, json={"text": "Window."}, headers=headers)).is_success
    await RetentionSweeper(create_sessionmaker(runtime_engine), None).sweep([tenant])

    for memory_id in expired:
        history = await client.get(f"/v1/users/me/memories/{memory_id}/history", headers=headers)
        assert_problem(history, 404, "NOT_FOUND")
    async with owner_engine.connect() as connection:
        left = await connection.execute(
            text(
                "SELECT (SELECT count(*) FROM memory WHERE id = ANY(CAST(:ids AS uuid[]))),"
                " (SELECT count(*) FROM memory_event WHERE memory_id = ANY(CAST(:ids AS uuid[])))"
            ),
            {"ids": expired},
        )
        assert tuple(left.one()) == (0, 0)


async def test_the_sweep_removes_expired_and_too_old_rows_of_each_tenant_only(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    other_tenant = new_tenant()
    for tenant_id in (tenant, other_tenant):
        await seed_user(client, settings, owner_engine, tenant_id, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    policy = {"episodic_days": 30, "messages_days": 30, "summaries_days": 10}
    assert (await client.put("/v1/admin/retention", headers=admin, json=policy)).status_code == 200
    old = datetime.now(UTC) - timedelta(days=60)
    async with owner_engine.begin() as connection:
        for tenant_id in (tenant, other_tenant):
            params = {"t": tenant_id, "old": old, "past": datetime.now(UTC) - timedelta(hours=1)}
            await connection.execute(
                text(
                    "UPDATE memory SET expires_at = :past "
                    "WHERE tenant_id = :t AND kind = 'semantic'"
                ),
                params,
            )
            for table in ("memory", "message", "thread_summary"):
                await connection.execute(
                    text(f"UPDATE {table} SET created_at = :old WHERE tenant_id = :t"), params
                )
    metrics = Metrics()
    sweeper = RetentionSweeper(create_sessionmaker(runtime_engine), metrics)

    swept = await sweeper.sweep([tenant])

    # Semantic: expired; episodic: past 30 days; each thread keeps its newest message.
    assert swept == {"memory_event": 3, "memory": 2, "thread_summary": 2, "message": 2}
    service = bearer(settings, tenant, "agent", service=True)
    listed = await client.get("/v1/users/ada/memories", headers=service)
    assert listed.json()["items"] == []
    async with owner_engine.connect() as connection:
        left = await connection.execute(
            text("SELECT tenant_id, count(*) FROM message WHERE tenant_id IN (:a, :b) GROUP BY 1"),
            {"a": tenant, "b": other_tenant},
        )
        assert dict(left.all()) == {tenant: 2, other_tenant: 4}
        kept = await connection.execute(
            text("SELECT count(*) FROM memory WHERE tenant_id = :b"), {"b": other_tenant}
        )
        assert kept.scalar_one() == 2  # another tenant's rows are not this sweep's
    assert (
        metrics.registry.get_sample_value("mneme_retention_swept_rows_total", {"table": "memory"})
        == 2
    )


async def test_the_sweep_learns_every_tenant_through_the_runtime_role(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    await client.get("/v1/users/me", headers=bearer(settings, tenant, "ada"))
    async with runtime_engine.connect() as connection:
        tenants = set((await connection.execute(TENANT_IDS_SQL)).scalars())
    assert tenant in tenants


async def test_the_scheduler_registers_the_hourly_sweep_with_pgqueuer(
    settings: Settings, runtime_engine: AsyncEngine, owner_engine: AsyncEngine
) -> None:
    scheduler = RetentionScheduler(
        settings.model_copy(update={"jobs_enabled": True}),
        runtime_engine,
        RetentionSweeper(create_sessionmaker(runtime_engine), None),
    )
    await scheduler.start()
    try:
        for _ in range(100):
            async with owner_engine.connect() as connection:
                found = await connection.execute(
                    text("SELECT expression FROM pgqueuer_schedules WHERE entrypoint = :e"),
                    {"e": RETENTION_SWEEP_JOB},
                )
                expressions = list(found.scalars())
            if expressions:
                break
            await asyncio.sleep(0.05)
    finally:
        await scheduler.stop()
    assert expressions == ["17 * * * *"]


async def test_the_retention_policy_carries_a_tag_that_guards_its_writes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    path = "/v1/admin/retention"
    unset = await client.get(path, headers=admin)
    first = await client.put(
        path, json={"episodic_days": 30}, headers={**admin, "If-Match": unset.headers["etag"]}
    )
    assert first.status_code == 200, first.text
    read = await client.get(path, headers=admin)
    assert read.headers["etag"] == first.headers["etag"] != unset.headers["etag"]
    cached = await client.get(path, headers={**admin, "If-None-Match": read.headers["etag"]})
    assert cached.status_code == 304 and cached.content == b""

    for tag in (unset.headers["etag"], '"bogus"', "bogus"):
        stale = await client.put(
            path, json={"episodic_days": 7}, headers={**admin, "If-Match": tag}
        )
        assert_problem(stale, 412, "PRECONDITION_FAILED")
        assert stale.headers["etag"] == first.headers["etag"]
    assert (await client.get(path, headers=admin)).json()["episodic_days"] == 30


async def test_concurrent_guarded_retention_writes_let_exactly_one_win(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Admins that all read the same policy and all send its tag: one applies, every other
    gets 412 with the winner's tag; the stored policy is the winner's."""
    writers = 5
    admins = [bearer(settings, tenant, f"root-{index}", admin=True) for index in range(writers)]
    path = "/v1/admin/retention"
    seen = (await client.get(path, headers=admins[0])).headers["etag"]
    responses = await asyncio.gather(
        *(
            client.put(
                path,
                json={"episodic_days": 10 + index},
                headers={**admins[index], "If-Match": seen},
            )
            for index in range(writers)
        )
    )
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (writers - 1)
    [winner] = [response for response in responses if response.status_code == 200]
    stored = await client.get(path, headers=admins[0])
    assert stored.json() == winner.json()
    assert stored.headers["etag"] == winner.headers["etag"]
    for loser in responses:
        if loser is not winner:
            assert loser.headers["etag"] == winner.headers["etag"]


class RolledBack(Exception):
    """Ends a transaction that only looked."""


async def test_the_sweep_reads_the_expired_memories_not_every_memory_of_the_tenant(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    for first in (0, 100):
        hives = range(first, first + 100)
        await remember_all(client, ada, *({"text": f"Ada keeps bees, hive {n}"} for n in hives))
    now = datetime.now(UTC)
    async with owner_engine.begin() as connection:
        for hive, expires_in in ((7, -1), (8, -2), (9, 24)):
            await connection.execute(
                text("UPDATE memory SET expires_at = :at WHERE tenant_id = :t AND text = :hive"),
                {
                    "at": now + timedelta(hours=expires_in),
                    "t": tenant,
                    "hive": f"Ada keeps bees, hive {hive}",
                },
            )
        await connection.exec_driver_sql("ANALYZE memory")
    sessions = create_sessionmaker(runtime_engine)
    sweeper = RetentionSweeper(sessions, None)
    nothing_to_remove = new_tenant()
    # The sweep's statements as it sends them (a tenant with nothing to remove), then each
    # expiry statement's plan for this tenant, made once for any tenant as an hourly
    # statement's is, in a transaction that is rolled back.
    with statements_sent(runtime_engine) as statements:
        await sweeper.sweep([nothing_to_remove])
    expiry = [(sql, values) for sql, values in statements if "expires_at <= now()" in sql]
    assert len(expiry) == 1  # the batch of expired memories the sweep removes
    async with tenant_transaction(sessions, tenant) as session:
        # Citus plans each run for its tenant's shard, no plan made for any tenant, on shards a
        # few hundred rows long: the plan's shape is checked on a single node.
        one_plan_for_any_tenant = await runs_generic_plans(
            await transaction_driver(await session.connection())
        )
    for sql, values in expiry if one_plan_for_any_tenant else []:
        with pytest.raises(RolledBack):
            async with tenant_transaction(sessions, tenant) as session:
                driver = await transaction_driver(await session.connection())
                await driver.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                here = [tenant if value == nothing_to_remove else value for value in values]
                [document] = await explain_prepared(driver, sql, here)
                raise RolledBack
        # The memories are not scanned whole, and none without a past expiry is read and
        # thrown away.
        scans = [n for n in plan_nodes(document["Plan"]) if n.get("Relation Name") == "memory"]
        assert scans and all(node["Node Type"] != "Seq Scan" for node in scans), sql
        assert sum(int(node.get("Rows Removed by Filter", 0)) for node in scans) == 0, sql

    assert (await sweeper.sweep([tenant]))["memory"] == 2
    async with tenant_transaction(sessions, tenant) as session:
        kept = await session.execute(
            text("SELECT count(*) FROM memory WHERE tenant_id = :t"), {"t": tenant}
        )
        assert kept.scalar_one() == 198


async def test_the_sweep_removes_many_memories_in_batches_of_a_transaction_each(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(retention, "MEMORY_BATCH", 2)
    ada = bearer(settings, tenant, "ada")
    await remember_all(
        client, ada, *({"text": f"Ada's parcel {n} is on its way"} for n in range(6))
    )
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE memory SET expires_at = :past WHERE tenant_id = :t AND text <> :kept"),
            {
                "past": datetime.now(UTC) - timedelta(hours=1),
                "t": tenant,
                "kept": "Ada's parcel 0 is on its way",
            },
        )
    commits: list[str] = []

    def committed(_connection: Any) -> None:
        commits.append(tenant)

    event.listen(runtime_engine.sync_engine, "commit", committed)
    try:
        swept = await RetentionSweeper(create_sessionmaker(runtime_engine), None).sweep([tenant])
    finally:
        event.remove(runtime_engine.sync_engine, "commit", committed)
    assert swept["memory"] == 5 and swept["memory_event"] == 5
    # The policy's read, three batches of at most two (2, 2, 1), the search for old episodic
    # memories (none: no limit), and the summaries and messages.
    assert len(commits) == 6
    service = bearer(settings, tenant, "agent", service=True)
    listed = await client.get("/v1/users/ada/memories", headers=service)
    assert [item["text"] for item in listed.json()["items"]] == ["Ada's parcel 0 is on its way"]
