"""Changes of one memory made at once are serialised by its row lock, and its history and
`updated_at` follow the order they were made in: the newest history entry leads to the current
text, and each change is later than the one before it (a change is timed when it is made, not
when its transaction began)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from itertools import pairwise

from httpx import AsyncClient

from service.config import Settings
from tests.conftest import bearer

CHANGES = 16


async def test_concurrent_changes_are_listed_and_timed_in_the_order_they_were_made(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    created = await client.post("/v1/users/me/memories", headers=ada, json={"text": "Version 0."})
    memory_id = created.json()["id"]
    path = f"/v1/users/me/memories/{memory_id}"

    answers = await asyncio.gather(
        *(
            client.patch(path, headers=ada, json={"text": f"Version {n}."})
            for n in range(1, CHANGES + 1)
        )
    )
    assert [answer.status_code for answer in answers] == [200] * CHANGES

    current = (await client.get(path, headers=ada)).json()
    history = (await client.get(f"{path}/history", headers=ada)).json()["items"]
    updates = [event for event in history if event["action"] == "update"]
    assert len(updates) == CHANGES
    # The history as listed is one chain from the first text to the current one.
    texts = [updates[0]["old_text"]] + [event["new_text"] for event in updates]
    assert texts[0] == "Version 0." and texts[-1] == current["text"]
    assert all(earlier["new_text"] == later["old_text"] for earlier, later in pairwise(updates))
    times = [datetime.fromisoformat(event["created_at"]) for event in updates]
    assert times == sorted(times)
    # Each answer's `updated_at` is later than the one of the change made before it.
    made_at = {
        answer.json()["text"]: datetime.fromisoformat(answer.json()["updated_at"])
        for answer in answers
    }
    in_order = [made_at[text] for text in texts[1:]]
    assert in_order == sorted(in_order)
    assert datetime.fromisoformat(current["updated_at"]) == max(in_order)
