"""API keys: admins create, list and revoke them; a key is a service principal of one tenant."""

from __future__ import annotations

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import as_tenant, assert_problem, bearer, new_tenant
from tests.fixtures.factories import sign_in


async def create_key(
    client: AsyncClient, settings: Settings, tenant: str, **body: object
) -> dict[str, object]:
    response = await client.post(
        "/v1/admin/api-keys",
        json={"name": "agent backend", **body},
        headers=bearer(settings, tenant, "root", admin=True),
    )
    assert response.status_code == 201, response.text
    created: dict[str, object] = response.json()
    return created


def key_header(created: dict[str, object]) -> dict[str, str]:
    return {"Authorization": f"Bearer {created['key']}"}


async def test_created_key_authenticates_as_a_service_of_its_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    created = await create_key(client, settings, tenant)
    # A user the service did not create yet is unknown, and known once they have signed in.
    assert (await client.get("/v1/users/zoe", headers=key_header(created))).status_code == 404
    await client.get("/v1/users/me", headers=bearer(settings, tenant, "zoe"))
    response = await client.get("/v1/users/zoe", headers=key_header(created))
    assert response.status_code == 200, response.text
    assert response.json()["tenant_id"] == tenant


async def test_secret_is_shown_once_and_only_its_hash_is_stored(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    created = await create_key(client, settings, tenant)
    secret = str(created["key"]).rsplit(".", 1)[1]
    listing = await client.get(
        "/v1/admin/api-keys", headers=bearer(settings, tenant, "root", admin=True)
    )
    assert listing.status_code == 200
    [item] = listing.json()["items"]
    assert "key" not in item and secret not in listing.text
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        stored = (
            await connection.execute(
                text("SELECT secret_hash FROM api_key WHERE id = :id"), {"id": created["id"]}
            )
        ).scalar_one()
    assert secret.encode() not in stored and len(stored) == 32


async def test_revoked_key_is_refused(client: AsyncClient, settings: Settings, tenant: str) -> None:
    created = await create_key(client, settings, tenant)
    admin = bearer(settings, tenant, "root", admin=True)
    revoked = await client.delete(f"/v1/admin/api-keys/{created['id']}", headers=admin)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    response = await client.get("/v1/users/me", headers=key_header(created))
    assert_problem(response, 401, "UNAUTHENTICATED")
    listing = await client.get("/v1/admin/api-keys", headers=admin)
    assert listing.json()["items"] == []
    with_revoked = await client.get("/v1/admin/api-keys?include_revoked=true", headers=admin)
    assert [item["id"] for item in with_revoked.json()["items"]] == [created["id"]]


async def test_a_key_is_named_and_tagged_and_revoked_only_in_the_state_named(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.post("/v1/admin/api-keys", json={"name": "bot"}, headers=admin)
    assert response.status_code == 201, response.text
    key_id = response.json()["id"]
    assert response.headers["location"] == f"/v1/admin/api-keys/{key_id}"
    read = await client.get(response.headers["location"], headers=admin)
    assert read.status_code == 200 and "key" not in read.json()
    assert read.headers["etag"] == response.headers["etag"]
    cached = await client.get(
        response.headers["location"], headers={**admin, "If-None-Match": read.headers["etag"]}
    )
    assert cached.status_code == 304

    # Using the key records its use: the state an admin read is no longer the key's.
    used = await client.get("/v1/users/me", headers=key_header(response.json()))
    assert used.status_code == 404  # authenticated: a service has no "me"
    for tag in (read.headers["etag"], "bogus"):
        stale = await client.delete(
            response.headers["location"], headers={**admin, "If-Match": tag}
        )
        body = assert_problem(stale, 412, "PRECONDITION_FAILED")
        assert body["current_etag"] == stale.headers["etag"] != read.headers["etag"]
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        revoked_at = (
            await connection.execute(
                text("SELECT revoked_at FROM api_key WHERE id = :id"), {"id": key_id}
            )
        ).scalar_one()
    assert revoked_at is None
    current = (await client.get(response.headers["location"], headers=admin)).headers["etag"]
    revoked = await client.delete(
        response.headers["location"], headers={**admin, "If-Match": current}
    )
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert revoked.headers["etag"] not in (current, read.headers["etag"])
    unknown = await client.get(
        "/v1/admin/api-keys/00000000-0000-0000-0000-000000000000", headers=admin
    )
    assert_problem(unknown, 404, "NOT_FOUND")


async def test_key_with_a_forged_tenant_or_secret_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    created = await create_key(client, settings, tenant)
    prefix, _tenant_part, key_id, secret = str(created["key"]).split(".")
    forged_tenant = f"{prefix}.b3RoZXI.{key_id}.{secret}"  # "other"
    forged_secret = f"{prefix}.{_tenant_part}.{key_id}.{secret[:-2]}xx"
    for forged in (forged_tenant, forged_secret, f"{prefix}.%%%.{key_id}.{secret}"):
        response = await client.get("/v1/users/me", headers={"Authorization": f"Bearer {forged}"})
        assert_problem(response, 401, "UNAUTHENTICATED")


async def test_expired_key_is_refused_and_past_expiry_is_rejected(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    past = await client.post(
        "/v1/admin/api-keys",
        headers=admin,
        json={"name": "old", "expires_at": "2020-01-01T00:00:00Z"},
    )
    assert_problem(past, 422, "VALIDATION_FAILED")
    created = await create_key(client, settings, tenant, expires_at="2999-01-01T00:00:00Z")
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(
            text("UPDATE api_key SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": created["id"]},
        )
    assert_problem(
        await client.get("/v1/users/me", headers=key_header(created)), 401, "UNAUTHENTICATED"
    )


async def test_a_key_named_with_a_secret_is_refused_and_not_created(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    existing = await create_key(client, settings, tenant)
    for name in (f"backup of {existing['key']}", "bot, password: hunter2hunter2"):
        response = await client.post("/v1/admin/api-keys", headers=admin, json={"name": name})
        assert_problem(response, 422, "SECRET_REFUSED")
        assert "hunter2" not in response.text
    listing = await client.get("/v1/admin/api-keys", headers=admin)
    assert [k["name"] for k in listing.json()["items"]] == ["agent backend"]


@pytest.mark.parametrize("name", ["   ", "\u200b", "\ufeff\u2060 "])
async def test_a_key_named_with_nothing_visible_is_refused_and_not_created(
    client: AsyncClient, settings: Settings, tenant: str, name: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    response = await client.post("/v1/admin/api-keys", headers=admin, json={"name": name})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert body["errors"][0]["loc"] == ["body", "name"]
    listing = await client.get("/v1/admin/api-keys", headers=admin)
    assert listing.json()["items"] == []


async def test_admin_endpoints_refuse_non_admins(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    for headers in (
        bearer(settings, tenant, "alice"),
        bearer(settings, tenant, "svc", service=True),
    ):
        response = await client.post("/v1/admin/api-keys", json={"name": "x"}, headers=headers)
        assert_problem(response, 403, "FORBIDDEN")


async def test_non_admin_key_cannot_mint_keys_but_admin_key_can(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    plain = await create_key(client, settings, tenant)
    refused = await client.post("/v1/admin/api-keys", json={"name": "x"}, headers=key_header(plain))
    assert_problem(refused, 403, "FORBIDDEN")
    admin_key = await create_key(client, settings, tenant, roles=["admin"])
    allowed = await client.post(
        "/v1/admin/api-keys", json={"name": "x"}, headers=key_header(admin_key)
    )
    assert allowed.status_code == 201


async def test_another_tenants_admin_cannot_see_or_revoke_a_key(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    created = await create_key(client, settings, tenant)
    intruder = bearer(settings, new_tenant(), "root", admin=True)
    assert (await client.get("/v1/admin/api-keys", headers=intruder)).json()["items"] == []
    response = await client.delete(f"/v1/admin/api-keys/{created['id']}", headers=intruder)
    assert_problem(response, 404, "NOT_FOUND")
    assert (await client.get("/v1/users/me", headers=key_header(created))).status_code == 404


async def test_listing_pages_with_a_cursor(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ids = [(await create_key(client, settings, tenant, name=f"k{i}"))["id"] for i in range(5)]
    admin = bearer(settings, tenant, "root", admin=True)
    seen: list[object] = []
    cursor = None
    while True:
        url = "/v1/admin/api-keys?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = (await client.get(url, headers=admin)).json()
        seen.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    bad = await client.get("/v1/admin/api-keys?cursor=garbage!", headers=admin)
    assert_problem(bad, 422, "VALIDATION_FAILED")


async def test_key_changes_are_audited(
    client: AsyncClient, settings: Settings, runtime_engine: AsyncEngine, tenant: str
) -> None:
    created = await create_key(client, settings, tenant)
    await client.delete(
        f"/v1/admin/api-keys/{created['id']}", headers=bearer(settings, tenant, "root", admin=True)
    )
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        actions = (
            await connection.execute(
                text(
                    "SELECT action, actor_id FROM audit_log "
                    "WHERE target_id = :id ORDER BY created_at"
                ),
                {"id": created["id"]},
            )
        ).all()
    assert [tuple(row) for row in actions] == [
        ("api_key.create", "root"),
        ("api_key.revoke", "root"),
    ]


async def test_service_admin_can_create_the_first_key_of_a_new_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    provisioner = bearer(settings, tenant, "provisioner", admin=True, service=True)
    response = await client.post(
        "/v1/admin/api-keys", json={"name": "bootstrap"}, headers=provisioner
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert (created["name"], created["created_by"]) == ("bootstrap", "provisioner")
    listing = await client.get("/v1/admin/api-keys", headers=provisioner)
    assert [(item["id"], item["name"]) for item in listing.json()["items"]] == [
        (created["id"], "bootstrap")
    ]
    # The key works: it is a service principal of the new tenant, addressing its users.
    await sign_in(client, settings, tenant, "zoe")
    zoe = await client.get("/v1/users/zoe", headers=key_header(created))
    assert zoe.status_code == 200, zoe.text
    assert (zoe.json()["id"], zoe.json()["tenant_id"]) == ("zoe", tenant)
