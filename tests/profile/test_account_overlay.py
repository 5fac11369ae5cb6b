"""The auth overlay behind a profile: set by services, recorded from end users' tokens, and
never holding tokens or account ids."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import assert_problem, bearer
from tests.db.sent_queries import queries_of
from tests.profile.conftest import account_row_text, audit_entries

ID_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJkYW5hIiwiZW1haWwiOiJkQHguZXgifQ.c2lnbmF0dXJl"


async def set_account(
    client: AsyncClient, headers: dict[str, str], user_id: str, body: Any
) -> dict[str, Any]:
    response = await client.put(f"/v1/users/{user_id}/account", json=body, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def profile_of(client: AsyncClient, headers: dict[str, str], user_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/users/{user_id}/profile", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_service_sets_a_users_overlay_and_the_profile_shows_it(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    account = await set_account(
        client,
        service,
        "dana",
        {
            "name": "Dana",
            "email": "dana@example.test",
            "avatar": "https://img.example/d.png",
            "socials": ["google", "credential", "github", "google"],
        },
    )
    assert (account["id"], account["name"], account["socials"]) == (
        "dana",
        "Dana",
        ["google", "github"],
    )
    profile = await profile_of(client, service, "dana")
    assert profile["profile"] == {
        "name": "Dana",
        "email": "dana@example.test",
        "avatar": "https://img.example/d.png",
        "socials": ["google", "github"],
    }
    assert set(profile["sources"].values()) == {"account"}
    [entry] = await audit_entries(runtime_engine, tenant, "account.")
    assert (entry["action"], entry["actor_id"], entry["target_id"]) == (
        "account.overlay_set",
        "agent",
        "dana",
    )
    assert entry["detail"]["before"] is None
    assert entry["detail"]["after"]["email"] == "dana@example.test"


async def test_put_replaces_the_whole_overlay_and_an_unchanged_put_writes_nothing(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    await set_account(client, service, "dana", {"name": "Dana", "email": "d@example.test"})
    await set_account(client, service, "dana", {"name": "Dana D."})
    again = await set_account(client, service, "dana", {"name": "Dana D."})
    assert (again["name"], again["email"], again["socials"]) == ("Dana D.", None, [])
    profile = await profile_of(client, service, "dana")
    assert profile["profile"] == {"name": "Dana D."}
    entries = await audit_entries(runtime_engine, tenant, "account.")
    assert len(entries) == 2
    assert entries[1]["detail"]["before"]["email"] == "d@example.test"
    assert entries[1]["detail"]["after"]["email"] is None


async def test_if_match_guards_a_users_account_and_reads_answer_304(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    for tag in ("*", '"bogus"'):
        unknown = await client.put(
            "/v1/users/erin/account", json={"name": "Erin"}, headers={**service, "If-Match": tag}
        )
        # Nothing was read, so nothing changed since: the detail says there is no such user.
        body = assert_problem(unknown, 412, "PRECONDITION_FAILED")
        assert "no user 'erin'" in body["detail"] and "since you read" not in body["detail"]
        assert "etag" not in unknown.headers and "current_etag" not in body
    assert (await client.get("/v1/users/erin", headers=service)).status_code == 404

    created = await client.put("/v1/users/erin/account", json={"name": "Erin"}, headers=service)
    read = await client.get("/v1/users/erin", headers=service)
    assert read.headers["etag"] == created.headers["etag"]
    cached = await client.get(
        "/v1/users/erin", headers={**service, "If-None-Match": read.headers["etag"]}
    )
    assert cached.status_code == 304

    renamed = await client.put(
        "/v1/users/erin/account",
        json={"name": "Erin B."},
        headers={**service, "If-Match": read.headers["etag"]},
    )
    assert renamed.status_code == 200 and renamed.headers["etag"] != read.headers["etag"]
    for tag in (read.headers["etag"], "bogus"):
        stale = await client.put(
            "/v1/users/erin/account", json={"name": "Erin C."}, headers={**service, "If-Match": tag}
        )
        body = assert_problem(stale, 412, "PRECONDITION_FAILED")
        assert body["current_etag"] == stale.headers["etag"] == renamed.headers["etag"]
    assert (await client.get("/v1/users/erin", headers=service)).json()["name"] == "Erin B."
    assert len(await audit_entries(runtime_engine, tenant, "account.")) == 2


async def test_an_end_user_cannot_set_its_overlay_here(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    user = bearer(settings, tenant, "eve", name="Eve")
    refused = await client.put("/v1/users/me/account", json={"name": "Mallory"}, headers=user)
    body = assert_problem(refused, 403, "ACCOUNT_WRITE_FORBIDDEN")
    assert "token" in body["detail"]
    other = await client.put("/v1/users/frank/account", json={"name": "F"}, headers=user)
    assert_problem(other, 404, "NOT_FOUND")
    admin = bearer(settings, tenant, "eve", admin=True, name="Eve")
    assert_problem(
        await client.put("/v1/users/me/account", json={"name": "M"}, headers=admin),
        403,
        "ACCOUNT_WRITE_FORBIDDEN",
    )
    assert (await client.get("/v1/users/me", headers=user)).json()["name"] == "Eve"
    assert await audit_entries(runtime_engine, tenant, "account.") == []


async def test_a_token_with_account_claims_replaces_a_set_overlay_and_one_without_keeps_it(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    await set_account(client, service, "gus", {"name": "Gus", "socials": ["github"]})
    bare_token = bearer(settings, tenant, "gus")
    assert (await profile_of(client, bare_token, "me"))["profile"] == {
        "name": "Gus",
        "socials": ["github"],
    }
    with_claims = bearer(settings, tenant, "gus", name="Gustav", email="g@example.test")
    assert (await profile_of(client, with_claims, "me"))["profile"] == {
        "name": "Gustav",
        "email": "g@example.test",
    }


async def test_an_end_users_own_overlay_is_not_read_again_after_its_record(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The record at the start of the request found (or made) the user's row hold the token's
    claims: its profile shows them without reading the row again. A token without claims, whose
    overlay a service may have set, still reads it."""
    with_claims = bearer(settings, tenant, "ivo", name="Ivo", email="ivo@example.test")
    await profile_of(client, with_claims, "me")

    def overlay_reads(statements: list[str]) -> list[str]:
        # BEGIN's query checks the user's record (`EndUserRecord`); any other reads its row.
        return [s for s in statements if "FROM user_account" in s and not s.startswith("BEGIN")]

    with queries_of(app.state.mneme.engine) as statements:
        profile = (await profile_of(client, with_claims, "me"))["profile"]
        assert profile == {"name": "Ivo", "email": "ivo@example.test"}
        assert any(statement.startswith("BEGIN") for statement in statements)
        assert overlay_reads(statements) == []
        bare = await profile_of(client, bearer(settings, tenant, "ivo"), "me")
        assert bare["profile"] == profile
        assert len(overlay_reads(statements)) == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"name": "Dana", "access_token": "opaque-access"}, "SECRET_REFUSED"),
        ({"name": "Dana", "refresh_token": "opaque-refresh"}, "SECRET_REFUSED"),
        ({"name": "Dana", "id_token": ID_TOKEN}, "SECRET_REFUSED"),
        ({"name": "Dana", "accountId": "110248495921238986420"}, "SECRET_REFUSED"),
        ({"name": "Dana", "provider_account_id": "110248495921238986420"}, "SECRET_REFUSED"),
        ({"name": ID_TOKEN}, "SECRET_REFUSED"),
        ({"avatar": f"https://img.example/a.png?token={ID_TOKEN}"}, "SECRET_REFUSED"),
        ({"socials": ["github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"]}, "SECRET_REFUSED"),
        # Not a provider name, and not a field of the overlay: refused by the schema.
        (
            {"socials": [{"provider": "google", "access_token": "opaque-access"}]},
            "VALIDATION_FAILED",
        ),
        ({"name": "Dana", "nickname": "D"}, "VALIDATION_FAILED"),
    ],
)
async def test_tokens_and_account_ids_are_refused_and_never_stored(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    body: dict[str, Any],
    code: str,
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    await set_account(client, service, "dana", {"name": "Dana"})
    response = await client.put("/v1/users/dana/account", json=body, headers=service)
    assert_problem(response, 422, code)
    row = await account_row_text(runtime_engine, tenant, "dana")
    assert '"name":"Dana"' in row
    for secret in (
        "opaque-access",
        "opaque-refresh",
        "110248495921238986420",
        ID_TOKEN,
        "nickname",
    ):
        assert secret not in row


async def test_credential_fields_are_named_in_the_refusal(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    response = await client.put(
        "/v1/users/dana/account", json={"access_token": "opaque-access"}, headers=service
    )
    body = assert_problem(response, 422, "SECRET_REFUSED")
    assert body["errors"][0]["type"] == "credential_refused"
    assert "access_token" in body["errors"][0]["msg"]
    assert "opaque-access" not in response.text


async def test_token_claims_are_recorded_without_tokens_or_the_password_provider(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(
        settings,
        tenant,
        "hana",
        name="Hana",
        picture="https://img.example/h.png",
        identities=[
            {"provider": "credential", "access_token": "opaque-access", "accountId": "4242424242"},
            {"provider": "github", "refresh_token": "opaque-refresh"},
        ],
        id_token=ID_TOKEN,
    )
    profile = await profile_of(client, headers, "me")
    assert profile["profile"] == {
        "name": "Hana",
        "avatar": "https://img.example/h.png",
        "socials": ["github"],
    }
    row = await account_row_text(runtime_engine, tenant, "hana")
    assert '"name":"Hana"' in row
    for secret in ("opaque-access", "opaque-refresh", "4242424242", ID_TOKEN, "credential"):
        assert secret not in row


async def test_a_token_claim_the_secret_policy_refuses_is_left_out_of_the_overlay(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(
        settings,
        tenant,
        "hana",
        name="Hana",
        email="SSN 123-45-6789",
        picture=f"https://img.example/h.png?token={ID_TOKEN}",
        identities=[{"provider": "github"}, {"provider": "ghp_abcdefghijklmnopqrstuvwxyz01234567"}],
    )
    profile = await profile_of(client, headers, "me")
    assert profile["profile"] == {"name": "Hana", "socials": ["github"]}
    row = await account_row_text(runtime_engine, tenant, "hana")
    assert '"name":"Hana"' in row
    assert ID_TOKEN not in row and "123-45-6789" not in row and "ghp_" not in row


@pytest.mark.parametrize("identities", [5, True, "google", {"provider": "github"}])
async def test_a_token_whose_providers_claim_is_not_a_list_is_served_without_it(
    client: AsyncClient, settings: Settings, tenant: str, identities: object
) -> None:
    headers = bearer(settings, tenant, "ines", name="Ines", identities=identities)
    me = await client.get("/v1/users/me", headers=headers)
    assert me.status_code == 200, me.text
    assert me.json()["socials"] == []
    profile = await profile_of(client, headers, "me")
    assert profile["profile"] == {"name": "Ines"}


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-email"},
        {"email": "ada@localhost"},
        {"email": "ada lovelace@example.test"},
        {"avatar": "javascript:alert(1)"},
        {"avatar": "ftp://img.example/a.png"},
        {"avatar": "data:image/png;base64,iVBORw0KGgo="},
        {"avatar": "https://"},
        {"avatar": "//img.example/a.png"},
    ],
)
async def test_an_email_that_is_no_address_or_an_avatar_that_is_no_web_url_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, body: dict[str, str]
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    response = await client.put("/v1/users/dana/account", json=body, headers=service)
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert problem["errors"][0]["loc"] == ["body", *body]
    profile = await profile_of(client, service, "dana")
    assert profile["profile"] == {}


async def test_a_name_with_nothing_visible_is_no_name_from_a_service_or_a_token(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    for blank in (" ", "\u200b", "\ufeff\u2060"):
        account = await set_account(
            client, service, "dana", {"name": blank, "email": blank, "avatar": blank}
        )
        assert (account["name"], account["email"], account["avatar"]) == (None, None, None)
        user = bearer(settings, tenant, "ines", name=blank, email="ines@example.test")
        me = await client.get("/v1/users/me", headers=user)
        assert me.status_code == 200, me.text
        assert (me.json()["name"], me.json()["email"]) == (None, "ines@example.test")
        assert (await profile_of(client, user, "me"))["profile"] == {"email": "ines@example.test"}


async def test_token_claims_a_service_could_not_set_are_left_out(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(
        settings,
        tenant,
        "ines",
        name="Ines",
        email="not-an-email",
        picture="javascript:alert(1)",
    )
    me = await client.get("/v1/users/me", headers=headers)
    assert me.status_code == 200, me.text
    assert (me.json()["name"], me.json()["email"], me.json()["avatar"]) == ("Ines", None, None)


async def test_openapi_declares_the_account_route(client: AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/users/{user_id}/account"]["put"]
    assert operation["operationId"] == "set_user_account"
    assert {"403", "404", "422"} <= set(operation["responses"])
    body = spec["components"]["schemas"]["AccountOverlayUpdate"]
    assert set(body["properties"]) == {"name", "email", "avatar", "socials"}
    assert body["additionalProperties"] is False
