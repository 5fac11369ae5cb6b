"""Admins list the tenant's users with their counts, and read the audit trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.admin.conftest import seed_user
from tests.conftest import assert_problem, bearer


async def test_users_come_with_their_counts_in_cursor_pages(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    for user in ("ada", "bob", "cy"):
        await seed_user(client, settings, owner_engine, tenant, user)
    admin = bearer(settings, tenant, "root", admin=True)

    first = await client.get("/v1/admin/users", headers=admin, params={"limit": 2})
    assert first.status_code == 200, first.text
    second = await client.get(
        "/v1/admin/users", headers=admin, params={"limit": 2, "cursor": first.json()["next_cursor"]}
    )

    ids = [u["id"] for u in first.json()["items"] + second.json()["items"]]
    assert ids == ["ada", "bob", "cy", "root"]
    assert second.json()["next_cursor"] is None
    ada = first.json()["items"][0]
    assert ada["memories"] == {"semantic": 1, "episodic": 1, "procedural": 0}
    assert (ada["threads"], ada["messages"]) == (2, 4)
    assert ada["email"] == "ada@x.io" and ada["last_active_at"] is not None
    one = await client.get("/v1/admin/users/ada", headers=admin)
    assert one.json() == ada


async def test_users_are_filtered_by_last_activity(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    for user in ("ada", "bob"):
        await seed_user(client, settings, owner_engine, tenant, user)
    long_ago = datetime.now(UTC) - timedelta(days=400)
    async with owner_engine.begin() as connection:
        params = {"t": tenant, "at": long_ago}
        # Bob's memories written (and last changed) long ago, his threads' last message too.
        for table, columns in (
            ("memory", "created_at = :at, updated_at"),
            ("thread", "last_message_at"),
        ):
            await connection.execute(
                text(
                    f"UPDATE {table} SET {columns} = :at WHERE tenant_id = :t AND user_id = 'bob'"
                ),
                params,
            )
        await connection.execute(
            text("UPDATE user_account SET last_seen_at = :at WHERE tenant_id = :t AND id = 'bob'"),
            params,
        )
    admin = bearer(settings, tenant, "root", admin=True)
    cutoff = (datetime.now(UTC) - timedelta(days=30)).isoformat()

    dormant = await client.get("/v1/admin/users", headers=admin, params={"active_before": cutoff})
    active = await client.get("/v1/admin/users", headers=admin, params={"active_after": cutoff})

    assert [u["id"] for u in dormant.json()["items"]] == ["bob"]
    assert [u["id"] for u in active.json()["items"]] == ["ada", "root"]


async def test_a_user_never_active_counts_as_inactive_since_any_time(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    created = await client.put("/v1/users/ghost/account", headers=service, json={"name": "Ghost"})
    assert created.is_success, created.text
    admin = bearer(settings, tenant, "root", admin=True)
    assert (await client.get("/v1/admin/users/ghost", headers=admin)).json()[
        "last_active_at"
    ] is None

    dormant = await client.get(
        "/v1/admin/users", headers=admin, params={"active_before": "2000-01-01T00:00:00Z"}
    )
    active = await client.get(
        "/v1/admin/users", headers=admin, params={"active_after": "2000-01-01T00:00:00Z"}
    )

    assert [u["id"] for u in dormant.json()["items"]] == ["ghost"]
    assert "ghost" not in [u["id"] for u in active.json()["items"]]


async def test_a_user_whose_newest_memory_is_recent_is_active(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    for user in ("ada", "bob", "cy"):
        await seed_user(client, settings, owner_engine, tenant, user)
    long_ago = datetime.now(UTC) - timedelta(days=400)
    async with owner_engine.begin() as connection:
        params = {"t": tenant, "at": long_ago}
        # Cy was last seen, and last wrote to a thread, long ago; one of his memories is new.
        await connection.execute(
            text("UPDATE thread SET last_message_at = :at WHERE tenant_id = :t AND user_id = 'cy'"),
            params,
        )
        await connection.execute(
            text("UPDATE user_account SET last_seen_at = :at WHERE tenant_id = :t AND id = 'cy'"),
            params,
        )
        await connection.execute(
            text(
                "UPDATE memory SET created_at = :at WHERE tenant_id = :t AND user_id = 'cy'"
                " AND kind = 'semantic'"
            ),
            params,
        )
    admin = bearer(settings, tenant, "root", admin=True)
    cutoff = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    active = await client.get("/v1/admin/users", headers=admin, params={"active_after": cutoff})
    assert "cy" in [u["id"] for u in active.json()["items"]]


async def test_user_admin_routes_are_for_admins_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    user = bearer(settings, tenant, "ada")
    for path in ("/v1/admin/users", "/v1/admin/users/ada", "/v1/admin/audit"):
        assert_problem(await client.get(path, headers=user), 403, "FORBIDDEN")
    admin = bearer(settings, tenant, "root", admin=True)
    assert_problem(await client.get("/v1/admin/users/nobody", headers=admin), 404, "NOT_FOUND")


async def test_the_audit_trail_filters_and_pages_newest_first(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    created = []
    for name in ("one", "two", "three"):
        key = await client.post("/v1/admin/api-keys", headers=admin, json={"name": name})
        created.append(key.json()["id"])
    revoked = await client.delete(f"/v1/admin/api-keys/{created[0]}", headers=admin)
    assert revoked.status_code in (200, 204)

    page = await client.get(
        "/v1/admin/audit", headers=admin, params={"action": "api_key.create", "limit": 2}
    )
    rest = await client.get(
        "/v1/admin/audit",
        headers=admin,
        params={"action": "api_key.create", "limit": 2, "cursor": page.json()["next_cursor"]},
    )
    prefix = await client.get("/v1/admin/audit", headers=admin, params={"action": "api_key."})
    one_key = await client.get("/v1/admin/audit", headers=admin, params={"target_id": created[0]})

    targets = [e["target_id"] for e in page.json()["items"] + rest.json()["items"]]
    assert targets == list(reversed(created))
    assert rest.json()["next_cursor"] is None
    assert len(prefix.json()["items"]) == 4
    assert [e["action"] for e in one_key.json()["items"]] == ["api_key.revoke", "api_key.create"]
    assert {e["actor_id"] for e in prefix.json()["items"]} == {"root"}
    bad = await client.get("/v1/admin/audit", headers=admin, params={"cursor": "nope"})
    assert_problem(bad, 422, "VALIDATION_FAILED")
