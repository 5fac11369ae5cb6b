"""Every write that takes `If-Match` evaluates `If-None-Match` too (RFC 9110 §13.1.2): `*`, or
the resource's current tag, answers 412 with that tag and changes nothing, since the resource
exists (in that state); another tag lets the write go on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from httpx import AsyncClient

from service.config import Settings
from tests.conftest import assert_precondition_failed, bearer
from tests.fixtures.factories import post_created, remember, start_thread

JSON_PATCH = {"content-type": "application/json-patch+json"}


@dataclass(frozen=True)
class GuardedWrite:
    """A write of one resource, and where that resource is read (with its ETag)."""

    method: str
    path: str
    read: str
    headers: dict[str, str]
    body: Any = None
    content_headers: dict[str, str] | None = None


Arrange = Callable[[AsyncClient, Settings, str], Awaitable[GuardedWrite]]


async def memory_patch(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    headers = bearer(settings, tenant, "ada")
    path = f"/v1/users/me/memories/{(await remember(client, headers, text='Ada hikes.'))['id']}"
    return GuardedWrite("PATCH", path, path, headers, {"text": "Ada climbs."})


async def org_memory_patch(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    admin = bearer(settings, tenant, "root", admin=True)
    created = await post_created(client, "/v1/org/memories", admin, {"text": "Open at nine."})
    path = created.headers["location"]
    return GuardedWrite("PATCH", path, path, admin, {"text": "Open at ten."})


async def procedures_put(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    path = "/v1/users/me/procedures"
    return GuardedWrite("PUT", path, path, bearer(settings, tenant, "ada"), {"style": "Be brief."})


async def org_procedures_put(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    admin = bearer(settings, tenant, "root", admin=True)
    return GuardedWrite(
        "PUT", "/v1/org/procedures", "/v1/org/procedures", admin, {"style": "Kind."}
    )


async def thread_patch(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    headers = bearer(settings, tenant, "ada")
    path = f"/v1/users/me/threads/{await start_thread(client, headers, title='Trip')}"
    return GuardedWrite("PATCH", path, path, headers, {"title": "Lisbon trip"})


async def thread_delete(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    headers = bearer(settings, tenant, "ada")
    path = f"/v1/users/me/threads/{await start_thread(client, headers, title='Trip')}"
    return GuardedWrite("DELETE", path, path, headers)


async def profile_patch(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    """A profile always exists, if only empty: `*` refuses even its first patch."""
    path = "/v1/users/me/profile"
    body = [{"op": "add", "path": "/city", "value": "Porto"}]
    return GuardedWrite("PATCH", path, path, bearer(settings, tenant, "ada"), body, JSON_PATCH)


async def org_profile_delete_key(
    client: AsyncClient, settings: Settings, tenant: str
) -> GuardedWrite:
    admin = bearer(settings, tenant, "root", admin=True)
    added = await client.patch(
        "/v1/org/profile",
        json=[{"op": "add", "path": "/hq", "value": "Porto"}],
        headers={**admin, **JSON_PATCH},
    )
    assert added.status_code == 200, added.text
    return GuardedWrite("DELETE", "/v1/org/profile/hq", "/v1/org/profile", admin)


async def account_put(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    service = bearer(settings, tenant, "agent", service=True)
    known = await client.put("/v1/users/zoe/account", json={"name": "Zoe"}, headers=service)
    assert known.status_code == 200, known.text
    return GuardedWrite("PUT", "/v1/users/zoe/account", "/v1/users/zoe", service, {"name": "Zo"})


async def api_key_revoke(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    admin = bearer(settings, tenant, "root", admin=True)
    created = await post_created(client, "/v1/admin/api-keys", admin, {"name": "agent"})
    path = created.headers["location"]
    return GuardedWrite("DELETE", path, path, admin)


async def retention_put(client: AsyncClient, settings: Settings, tenant: str) -> GuardedWrite:
    admin = bearer(settings, tenant, "root", admin=True)
    path = "/v1/admin/retention"
    return GuardedWrite("PUT", path, path, admin, {"episodic_days": 30})


WRITES: dict[str, Arrange] = {
    "memory PATCH": memory_patch,
    "org memory PATCH": org_memory_patch,
    "procedures PUT": procedures_put,
    "org procedures PUT": org_procedures_put,
    "thread PATCH": thread_patch,
    "thread DELETE": thread_delete,
    "profile PATCH": profile_patch,
    "org profile key DELETE": org_profile_delete_key,
    "account PUT": account_put,
    "API key DELETE": api_key_revoke,
    "retention PUT": retention_put,
}


@pytest.mark.parametrize("name", list(WRITES))
async def test_if_none_match_refuses_a_write_while_the_resource_is_in_that_state(
    client: AsyncClient, settings: Settings, tenant: str, name: str
) -> None:
    write = await WRITES[name](client, settings, tenant)

    async def send(condition: str) -> Any:
        headers = {**write.headers, **(write.content_headers or {}), "If-None-Match": condition}
        if write.body is None:
            return await client.request(write.method, write.path, headers=headers)
        return await client.request(write.method, write.path, headers=headers, json=write.body)

    read = await client.get(write.read, headers=write.headers)
    assert read.status_code == 200, read.text
    tag = read.headers["etag"]
    for condition in ("*", tag, f'"other", {tag}', f"W/{tag}"):
        refused = assert_precondition_failed(await send(condition), tag)
        # The title is the problem type's, true of every refusal of it: an If-None-Match
        # refused is no change since the resource was read.
        assert refused["title"] == "Precondition failed"
    after = await client.get(write.read, headers=write.headers)
    assert after.headers["etag"] == tag and after.json() == read.json()
    applied = await send('"other"')
    assert applied.status_code in (200, 204), applied.text


async def test_a_put_of_an_account_with_if_none_match_star_only_adds_the_user(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """`*` means "only if it is not there": an account Mneme does not know yet is set."""
    service = bearer(settings, tenant, "agent", service=True)
    only_add = {**service, "If-None-Match": "*"}
    added = await client.put("/v1/users/yan/account", json={"name": "Yan"}, headers=only_add)
    assert added.status_code == 200, added.text
    again = await client.put("/v1/users/yan/account", json={"name": "Y"}, headers=only_add)
    assert_precondition_failed(again, added.headers["etag"])
