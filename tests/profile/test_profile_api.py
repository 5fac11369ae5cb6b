"""The profile API: merged view, JSON Patch rules, size guard, concurrency, deletes, org."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpx import AsyncClient, Response
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import assert_problem, bearer, new_tenant
from tests.profile.conftest import audit_entries, stored_profile

JSON_PATCH = {"content-type": "application/json-patch+json"}
ADA_CLAIMS: dict[str, Any] = {
    "name": "Ada Lovelace",
    "email": "ada@example.test",
    "picture": "https://img.example/ada.png",
    "identities": [{"provider": "github"}, {"provider": "credential"}],
}


def ada(settings: Settings, tenant: str) -> dict[str, str]:
    return bearer(settings, tenant, "ada", **ADA_CLAIMS)


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def patch(
    client: AsyncClient,
    headers: dict[str, str],
    operations: Any,
    path: str = "/v1/users/me/profile",
    *,
    if_match: str | None = None,
) -> Response:
    sent = {**headers, **JSON_PATCH}
    if if_match is not None:
        sent["If-Match"] = if_match
    return await client.patch(path, json=operations, headers=sent)


async def patched(
    client: AsyncClient,
    headers: dict[str, str],
    operations: Any,
    path: str = "/v1/users/me/profile",
) -> dict[str, Any]:
    response = await patch(client, headers, operations, path)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def read(
    client: AsyncClient, headers: dict[str, str], path: str = "/v1/users/me/profile"
) -> dict[str, Any]:
    response = await client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    body["etag"] = response.headers["etag"]
    return body


# --- reading: the merged view -------------------------------------------------------------------


async def test_a_new_users_profile_is_empty_with_an_etag(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    profile = await read(client, bearer(settings, tenant, "newcomer"))
    assert profile["profile"] == {} and profile["stored_keys"] == []
    assert (profile["bytes"], profile["key_count"], profile["version"]) == (2, 0, 0)
    assert profile["max_bytes"] == settings.profile_max_bytes == 8192
    assert profile["updated_at"] is None
    assert profile["etag"] == '"0"'


async def test_account_details_fill_the_view_without_the_password_provider(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    profile = await read(client, ada(settings, tenant))
    assert profile["profile"] == {
        "name": "Ada Lovelace",
        "email": "ada@example.test",
        "avatar": "https://img.example/ada.png",
        "socials": ["github"],
    }
    assert list(profile["profile"]) == ["name", "email", "avatar", "socials"]
    assert set(profile["sources"].values()) == {"account"}
    assert profile["stored_keys"] == [] and profile["bytes"] == 2
    assert await stored_profile(runtime_engine, tenant, "ada") is None


async def test_empty_account_values_fill_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "quiet", name="", email="q@example.test", amr=["pwd"])
    profile = await read(client, headers)
    assert profile["profile"] == {"email": "q@example.test"}
    assert profile["sources"] == {"email": "account"}


async def test_stored_keys_win_over_the_account_even_when_null(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    await patched(
        client,
        headers,
        [
            {"op": "replace", "path": "/name", "value": "Ada L."},
            {"op": "add", "path": "/email", "value": None},
            {"op": "add", "path": "/city", "value": "London"},
        ],
    )
    profile = await read(client, headers)
    assert profile["profile"] == {
        "avatar": "https://img.example/ada.png",
        "socials": ["github"],
        "city": "London",
        "email": None,
        "name": "Ada L.",
    }
    assert profile["sources"] == {
        "avatar": "account",
        "socials": "account",
        "city": "memory",
        "email": "memory",
        "name": "memory",
    }
    assert profile["stored_keys"] == ["city", "email", "name"]


# --- writing: JSON Patch ------------------------------------------------------------------------


async def test_patch_stores_only_stored_and_touched_keys(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    result = await patched(
        client,
        headers,
        [
            {"op": "add", "path": "/city", "value": "London"},
            {"op": "replace", "path": "/name", "value": "Countess Lovelace"},
        ],
    )
    assert result["ok"] is True and result["changed"] is True
    assert result["before"]["name"] == "Ada Lovelace"
    assert result["after"]["name"] == "Countess Lovelace"
    assert result["after"]["email"] == "ada@example.test"
    assert result["sources"]["name"] == "memory" and result["sources"]["email"] == "account"
    stored = {"city": "London", "name": "Countess Lovelace"}
    assert await stored_profile(runtime_engine, tenant, "ada") == (stored, 1)
    assert result["key_count"] == 2
    assert result["bytes"] == len(b'{"city":"London","name":"Countess Lovelace"}')
    assert result["version"] == 1


async def test_old_value_is_the_value_just_before_each_operation(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    await patched(client, headers, [{"op": "add", "path": "/city", "value": "London"}])
    result = await patched(
        client,
        headers,
        [
            {"op": "replace", "path": "/city", "value": "Paris"},
            {"op": "remove", "path": "/city"},
            {"op": "add", "path": "/city", "value": "Turin"},
            {"op": "replace", "path": "/email", "value": "ada@analytical.test"},
            {"op": "add", "path": "/pets", "value": ["cat"]},
        ],
    )
    assert result["patches"] == [
        {"op": "replace", "path": "/city", "value": "Paris", "old_value": "London"},
        {"op": "remove", "path": "/city", "old_value": "Paris"},
        {"op": "add", "path": "/city", "value": "Turin", "old_value": None},
        {
            "op": "replace",
            "path": "/email",
            "value": "ada@analytical.test",
            "old_value": "ada@example.test",
        },
        {"op": "add", "path": "/pets", "value": ["cat"], "old_value": None},
    ]
    assert result["before"]["city"] == "London" and result["after"]["city"] == "Turin"


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "replace", "path": "/nickname", "value": "Ada"},
        {"op": "remove", "path": "/nickname"},
    ],
)
async def test_replace_or_remove_of_a_missing_key_fails_and_writes_nothing(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    operation: dict[str, Any],
) -> None:
    headers = ada(settings, tenant)
    await patched(client, headers, [{"op": "add", "path": "/city", "value": "London"}])
    response = await patch(
        client, headers, [{"op": "replace", "path": "/city", "value": "Paris"}, operation]
    )
    body = assert_problem(response, 409, "PATCH_FAILED")
    assert (body["index"], body["path"]) == (1, "/nickname")
    assert await stored_profile(runtime_engine, tenant, "ada") == ({"city": "London"}, 1)


async def test_removing_a_key_only_the_account_provides_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    response = await patch(client, headers, [{"op": "remove", "path": "/email"}])
    body = assert_problem(response, 409, "KEY_FROM_ACCOUNT")
    assert (body["key"], body["source"]) == ("email", "account")
    # Once the patch itself stored an override, removing that override is fine.
    result = await patched(
        client,
        headers,
        [
            {"op": "replace", "path": "/email", "value": "x@y.test"},
            {"op": "remove", "path": "/email"},
        ],
    )
    assert result["patches"][1]["old_value"] == "x@y.test"
    assert result["changed"] is False and result["after"]["email"] == "ada@example.test"
    # The row exists (it was locked for the patch) but holds nothing.
    assert await stored_profile(runtime_engine, tenant, "ada") == ({}, 0)


@pytest.mark.parametrize(
    "body",
    [
        [{"op": "move", "from": "/a", "path": "/b"}],
        [{"op": "copy", "from": "/a", "path": "/b"}],
        [{"op": "test", "path": "/a", "value": 1}],
        [{"op": "add", "path": "/a/b", "value": 1}],
        [{"op": "add", "path": "/list/0", "value": 1}],
        [{"op": "add", "path": "/0", "value": 1}],
        [{"op": "add", "path": "city", "value": 1}],
        [{"op": "add", "path": "/", "value": 1}],
        [{"op": "add", "path": "/a~1b", "value": 1}],
        [{"op": "add", "path": "/" + "k" * 129, "value": 1}],
        [{"op": "add", "path": "/city"}],
        [{"op": "add", "path": "/city", "value": 1, "from": "/x"}],
        [{"path": "/city", "value": 1}],
        {"op": "add", "path": "/city", "value": 1},
        [{"op": "add", "path": "/city", "value": "nul \u0000 inside"}],
        [{"op": "add", "path": "/deep", "value": nested(32)}],
        [{"op": "add", "path": "/n", "value": 1}] * 101,
    ],
)
async def test_unsupported_operations_and_paths_are_refused(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    body: Any,
) -> None:
    headers = ada(settings, tenant)
    assert_problem(await patch(client, headers, body), 422, "VALIDATION_FAILED")
    assert await stored_profile(runtime_engine, tenant, "ada") is None


async def test_nan_is_not_json(client: AsyncClient, settings: Settings, tenant: str) -> None:
    response = await client.patch(
        "/v1/users/me/profile",
        content=b'[{"op": "add", "path": "/x", "value": NaN}]',
        headers={**ada(settings, tenant), **JSON_PATCH},
    )
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_patch_needs_a_json_patch_or_json_body(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    body = b'[{"op": "add", "path": "/city", "value": "London"}]'
    for content_type in ("text/plain", "application/merge-patch+json", None):
        sent = {**headers, "content-type": content_type} if content_type else headers
        response = await client.patch("/v1/users/me/profile", content=body, headers=sent)
        assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")
        assert response.headers["accept-patch"] == "application/json-patch+json"
    for content_type in ("application/json-patch+json; charset=utf-8", "application/json"):
        response = await client.patch(
            "/v1/users/me/profile", content=body, headers={**headers, "content-type": content_type}
        )
        assert response.status_code == 200, response.text


async def test_a_profile_over_the_byte_limit_is_refused_and_nothing_is_written(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    await patched(client, headers, [{"op": "add", "path": "/city", "value": "London"}])
    # Exactly the limit fits.
    room = settings.profile_max_bytes - len(b'{"city":"London","k":""}')
    at_limit = await patched(client, headers, [{"op": "add", "path": "/k", "value": "x" * room}])
    assert at_limit["bytes"] == settings.profile_max_bytes
    # Measured in UTF-8 bytes, not characters: "é" is two bytes.
    over = [{"op": "replace", "path": "/k", "value": "é" * (room // 2 + 1)}]
    body = assert_problem(await patch(client, headers, over), 413, "PROFILE_TOO_LARGE")
    assert body["attempted_bytes"] == settings.profile_max_bytes + 2
    assert body["max_bytes"] == settings.profile_max_bytes
    stored = await stored_profile(runtime_engine, tenant, "ada")
    assert stored == ({"city": "London", "k": "x" * room}, 2)


async def test_a_patch_that_changes_nothing_writes_nothing(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    first = await client.patch(
        "/v1/users/me/profile",
        json=[{"op": "add", "path": "/city", "value": "London"}],
        headers={**headers, **JSON_PATCH},
    )
    again = await client.patch(
        "/v1/users/me/profile",
        json=[{"op": "replace", "path": "/city", "value": "London"}],
        headers={**headers, **JSON_PATCH},
    )
    assert again.json()["changed"] is False and again.json()["version"] == 1
    assert again.headers["etag"] == first.headers["etag"]
    assert await stored_profile(runtime_engine, tenant, "ada") == ({"city": "London"}, 1)
    assert len(await audit_entries(runtime_engine, tenant, "profile.")) == 1


@pytest.mark.parametrize(("old", "new"), [(1, True), (0, False)])
async def test_true_replacing_1_is_a_change(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    old: int,
    new: bool,
) -> None:
    headers = ada(settings, tenant)
    await patched(client, headers, [{"op": "add", "path": "/flag", "value": old}])
    result = await patched(client, headers, [{"op": "replace", "path": "/flag", "value": new}])
    assert result["changed"] is True and result["version"] == 2
    stored = await stored_profile(runtime_engine, tenant, "ada")
    assert stored is not None and stored[0]["flag"] is new


# --- concurrency ------------------------------------------------------------------------------


async def test_if_match_guards_against_writing_over_a_change(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    seen = (await read(client, headers))["etag"]
    first = await patch(
        client, headers, [{"op": "add", "path": "/city", "value": "London"}], if_match=seen
    )
    assert first.status_code == 200, first.text
    assert first.headers["etag"] != seen
    stale = await patch(
        client, headers, [{"op": "add", "path": "/city", "value": "Paris"}], if_match=seen
    )
    body = assert_problem(stale, 412, "PRECONDITION_FAILED")
    assert stale.headers["etag"] == body["current_etag"] == first.headers["etag"]
    assert await stored_profile(runtime_engine, tenant, "ada") == ({"city": "London"}, 1)
    current = first.headers["etag"]
    for form in ("*", "W/{}", '"nope", {}'):
        accepted = form.format(current)
        response = await patch(
            client, headers, [{"op": "add", "path": "/tag", "value": accepted}], if_match=accepted
        )
        assert response.status_code == 200, (accepted, response.text)
        current = response.headers["etag"]


async def test_if_none_match_answers_304_until_the_profile_changes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    seen = (await read(client, headers))["etag"]
    cached = await client.get("/v1/users/me/profile", headers={**headers, "If-None-Match": seen})
    assert cached.status_code == 304 and cached.content == b""
    assert cached.headers["etag"] == seen
    await patched(client, headers, [{"op": "add", "path": "/city", "value": "Lisbon"}])
    fresh = await client.get("/v1/users/me/profile", headers={**headers, "If-None-Match": seen})
    assert fresh.status_code == 200 and fresh.json()["profile"]["city"] == "Lisbon"
    org = await client.get("/v1/org/profile", headers=headers)
    org_cached = await client.get(
        "/v1/org/profile", headers={**headers, "If-None-Match": org.headers["etag"]}
    )
    assert org_cached.status_code == 304


async def test_an_account_change_also_changes_the_etag(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    before = (await read(client, ada(settings, tenant)))["etag"]
    renamed = bearer(settings, tenant, "ada", **{**ADA_CLAIMS, "name": "A. A. Lovelace"})
    after = (await read(client, renamed))["etag"]
    assert before != after
    stale = await patch(
        client, renamed, [{"op": "replace", "path": "/name", "value": "Ada"}], if_match=before
    )
    assert_problem(stale, 412, "PRECONDITION_FAILED")


async def test_concurrent_patches_never_lose_an_update(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    writers = 8
    responses = await asyncio.gather(
        *(
            patch(
                client,
                service,
                [{"op": "add", "path": f"/fact_{index}", "value": index}],
                path="/v1/users/zoe/profile",
            )
            for index in range(writers)
        )
    )
    assert [response.status_code for response in responses] == [200] * writers
    stored = await stored_profile(runtime_engine, tenant, "zoe")
    assert stored == ({f"fact_{index}": index for index in range(writers)}, writers)
    versions = sorted(response.json()["version"] for response in responses)
    assert versions == list(range(1, writers + 1))


# --- deleting one key -------------------------------------------------------------------------


async def test_delete_removes_a_stored_key_and_reveals_the_account_value(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    await patched(
        client,
        headers,
        [
            {"op": "add", "path": "/city", "value": "London"},
            {"op": "replace", "path": "/name", "value": "Countess"},
        ],
    )
    response = await client.delete("/v1/users/me/profile/name", headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["patches"] == [{"op": "remove", "path": "/name", "old_value": "Countess"}]
    assert result["after"]["name"] == "Ada Lovelace" and result["sources"]["name"] == "account"
    assert response.headers["etag"] == (await read(client, headers))["etag"]
    assert await stored_profile(runtime_engine, tenant, "ada") == ({"city": "London"}, 2)


async def test_delete_of_a_key_not_stored_is_404_and_of_an_account_key_409(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    missing = await client.delete("/v1/users/me/profile/city", headers=headers)
    assert assert_problem(missing, 404, "NOT_FOUND")["key"] == "city"
    account = await client.delete("/v1/users/me/profile/email", headers=headers)
    body = assert_problem(account, 409, "KEY_FROM_ACCOUNT")
    assert "account" in body["detail"]
    bad_key = await client.delete("/v1/users/me/profile/not.a.key", headers=headers)
    assert_problem(bad_key, 422, "VALIDATION_FAILED")


async def test_delete_honours_if_match(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = ada(settings, tenant)
    await patched(client, headers, [{"op": "add", "path": "/city", "value": "London"}])
    stale = await client.delete("/v1/users/me/profile/city", headers={**headers, "if-match": '"0"'})
    assert_problem(stale, 412, "PRECONDITION_FAILED")
    assert (await read(client, headers))["profile"]["city"] == "London"


# --- the audit trail --------------------------------------------------------------------------


async def test_every_change_is_audited_with_before_and_after(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = ada(settings, tenant)
    await patched(
        client,
        headers,
        [
            {"op": "add", "path": "/city", "value": "London"},
            {"op": "add", "path": "/pets", "value": ["cat"]},
        ],
    )
    await patched(client, headers, [{"op": "replace", "path": "/city", "value": "Paris"}])
    await client.delete("/v1/users/me/profile/pets", headers=headers)
    entries = await audit_entries(runtime_engine, tenant, "profile.")
    assert [(e["action"], e["actor_id"], e["target_id"]) for e in entries] == [
        ("profile.patch", "ada", "ada"),
        ("profile.patch", "ada", "ada"),
        ("profile.delete_key", "ada", "ada"),
    ]
    assert entries[0]["detail"]["before"] == {}
    assert entries[0]["detail"]["after"] == {"city": "London", "pets": ["cat"]}
    assert entries[1]["detail"]["before"] == {"city": "London"}
    assert entries[1]["detail"]["after"] == {"city": "Paris"}
    assert entries[2]["detail"]["before"] == {"pets": ["cat"]}
    assert entries[2]["detail"]["after"] == {}
    assert [e["detail"]["version"] for e in entries] == [1, 2, 3]


# --- who may see and change what --------------------------------------------------------------


async def test_other_users_and_tenants_get_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await patched(client, ada(settings, tenant), [{"op": "add", "path": "/city", "value": "X"}])
    bob = bearer(settings, tenant, "bob")
    attempts = [
        ("GET", "/v1/users/ada/profile", None),
        ("PATCH", "/v1/users/ada/profile", [{"op": "add", "path": "/city", "value": "Y"}]),
        ("DELETE", "/v1/users/ada/profile/city", None),
    ]
    for method, url, body in attempts:
        response = await client.request(method, url, json=body, headers={**bob, **JSON_PATCH})
        assert_problem(response, 404, "NOT_FOUND")
    # A service of another tenant reaches that tenant's "ada", who has no profile.
    foreign = bearer(settings, new_tenant(), "agent", service=True)
    assert (await read(client, foreign, "/v1/users/ada/profile"))["profile"] == {}
    missing = await client.delete("/v1/users/ada/profile/city", headers=foreign)
    assert_problem(missing, 404, "NOT_FOUND")
    assert (await read(client, ada(settings, tenant)))["profile"]["city"] == "X"


async def test_a_service_reads_and_writes_any_user_of_its_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    service = bearer(settings, tenant, "agent", service=True)
    await patched(
        client, service, [{"op": "add", "path": "/city", "value": "Oslo"}], "/v1/users/kai/profile"
    )
    mine = await read(client, bearer(settings, tenant, "kai"))
    assert mine["profile"] == {"city": "Oslo"}
    assert_problem(await client.get("/v1/users/me/profile", headers=service), 404, "NOT_FOUND")


async def test_the_org_profile_is_shared_and_written_by_admins_only(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    admin = bearer(settings, tenant, "root", admin=True, name="Root User")
    result = await patched(
        client, admin, [{"op": "add", "path": "/company", "value": "Acme"}], "/v1/org/profile"
    )
    assert result["after"] == {"company": "Acme"}
    for reader in (ada(settings, tenant), bearer(settings, tenant, "agent", service=True)):
        org = await read(client, reader, "/v1/org/profile")
        assert org["profile"] == {"company": "Acme"} and org["sources"] == {"company": "memory"}
    for writer in (ada(settings, tenant), bearer(settings, tenant, "agent", service=True)):
        refused = await patch(
            client, writer, [{"op": "add", "path": "/company", "value": "Evil"}], "/v1/org/profile"
        )
        assert_problem(refused, 403, "ORG_WRITE_FORBIDDEN")
        deleted = await client.delete("/v1/org/profile/company", headers=writer)
        assert_problem(deleted, 403, "ORG_WRITE_FORBIDDEN")
    assert await stored_profile(runtime_engine, tenant, None) == ({"company": "Acme"}, 1)
    other_tenant = await read(client, bearer(settings, new_tenant(), "x"), "/v1/org/profile")
    assert other_tenant["profile"] == {}
    failed = await patch(client, admin, [{"op": "remove", "path": "/nothing"}], "/v1/org/profile")
    assert_problem(failed, 409, "PATCH_FAILED")
    removed = await client.delete("/v1/org/profile/company", headers=admin)
    assert removed.status_code == 200 and removed.json()["after"] == {}
    entries = await audit_entries(runtime_engine, tenant, "profile.")
    assert [(e["action"], e["target_id"]) for e in entries] == [
        ("profile.patch", None),
        ("profile.delete_key", None),
    ]


# --- tokens never reach the profile -----------------------------------------------------------


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "add", "path": "/access_token", "value": "opaque-value"},
        {"op": "add", "path": "/refreshToken", "value": "opaque-value"},
        {"op": "add", "path": "/id_token", "value": "opaque-value"},
        {"op": "add", "path": "/providerAccountId", "value": "1234567"},
        {"op": "add", "path": "/github", "value": {"login": "ada", "access_token": "x"}},
        {"op": "add", "path": "/note", "value": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2ln"},
        {"op": "replace", "path": "/name", "value": ["Bearer abcdefghijklmnopqrstuvwxyz"]},
    ],
)
async def test_tokens_and_account_ids_are_refused_and_never_stored(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    operation: dict[str, Any],
) -> None:
    response = await patch(client, ada(settings, tenant), [operation])
    body = assert_problem(response, 422, "SECRET_REFUSED")
    assert body["errors"][0]["type"] == "credential_refused"
    assert await stored_profile(runtime_engine, tenant, "ada") is None


# --- the OpenAPI document ---------------------------------------------------------------------


async def test_openapi_describes_the_patch_body_and_problems(client: AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    operation = spec["paths"]["/v1/users/{user_id}/profile"]["patch"]
    content = operation["requestBody"]["content"]
    # One declared media type (generators choke on two); application/json is still accepted.
    assert set(content) == {"application/json-patch+json"}
    assert content["application/json-patch+json"]["schema"]["$ref"] == (
        "#/components/schemas/ProfilePatch"
    )
    schemas = spec["components"]["schemas"]
    assert set(schemas["ProfilePatch"]["items"]["discriminator"]["mapping"]) == {
        "add",
        "replace",
        "remove",
    }
    assert schemas["PatchAdd"]["properties"]["path"]["pattern"] == "^/[A-Za-z_][A-Za-z0-9_-]*$"
    assert {"409", "412", "413", "415", "422"} <= set(operation["responses"])
    assert set(operation["responses"]["413"]["content"]) == {"application/problem+json"}
    assert "ETag" in operation["responses"]["200"]["headers"]
    assert "if-match" in {p["name"] for p in operation["parameters"]}
    org_patch = spec["paths"]["/v1/org/profile"]["patch"]
    assert "403" in org_patch["responses"]
    delete = spec["paths"]["/v1/users/{user_id}/profile/{key}"]["delete"]
    assert {"404", "409", "412"} <= set(delete["responses"])
