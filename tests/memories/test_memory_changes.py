"""What a PATCH of a memory writes: `invalid_at` follows the lifecycle in and out of
`superseded`, and a change to the values already stored writes nothing (same ETag, no
history event)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from httpx import AsyncClient, Response

from service.config import Settings
from tests.conftest import assert_precondition_failed, bearer
from tests.fixtures.factories import remember

MEMORIES = "/v1/users/me/memories"


async def patch(
    client: AsyncClient, headers: dict[str, str], memory_id: str, **body: Any
) -> Response:
    response = await client.patch(f"{MEMORIES}/{memory_id}", headers=headers, json=body)
    assert response.status_code == 200, response.text
    return response


async def history(client: AsyncClient, headers: dict[str, str], memory_id: str) -> list[Any]:
    response = await client.get(f"{MEMORIES}/{memory_id}/history", headers=headers)
    assert response.status_code == 200, response.text
    return [(e["action"], e["changes"]) for e in response.json()["items"]]


async def test_invalid_at_is_set_when_a_memory_is_superseded_and_cleared_when_restored(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    memory = await remember(client, headers, text="Ada lives in Porto.")
    first = (await patch(client, headers, memory["id"], lifecycle="superseded")).json()
    assert first["invalid_at"] is not None
    await asyncio.sleep(0.01)
    again = await patch(client, headers, memory["id"], lifecycle="superseded")
    assert again.json()["invalid_at"] == first["invalid_at"]
    concurrent = await asyncio.gather(
        *(
            client.patch(f"{MEMORIES}/{memory['id']}", headers=headers, json=superseded)
            for superseded in [{"lifecycle": "superseded"}] * 5
        )
    )
    assert {r.json()["invalid_at"] for r in concurrent} == {first["invalid_at"]}
    restored = (await patch(client, headers, memory["id"], lifecycle="confirmed")).json()
    assert (restored["lifecycle"], restored["invalid_at"]) == ("confirmed", None)

    assert await history(client, headers, memory["id"]) == [
        ("add", {}),
        ("supersede", {"lifecycle": "superseded", "invalid_at": first["invalid_at"]}),
        ("update", {"lifecycle": "confirmed", "invalid_at": None, "superseded_by": None}),
    ]


async def test_a_memory_retired_before_it_began_ends_where_it_begins(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    # It became true tomorrow (its `event_at`): retired now, it stops being true no earlier.
    headers = bearer(settings, tenant, "ada")
    starts = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    memory = await remember(
        client, headers, text="Ada starts at Acme.", event_at=starts.isoformat()
    )
    retired = (await patch(client, headers, memory["id"], lifecycle="superseded")).json()
    assert datetime.fromisoformat(retired["invalid_at"]) == starts


async def test_a_change_to_the_stored_values_writes_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A retried PATCH leaves the memory, its ETag and its history as they were, so other
    clients' `If-Match` still holds; `If-Match` is still checked."""
    headers = bearer(settings, tenant, "ada")
    created = await client.post(
        MEMORIES,
        headers=headers,
        json={
            "text": "Ada drinks tea.",
            "confidence": 0.5,
            "category": "preference",
            "event_at": "2026-01-01T10:00:00+02:00",
            "metadata": {"source": "chat", "n": 1.5},
        },
    )
    tag, memory = created.headers["etag"], created.json()
    for same in (
        {},
        {"confidence": 0.5},
        {"text": "  Ada drinks tea.\u200b"},
        {"lifecycle": "confirmed", "category": "preference"},
        {"event_at": "2026-01-01T08:00:00Z", "metadata": {"n": 1.5, "source": "chat"}},
        {"speaker": None, "needs_review": False},
    ):
        response = await client.patch(
            f"{MEMORIES}/{memory['id']}", headers={**headers, "If-Match": tag}, json=same
        )
        assert response.status_code == 200, response.text
        assert response.headers["etag"] == tag, same
        assert response.json() == {k: v for k, v in memory.items() if k != "duplicate"}
    assert await history(client, headers, memory["id"]) == [("add", {})]

    stale = await client.patch(
        f"{MEMORIES}/{memory['id']}", headers={**headers, "If-Match": '"stale"'}, json={}
    )
    assert_precondition_failed(stale, tag)
    changed = await patch(client, headers, memory["id"], confidence=0.5, category="drink")
    assert changed.headers["etag"] != tag
    assert await history(client, headers, memory["id"]) == [
        ("add", {}),
        ("update", {"category": "drink"}),
    ]


async def test_the_history_names_a_change_by_the_api_s_field_names(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    memory = await remember(client, headers, text="Ada drinks tea.", metadata={"v": 1})
    await patch(client, headers, memory["id"], metadata={"v": 2}, confidence=0.4)
    assert (await history(client, headers, memory["id"]))[-1] == (
        "update",
        {"metadata": {"v": 2}, "confidence": 0.4},
    )
