"""A memory's `source_thread_id` names a thread of the memory's owner, and each of its
`source_message_ids` a message of the owner's threads: another user's or tenant's thread or
message, or none at all, is a 422 and nothing is stored."""

from __future__ import annotations

import uuid

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import assert_problem, bearer, new_tenant


async def new_thread(client: AsyncClient, headers: dict[str, str]) -> str:
    response = await client.post("/v1/users/me/threads", headers=headers, json={})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def texts(client: AsyncClient, headers: dict[str, str], path: str) -> list[str]:
    listing = await client.get(path, headers=headers, params={"limit": 100})
    assert listing.status_code == 200, listing.text
    return [memory["text"] for memory in listing.json()["items"]]


async def test_a_memory_may_name_its_owners_thread(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await new_thread(client, ada)
    created = await client.post(
        "/v1/users/me/memories",
        headers=ada,
        json={"text": "Ada's cat is called Pixel.", "source_thread_id": thread_id},
    )
    assert created.status_code == 201, created.text
    stored = await client.get(f"/v1/users/me/memories/{created.json()['id']}", headers=ada)
    assert stored.json()["source_thread_id"] == thread_id


async def test_another_users_or_tenants_thread_or_none_at_all_is_refused(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    bobs = await new_thread(client, bearer(settings, tenant, "bob"))
    elsewhere = await new_thread(client, bearer(settings, new_tenant(), "ada"))
    for thread_id in (bobs, elsewhere, str(uuid.uuid4())):
        response = await client.post(
            "/v1/users/me/memories",
            headers=ada,
            json={"text": "Cited from a conversation.", "source_thread_id": thread_id},
        )
        body = assert_problem(response, 422, "VALIDATION_FAILED")
        assert [error["loc"] for error in body["errors"]] == [["body", "source_thread_id"]]
    assert await texts(client, ada, "/v1/users/me/memories") == []


async def test_a_batch_with_one_foreign_thread_stores_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    own = await new_thread(client, ada)
    bobs = await new_thread(client, bearer(settings, tenant, "bob"))
    response = await client.post(
        "/v1/users/me/memories/batch",
        headers=ada,
        json={
            "items": [
                {"text": "From Ada's own chat.", "source_thread_id": own},
                {"text": "From Bob's chat.", "source_thread_id": bobs},
            ]
        },
    )
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in body["errors"]] == [["body", "items", 1, "source_thread_id"]]
    assert await texts(client, ada, "/v1/users/me/memories") == []


async def test_a_service_writes_a_users_memory_from_that_users_thread_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    agent = bearer(settings, tenant, "agent", service=True)
    adas = await new_thread(client, bearer(settings, tenant, "ada"))
    bobs = await new_thread(client, bearer(settings, tenant, "bob"))
    refused = await client.post(
        "/v1/users/ada/memories",
        headers=agent,
        json={"text": "Ada plays chess.", "source_thread_id": bobs},
    )
    assert_problem(refused, 422, "VALIDATION_FAILED")
    accepted = await client.post(
        "/v1/users/ada/memories",
        headers=agent,
        json={"text": "Ada plays chess.", "source_thread_id": adas},
    )
    assert accepted.status_code == 201, accepted.text


async def test_an_org_memory_may_come_from_any_thread_of_its_tenant_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    adas = await new_thread(client, bearer(settings, tenant, "ada"))
    elsewhere = await new_thread(client, bearer(settings, new_tenant(), "ada"))
    refused = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The offsite is in Porto.", "source_thread_id": elsewhere},
    )
    assert_problem(refused, 422, "VALIDATION_FAILED")
    assert await texts(client, admin, "/v1/org/memories") == []
    accepted = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The offsite is in Porto.", "source_thread_id": adas},
    )
    assert accepted.status_code == 201, accepted.text


async def new_message(client: AsyncClient, headers: dict[str, str], thread_id: str) -> str:
    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": [{"role": "user", "content": "I have a cat called Pixel."}]},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["items"][0]["id"])


async def test_source_messages_are_the_owners_messages(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    bob = bearer(settings, tenant, "bob")
    own_thread, other_own_thread = await new_thread(client, ada), await new_thread(client, ada)
    own = await new_message(client, ada, own_thread)
    own_elsewhere = await new_message(client, ada, other_own_thread)
    bobs = await new_message(client, bob, await new_thread(client, bob))
    other_tenant = bearer(settings, new_tenant(), "ada")
    foreign = await new_message(client, other_tenant, await new_thread(client, other_tenant))
    # Messages of the owner's conversations, in its source thread or another of them.
    created = await client.post(
        "/v1/users/me/memories",
        headers=ada,
        json={
            "text": "Ada's cat is called Pixel.",
            "source_thread_id": own_thread,
            "source_message_ids": [own, own_elsewhere],
        },
    )
    assert created.status_code == 201, created.text
    stored = await client.get(f"/v1/users/me/memories/{created.json()['id']}", headers=ada)
    assert stored.json()["source_message_ids"] == [own, own_elsewhere]
    # Another user's or tenant's message, or none at all, in the same words each.
    for message_id in (bobs, foreign, str(uuid.uuid4())):
        response = await client.post(
            "/v1/users/me/memories/batch",
            headers=ada,
            json={
                "items": [
                    {"text": "Pixel likes the sofa.", "source_message_ids": [own]},
                    {
                        "text": "Pixel is grey.",
                        "source_thread_id": own_thread,
                        "source_message_ids": [own, message_id],
                    },
                ]
            },
        )
        body = assert_problem(response, 422, "VALIDATION_FAILED")
        assert body["errors"] == [
            {
                "loc": ["body", "items", 1, "source_message_ids", 1],
                "msg": "names no message of this memory's owner",
                "type": "value_error",
            }
        ]
    assert await texts(client, ada, "/v1/users/me/memories") == ["Ada's cat is called Pixel."]


async def test_an_organization_memory_may_cite_any_users_message_of_its_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    bob = bearer(settings, tenant, "bob")
    bobs = await new_message(client, bob, await new_thread(client, bob))
    other_tenant = bearer(settings, new_tenant(), "bob")
    foreign = await new_message(client, other_tenant, await new_thread(client, other_tenant))
    cited = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The team's mascot is a cat.", "source_message_ids": [bobs]},
    )
    assert cited.status_code == 201, cited.text
    refused = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The team meets on Mondays.", "source_message_ids": [foreign]},
    )
    body = assert_problem(refused, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in body["errors"]] == [["body", "source_message_ids", 0]]
