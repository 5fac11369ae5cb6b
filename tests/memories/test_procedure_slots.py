"""A procedural slot holds one live memory of its owner: whichever route makes a procedural
memory live in a slot (the procedures PUT, a keyed put, a POST, a batch, a PATCH), the slot's
previous memory is superseded by it, with history, as the procedures PUT supersedes it."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.memories.repository import MemoryRepository
from tests.conftest import as_tenant, assert_precondition_failed, bearer
from tests.fixtures.factories import Headers, memories, remember
from tests.fixtures.locks import waiting_locks

PROCEDURES = "/v1/users/me/procedures"
KEYED = "/v1/users/me/keyed-memories"
STYLE_KEY = {"kind": "procedural", "category": "style", "key": "tone"}


async def slot_holders(client: AsyncClient, headers: Headers, slot: str) -> list[str]:
    """The texts of the live procedural memories of the caller's `slot`."""
    live = await memories(client, headers, kind="procedural", category=slot)
    return sorted(memory["text"] for memory in live)


async def shown(client: AsyncClient, headers: Headers, slot: str) -> dict[str, Any] | None:
    """The slot as `GET …/procedures` shows it."""
    response = await client.get(PROCEDURES, headers=headers)
    assert response.status_code == 200, response.text
    slots: dict[str, dict[str, Any] | None] = response.json()
    return slots[slot]


async def superseded_by(
    client: AsyncClient, headers: Headers, memory_id: str, holder_id: str, slot: str
) -> None:
    """The memory was superseded by `holder_id` as a procedures PUT supersedes a slot's
    memory: lifecycle, `superseded_by`, `invalid_at` and a `supersede` event naming the
    slot."""
    memory = (await client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)).json()
    assert (memory["lifecycle"], memory["superseded_by"]) == ("superseded", holder_id)
    assert memory["invalid_at"] is not None
    history = await client.get(f"/v1/users/me/memories/{memory_id}/history", headers=headers)
    # The last supersede event: one made in the transaction that added the memory (a batch)
    # has the add event's time, and may be listed before it.
    event = [e for e in history.json()["items"] if e["action"] == "supersede"][-1]
    assert event["changes"] == {"slot": slot, "superseded_by": holder_id}


async def set_slot(client: AsyncClient, headers: Headers, **slots: str) -> dict[str, Any]:
    response = await client.put(PROCEDURES, headers=headers, json=slots)
    assert response.status_code == 200, response.text
    procedures: dict[str, Any] = response.json()
    return procedures


async def test_a_keyed_put_into_a_held_slot_supersedes_its_holder(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    before = (await set_slot(client, headers, style="Answer in detail."))["style"]

    added = await client.put(
        KEYED, params=STYLE_KEY, json={"text": "Answer briefly."}, headers=headers
    )

    assert added.status_code == 201, added.text
    assert await slot_holders(client, headers, "style") == ["Answer briefly."]
    assert (await shown(client, headers, "style") or {})["memory_id"] == added.json()["id"]
    await superseded_by(client, headers, before["memory_id"], added.json()["id"], "style")


async def test_a_keyed_put_that_revives_its_memory_supersedes_the_slots_holder(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The key's memory, superseded by a procedures PUT, is live again after the next put of
    the key: the memory that superseded it is superseded in turn."""
    headers = bearer(settings, tenant, "kim")
    keyed = await client.put(
        KEYED, params=STYLE_KEY, json={"text": "Answer briefly."}, headers=headers
    )
    assert keyed.status_code == 201, keyed.text
    holder = (await set_slot(client, headers, style="Answer in detail."))["style"]

    revived = await client.put(
        KEYED, params=STYLE_KEY, json={"text": "Answer in one line."}, headers=headers
    )

    assert revived.status_code == 200, revived.text
    assert revived.json()["lifecycle"] == "confirmed"
    assert await slot_holders(client, headers, "style") == ["Answer in one line."]
    assert (await shown(client, headers, "style") or {})["memory_id"] == keyed.json()["id"]
    await superseded_by(client, headers, holder["memory_id"], keyed.json()["id"], "style")


async def test_a_posted_procedural_memory_takes_its_slot(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    before = (await set_slot(client, headers, style="Answer in detail."))["style"]

    posted = await remember(client, headers, kind="procedural", category="style", text="Be brief.")

    assert await slot_holders(client, headers, "style") == ["Be brief."]
    assert (await shown(client, headers, "style") or {})["memory_id"] == posted["id"]
    await superseded_by(client, headers, before["memory_id"], posted["id"], "style")
    # A procedural memory of no slot, and a memory of another kind, leave the slot alone.
    await remember(client, headers, kind="procedural", category="notes", text="Not a slot.")
    await remember(client, headers, kind="semantic", category="style", text="Likes serif fonts.")
    assert (await shown(client, headers, "style") or {})["memory_id"] == posted["id"]


async def test_a_slots_memory_superseded_before_it_began_ends_where_it_begins(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    starts = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    planned = await remember(
        client,
        headers,
        kind="procedural",
        category="style",
        text="Be brief from tomorrow.",
        event_at=starts.isoformat(),
    )
    holder = (await set_slot(client, headers, style="Answer in detail."))["style"]

    await superseded_by(client, headers, planned["id"], holder["memory_id"], "style")
    memory = (await client.get(f"/v1/users/me/memories/{planned['id']}", headers=headers)).json()
    assert datetime.fromisoformat(memory["invalid_at"]) == starts


async def test_batch_items_take_their_slots_in_order(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Each item of a slot takes it as a POST of its own would: of two, the later holds it,
    and the answer shows the earlier superseded."""
    headers = bearer(settings, tenant, "kim")
    before = await set_slot(client, headers, style="Answer in detail.", safety="Be careful.")

    written = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"kind": "procedural", "category": "style", "text": "Be brief."},
                {"kind": "procedural", "category": "workflow", "text": "Plan first."},
                {"kind": "semantic", "category": "style", "text": "Likes serif fonts."},
                {"kind": "procedural", "category": "style", "text": "Use lists."},
            ]
        },
    )

    assert written.status_code == 201, written.text
    brief, plan, _, lists = written.json()["items"]
    assert (brief["lifecycle"], brief["superseded_by"]) == ("superseded", lists["id"])
    assert (lists["lifecycle"], plan["lifecycle"]) == ("confirmed", "confirmed")
    assert await slot_holders(client, headers, "style") == ["Use lists."]
    assert await slot_holders(client, headers, "workflow") == ["Plan first."]
    assert await slot_holders(client, headers, "safety") == ["Be careful."]
    await superseded_by(client, headers, before["style"]["memory_id"], lists["id"], "style")
    await superseded_by(client, headers, brief["id"], lists["id"], "style")


async def test_a_patch_that_makes_a_memory_live_in_a_slot_supersedes_its_holder(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    first = (await set_slot(client, headers, style="Answer in detail."))["style"]
    second = (await set_slot(client, headers, style="Answer briefly."))["style"]

    # Restored: the old instruction holds the slot again.
    restored = await client.patch(
        f"/v1/users/me/memories/{first['memory_id']}",
        headers=headers,
        json={"lifecycle": "confirmed"},
    )
    assert restored.status_code == 200, restored.text
    assert await slot_holders(client, headers, "style") == ["Answer in detail."]
    await superseded_by(client, headers, second["memory_id"], first["memory_id"], "style")

    # Moved into the slot from a category that is no slot.
    note = await remember(client, headers, kind="procedural", category="notes", text="Be terse.")
    moved = await client.patch(
        f"/v1/users/me/memories/{note['id']}", headers=headers, json={"category": "style"}
    )
    assert moved.status_code == 200, moved.text
    assert await slot_holders(client, headers, "style") == ["Be terse."]
    await superseded_by(client, headers, first["memory_id"], note["id"], "style")

    # Moved from one slot to another: the slot it leaves is empty, the one it enters its own.
    plan = (await set_slot(client, headers, workflow="Plan first."))["workflow"]
    moved = await client.patch(
        f"/v1/users/me/memories/{note['id']}", headers=headers, json={"category": "workflow"}
    )
    assert moved.status_code == 200, moved.text
    assert await slot_holders(client, headers, "style") == []
    assert await slot_holders(client, headers, "workflow") == ["Be terse."]
    await superseded_by(client, headers, plan["memory_id"], note["id"], "workflow")

    # A change that leaves the holder where it is supersedes nothing.
    reworded = await client.patch(
        f"/v1/users/me/memories/{note['id']}", headers=headers, json={"text": "Be very terse."}
    )
    assert reworded.status_code == 200, reworded.text
    assert await slot_holders(client, headers, "workflow") == ["Be very terse."]


async def test_the_organizations_slot_is_taken_by_its_own_writes_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    headers = bearer(settings, tenant, "kim")
    org = await client.put("/v1/org/procedures", headers=admin, json={"style": "Be formal."})
    assert org.status_code == 200, org.text
    own = (await set_slot(client, headers, style="Be casual."))["style"]

    posted = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"kind": "procedural", "category": "style", "text": "Be polite."},
    )

    assert posted.status_code == 201, posted.text
    slots = (await client.get("/v1/org/procedures", headers=admin)).json()
    assert slots["style"]["memory_id"] == posted.json()["id"]
    org_live = await client.get(
        "/v1/org/memories", headers=admin, params={"kind": "procedural", "category": "style"}
    )
    assert [m["text"] for m in org_live.json()["items"]] == ["Be polite."]
    assert (await shown(client, headers, "style") or {})["memory_id"] == own["memory_id"]


async def test_a_write_that_takes_a_slot_changes_the_slots_etag(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    await set_slot(client, headers, style="Answer in detail.")
    read = await client.get(PROCEDURES, headers=headers)
    tag = read.headers["etag"]

    await remember(client, headers, kind="procedural", category="style", text="Be brief.")

    now = await client.get(PROCEDURES, headers=headers)
    assert now.headers["etag"] != tag
    unchanged = await client.get(PROCEDURES, headers={**headers, "If-None-Match": tag})
    assert unchanged.status_code == 200
    stale = await client.put(
        PROCEDURES, headers={**headers, "If-Match": tag}, json={"style": "Use lists."}
    )
    assert_precondition_failed(stale, now.headers["etag"])
    assert await slot_holders(client, headers, "style") == ["Be brief."]


async def test_a_slot_with_two_live_memories_shows_the_newest_and_a_put_supersedes_both(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Two live memories in one slot, as older versions of the service let other routes
    write them: every reader shows the one written last, and the next procedures PUT of the
    slot supersedes both."""
    headers = bearer(settings, tenant, "kim")
    older = (await set_slot(client, headers, style="Answer in detail."))["style"]
    newer = await remember(client, headers, kind="procedural", category="notes", text="Be brief.")
    async with owner_engine.begin() as connection:
        await as_tenant(connection, tenant)
        for memory_id, hours in ((older["memory_id"], 1), (newer["id"], 2)):
            await connection.execute(
                text("UPDATE memory SET category = 'style', updated_at = :at WHERE id = :id"),
                {"id": uuid.UUID(memory_id), "at": datetime.now(UTC) - timedelta(hours=hours)},
            )
    assert await slot_holders(client, headers, "style") == ["Answer in detail.", "Be brief."]

    assert (await shown(client, headers, "style") or {})["memory_id"] == older["memory_id"]
    block = await client.post(
        "/v1/users/me/context", headers=headers, json={"query": "how to answer"}
    )
    assert "Style: Answer in detail." in block.json()["text"]
    assert "Be brief." not in block.json()["text"]

    holder = (await set_slot(client, headers, style="Use lists."))["style"]
    assert await slot_holders(client, headers, "style") == ["Use lists."]
    await superseded_by(client, headers, older["memory_id"], holder["memory_id"], "style")
    await superseded_by(client, headers, newer["id"], holder["memory_id"], "style")


@pytest.mark.parametrize("route", ["keyed put", "post", "patch"])
async def test_a_write_into_a_slot_waits_for_another_writer_of_the_slots(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
    route: str,
) -> None:
    """Another writer of the owner's slots (here the test's own transaction, which holds their
    lock and adds a memory to the slot) goes first: the write waits for it, then supersedes
    what it added, so the slot never holds two."""
    headers = bearer(settings, tenant, "kim")
    old = (await set_slot(client, headers, style="Answer in detail."))["style"]
    await set_slot(client, headers, style="")
    requests = {
        "keyed put": lambda: client.put(
            KEYED, params=STYLE_KEY, json={"text": "Be brief."}, headers=headers
        ),
        "post": lambda: client.post(
            "/v1/users/me/memories",
            headers=headers,
            json={"kind": "procedural", "category": "style", "text": "Be brief."},
        ),
        "patch": lambda: client.patch(
            f"/v1/users/me/memories/{old['memory_id']}",
            headers=headers,
            json={"lifecycle": "confirmed"},
        ),
    }
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await MemoryRepository(session, tenant).lock_procedures(Owner.user("kim"))
        await session.execute(
            text(
                "INSERT INTO memory (tenant_id, scope, user_id, kind, category, text)"
                " VALUES (:t, 'user', 'kim', 'procedural', 'style', 'Be formal.')"
            ),
            {"t": tenant},
        )
        writing = asyncio.create_task(requests[route]())
        waiting = await waiting_locks(owner_engine, 1)
        assert not writing.done(), (await writing).text
        assert waiting == 1
    written = await writing
    assert written.status_code in (200, 201), written.text
    holder = "Answer in detail." if route == "patch" else "Be brief."
    assert await slot_holders(client, headers, "style") == [holder]
