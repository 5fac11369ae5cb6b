"""Purge: every user-bearing table found from the catalogue, 0 rows left for the user (proven
in raw SQL), nobody else touched, audit rows with the user's content gone, the tenant purge."""

from __future__ import annotations

import uuid

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.admin.plan import (
    DERIVED_TABLES,
    NOT_USER_DATA,
    SPECIAL_TABLES,
    UncoveredTables,
    build_plan,
)
from service.admin.repository import AdminRepository
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.jobs import enqueue_thread_summary
from tests.admin.conftest import rows_by_thread, rows_of, seed_user
from tests.conftest import assert_problem, bearer, new_tenant

RLS_TABLES_SQL = """
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relrowsecurity
"""


async def test_every_table_under_row_level_security_is_covered_by_the_purge_plan(
    runtime_engine: AsyncEngine,
) -> None:
    async with AsyncSession(runtime_engine) as session:
        tables = await AdminRepository(session, "any").catalogue()
        rls = set((await session.execute(text(RLS_TABLES_SQL))).scalars())
    plan = build_plan(tables)
    covered = {r.name for r in plan.rules} | {t.name for t in plan.special}
    assert covered | set(NOT_USER_DATA) == rls
    assert {r.name: r.kind for r in plan.rules if r.kind == "parent"} == {
        "thread_summary": "parent",
        "extraction_cursor": "parent",
        "memory_posting": "parent",
    }
    # The search's derived tables are purged (they repeat the user's words), never exported.
    assert {r.name for r in plan.rules} - {r.name for r in plan.exported} == set(DERIVED_TABLES)
    assert {t.name for t in plan.special} == SPECIAL_TABLES
    order = [r.name for r in plan.rules]
    assert order.index("message") < order.index("thread") < order.index("user_account")


async def test_a_new_table_with_a_user_column_is_purged_and_an_unclassifiable_one_is_refused(
    owner_engine: AsyncEngine,
) -> None:
    async with owner_engine.connect() as connection, connection.begin() as transaction:
        session = AsyncSession(bind=connection)
        await session.execute(
            text("CREATE TABLE user_note (tenant_id text, id uuid, user_id text, body text)")
        )
        await session.execute(text("ALTER TABLE user_note ENABLE ROW LEVEL SECURITY"))
        plan = build_plan(await AdminRepository(session, "any").catalogue())
        assert plan.rule("user_note").kind == "owner"

        await session.execute(text("CREATE TABLE user_blob (tenant_id text, owner text)"))
        await session.execute(text("ALTER TABLE user_blob ENABLE ROW LEVEL SECURITY"))
        with pytest.raises(UncoveredTables) as refused:
            build_plan(await AdminRepository(session, "any").catalogue())
        assert refused.value.names == ("user_blob",)
        await transaction.rollback()


async def test_purge_leaves_no_row_of_the_user_and_touches_no_other_user_or_tenant(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    other_tenant = new_tenant()
    ada = await seed_user(client, settings, owner_engine, tenant, "ada")
    bob = await seed_user(client, settings, owner_engine, tenant, "bob")
    twin = await seed_user(client, settings, owner_engine, other_tenant, "ada")
    service = bearer(settings, tenant, "agent", service=True)
    by_service = await client.post(
        "/v1/users/ada/memories",
        headers={**service, "Idempotency-Key": "svc-1"},
        json={"kind": "semantic", "text": "ada prefers window seats"},
    )
    assert by_service.status_code == 201
    before = await rows_of(owner_engine, tenant, "ada")
    assert all(before.values()), before
    bob_before = await rows_of(owner_engine, tenant, "bob")
    twin_before = await rows_of(owner_engine, other_tenant, "ada")

    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.delete("/v1/admin/users/ada", headers=admin)

    assert response.status_code == 200, response.text
    report = response.json()
    assert report["verified"] is True
    assert set(report["remaining"].values()) == {0}
    assert report["deleted"]["memory"] == 3
    assert report["deleted"]["thread"] == 2
    assert report["deleted"]["message"] == 4
    assert report["deleted"]["thread_summary"] == 2
    assert report["deleted"]["extraction_cursor"] == 2
    assert report["deleted"]["user_account"] == 1
    assert report["deleted"]["idempotency_record"] == 3
    assert set(await rows_of(owner_engine, tenant, "ada")).issuperset(before)
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    assert set((await rows_by_thread(owner_engine, tenant, ada.thread_ids)).values()) == {0}
    assert await rows_of(owner_engine, tenant, "bob") == bob_before
    assert await rows_of(owner_engine, other_tenant, "ada") == twin_before
    assert bob.thread_ids and twin.thread_ids

    # The purge itself is on record, with counts and no content.
    audit = await client.get(
        "/v1/admin/audit", headers=admin, params={"action": "admin.user_purge"}
    )
    [entry] = audit.json()["items"]
    assert entry["id"] == report["audit_id"]
    assert (entry["actor_id"], entry["target_id"]) == ("root", "ada")
    assert entry["detail"]["deleted"]["memory"] == 3
    assert "ada-town" not in str(entry) and "green tea" not in str(entry)


async def test_a_purged_user_is_gone_from_search_and_context_at_once(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = await seed_user(client, settings, owner_engine, tenant, "ada")
    search = {"query": "green tea", "limit": 5}
    found = await client.post("/v1/users/me/memories/search", headers=ada.headers, json=search)
    assert found.json()["hits"]
    admin = bearer(settings, tenant, "root", admin=True)
    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200

    service = bearer(settings, tenant, "agent", service=True)
    after = await client.post("/v1/users/ada/memories/search", headers=service, json=search)
    assert after.status_code == 200 and after.json()["hits"] == []
    context = await client.post(
        "/v1/users/ada/context", headers=service, json={"query": "green tea", "format": "both"}
    )
    assert context.status_code == 200
    assert "green tea" not in context.text and "ada-town" not in context.text


async def test_purge_drops_the_users_queued_jobs_and_keeps_other_users_jobs(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = await seed_user(client, settings, owner_engine, tenant, "ada")
    bob = await seed_user(client, settings, owner_engine, tenant, "bob")
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        for thread_id in ada.thread_ids + bob.thread_ids:
            await enqueue_thread_summary(session, tenant, uuid.UUID(thread_id))
    assert (await rows_by_thread(owner_engine, tenant, ada.thread_ids))["pgqueuer"] == 2

    admin = bearer(settings, tenant, "root", admin=True)
    report = (await client.delete("/v1/admin/users/ada", headers=admin)).json()

    assert report["deleted"]["pgqueuer"] == 2
    assert report["remaining"]["pgqueuer"] == 0
    assert (await rows_by_thread(owner_engine, tenant, ada.thread_ids))["pgqueuer"] == 0
    assert (await rows_by_thread(owner_engine, tenant, bob.thread_ids))["pgqueuer"] == 2
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "DELETE FROM pgqueuer WHERE convert_from(payload, 'UTF8')::jsonb "
                "->> 'tenant_id' = :t"
            ),
            {"t": tenant},
        )


async def test_audit_rows_with_the_users_content_go_and_admin_records_stay(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    key = await client.post("/v1/admin/api-keys", headers=admin, json={"name": "backend"})
    assert key.status_code == 201
    profile_changes = await client.get(
        "/v1/admin/audit", headers=admin, params={"target_id": "ada", "target_type": "profile"}
    )
    assert "ada-town" in profile_changes.text

    assert (await client.delete("/v1/admin/users/ada", headers=admin)).status_code == 200

    everything = await client.get("/v1/admin/audit", headers=admin, params={"limit": 200})
    actions = [e["action"] for e in everything.json()["items"]]
    assert "ada-town" not in everything.text and "green tea" not in everything.text
    assert "profile.patch" not in actions and "account.overlay_set" not in actions
    assert "extraction.pass" not in actions
    assert {"api_key.create", "admin.user_purge"} <= set(actions)


async def test_org_memories_from_the_users_threads_lose_their_provenance(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = await seed_user(client, settings, owner_engine, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    org = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={
            "kind": "semantic",
            "text": "The team uses Porto as the offsite city",
            "source_thread_id": ada.thread_ids[0],
            "evidence": "hello from ada",
            "speaker": "Ada",
        },
    )
    assert org.status_code == 201, org.text

    report = (await client.delete("/v1/admin/users/ada", headers=admin)).json()

    assert report["redacted"] == {"memory (org provenance)": 1}
    kept = await client.get(f"/v1/org/memories/{org.json()['id']}", headers=admin)
    assert kept.status_code == 200
    provenance = ("source_thread_id", "evidence", "speaker")
    assert [kept.json()[field] for field in provenance] == [None, None, None]


async def test_purging_a_user_with_nothing_is_a_404_and_non_admins_are_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    assert_problem(await client.delete("/v1/admin/users/nobody", headers=admin), 404, "NOT_FOUND")
    service = bearer(settings, tenant, "agent", service=True)
    assert_problem(await client.delete("/v1/admin/users/ada", headers=service), 403, "FORBIDDEN")
    user = bearer(settings, tenant, "ada")
    assert_problem(await client.delete("/v1/admin/users/ada", headers=user), 403, "FORBIDDEN")


async def test_tenant_purge_needs_the_tenants_id_and_then_leaves_nothing_of_it(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    other_tenant = new_tenant()
    await seed_user(client, settings, owner_engine, tenant, "ada")
    await seed_user(client, settings, owner_engine, other_tenant, "ada")
    twin_before = await rows_of(owner_engine, other_tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    mismatch = await client.delete(
        "/v1/admin/tenant", headers=admin, params={"confirm": other_tenant}
    )
    assert_problem(mismatch, 422, "CONFIRMATION_MISMATCH")

    response = await client.delete("/v1/admin/tenant", headers=admin, params={"confirm": tenant})

    assert response.status_code == 200, response.text
    report = response.json()
    assert report["verified"] is True and report["deleted"]["tenant"] == 1
    async with owner_engine.connect() as connection:
        for table in (await connection.execute(text(RLS_TABLES_SQL))).scalars():
            column = "id" if table == "tenant" else "tenant_id"
            left = await connection.execute(
                text(f"SELECT count(*) FROM {table} WHERE {column} = :t"),
                {"t": tenant},
            )
            assert left.scalar_one() == 0, table
    assert await rows_of(owner_engine, other_tenant, "ada") == twin_before
