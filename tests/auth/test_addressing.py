"""Who may address whom: `me`, end users (only themselves), services (their tenant's users).
Everything else is a 404, never a 403, so existence does not leak."""

from __future__ import annotations

import pytest
from httpx import AsyncClient

from service.config import Settings
from tests.conftest import assert_problem, bearer, new_tenant


async def sign_in(client: AsyncClient, settings: Settings, tenant: str, user: str) -> None:
    assert (
        await client.get("/v1/users/me", headers=bearer(settings, tenant, user))
    ).status_code == 200


async def test_me_resolves_to_the_calling_end_user(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.get("/v1/users/me", headers=bearer(settings, tenant, "alice"))
    assert response.json()["id"] == "alice"
    by_id = await client.get("/v1/users/alice", headers=bearer(settings, tenant, "alice"))
    assert by_id.json()["id"] == "alice"


async def test_end_user_cannot_address_another_user(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await sign_in(client, settings, tenant, "bob")
    response = await client.get("/v1/users/bob", headers=bearer(settings, tenant, "alice"))
    body = assert_problem(response, 404, "NOT_FOUND")
    missing = await client.get("/v1/users/nobody", headers=bearer(settings, tenant, "alice"))
    assert (
        assert_problem(missing, 404, "NOT_FOUND")["detail"].replace("nobody", "bob")
        == body["detail"]
    )


async def test_service_addresses_any_user_of_its_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await sign_in(client, settings, tenant, "bob")
    response = await client.get(
        "/v1/users/bob", headers=bearer(settings, tenant, "agent", service=True)
    )
    assert response.status_code == 200 and response.json()["id"] == "bob"


async def test_service_has_no_me(client: AsyncClient, settings: Settings, tenant: str) -> None:
    response = await client.get(
        "/v1/users/me", headers=bearer(settings, tenant, "agent", service=True)
    )
    assert_problem(response, 404, "NOT_FOUND")


async def test_service_cannot_reach_users_of_another_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await sign_in(client, settings, tenant, "bob")
    response = await client.get(
        "/v1/users/bob", headers=bearer(settings, new_tenant(), "agent", service=True)
    )
    assert_problem(response, 404, "NOT_FOUND")


async def test_same_user_id_in_two_tenants_are_different_users(
    client: AsyncClient, settings: Settings
) -> None:
    first, second = new_tenant(), new_tenant()
    a = await client.get("/v1/users/me", headers=bearer(settings, first, "same", name="First"))
    b = await client.get("/v1/users/me", headers=bearer(settings, second, "same", name="Second"))
    assert (a.json()["tenant_id"], a.json()["name"]) == (first, "First")
    assert (b.json()["tenant_id"], b.json()["name"]) == (second, "Second")


async def test_end_user_overlay_is_recorded_from_claims_without_tokens(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(
        settings,
        tenant,
        "ada",
        name="Ada",
        email="ada@example.test",
        picture="https://img.example/ada.png",
        identities=[{"provider": "github"}, {"provider": "credential"}],
    )
    body = (await client.get("/v1/users/me", headers=headers)).json()
    assert (body["name"], body["email"], body["avatar"]) == (
        "Ada",
        "ada@example.test",
        "https://img.example/ada.png",
    )
    assert body["socials"] == ["github"]


@pytest.mark.parametrize("unstorable", ["nul \x00 here", "lone \ud800 surrogate"])
async def test_a_claim_no_text_column_can_hold_is_left_out_of_the_overlay(
    client: AsyncClient, settings: Settings, tenant: str, unstorable: str
) -> None:
    """The token's request goes on (it cannot be refused for what its issuer put in it), as if
    the token did not carry that claim; the others are recorded."""
    headers = bearer(
        settings,
        tenant,
        "ada",
        name=unstorable,
        email="ada@example.test",
        identities=[{"provider": unstorable}, {"provider": "github"}],
    )
    answered = await client.get("/v1/users/me", headers=headers)
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert (body["name"], body["email"], body["socials"]) == (None, "ada@example.test", ["github"])
    assert (await client.get("/v1/users/me/profile", headers=headers)).status_code == 200


@pytest.mark.parametrize("user_id", ["a" * 257, ".x", "x%0A", "x%20y"])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/users/{}"),
        ("GET", "/v1/users/{}/memories"),
        ("GET", "/v1/users/{}/profile"),
        ("GET", "/v1/users/{}/export"),
        ("PUT", "/v1/users/{}/account"),
        ("GET", "/v1/admin/users/{}"),
        ("DELETE", "/v1/admin/users/{}"),
        ("POST", "/v1/admin/users/{}/import"),
    ],
)
async def test_every_invalid_user_id_in_a_path_is_the_same_404(
    client: AsyncClient, settings: Settings, tenant: str, method: str, path: str, user_id: str
) -> None:
    # An admin service may address any valid user on every one of these routes.
    headers = bearer(settings, tenant, "agent", service=True, admin=True)
    response = await client.request(method, path.format(user_id), headers=headers, json={})
    assert_problem(response, 404, "NOT_FOUND")
