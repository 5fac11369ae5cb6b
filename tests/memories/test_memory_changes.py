"""What a PATCH of a memory writes: `invalid_at` follows the lifecycle in and out of
`superseded`, and a change to the values already stored writes nothing (same ETag, no
history event)."""

from __future__ import annotations

import asyncio
from typing import Any

from httpx import AsyncClient, Response

from service.config import Settings
from tests.conftest import bearer
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

    events = await history(client, headers, memory["id"])
    assert [action for action, _ in events].count("supersede") == 1
    action, changes = events[-1]
    assert action == "update"
    assert changes["lifecycle"] == "confirmed" and changes["invalid_at"] is None
