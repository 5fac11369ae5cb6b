"""Conversation sessions as memories, for the search tests: each session its own source thread."""

from __future__ import annotations

from typing import Any

from httpx import AsyncClient


async def new_source_thread(client: AsyncClient, headers: dict[str, str]) -> str:
    """A thread of the caller, for memories to name as their source."""
    response = await client.post("/v1/users/me/threads", headers=headers, json={})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def session_items(
    client: AsyncClient, headers: dict[str, str], turns: list[str], *, day: int
) -> list[dict[str, Any]]:
    """A batch's items for one session: episodic turns of a new source thread, one second apart
    on 2023-05-0`day`, in order."""
    thread = await new_source_thread(client, headers)
    return [
        {
            "text": turn,
            "kind": "episodic",
            "source_thread_id": thread,
            "event_at": f"2023-05-0{day}T10:00:{position:02d}Z",
        }
        for position, turn in enumerate(turns)
    ]
