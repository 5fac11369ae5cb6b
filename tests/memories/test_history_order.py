"""A change of a memory is timed when it is made, after it holds the memory's lock, not when its
transaction began: a change whose transaction began first but waited (for a key's lock, for a
thread's) while another changed the memory comes after that change, in the memory's history
and in its `updated_at`, which never goes back."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.memories.repository import MemoryRepository
from tests.conftest import bearer
from tests.fixtures.factories import remember, start_thread
from tests.fixtures.locks import waiting_locks

MEMORIES = "/v1/users/me/memories"
KEYED = "/v1/users/me/keyed-memories"


async def history(client: AsyncClient, headers: dict[str, str], memory_id: str) -> list[Any]:
    response = await client.get(f"{MEMORIES}/{memory_id}/history", headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def times(events: list[dict[str, Any]]) -> list[datetime]:
    return [datetime.fromisoformat(event["created_at"]) for event in events]


def updated_at(memory: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(memory["updated_at"])


async def test_a_put_that_waited_while_a_patch_changed_the_memory_comes_after_it(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    key = {"kind": "semantic", "key": "home"}
    created = await client.put(KEYED, headers=ada, params=key, json={"text": "Ada lives in Porto."})
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]

    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        # The key's lock, as another put of the key holds it: the put below begins its
        # transaction, then waits for it.
        await MemoryRepository(session, tenant).lock_store_key(
            Owner.user("ada"), "semantic", None, "home"
        )
        putting = asyncio.create_task(
            client.put(KEYED, headers=ada, params=key, json={"text": "Ada lives in Lisbon."})
        )
        assert await waiting_locks(owner_engine, 1) == 1
        # Meanwhile a PATCH, which takes no key's lock, changes the memory.
        patched = await client.patch(
            f"{MEMORIES}/{memory_id}", headers=ada, json={"text": "Ada lives in Braga."}
        )
        assert patched.status_code == 200, patched.text
        assert not putting.done()
    put = await putting
    assert put.status_code == 200, put.text

    assert put.json()["text"] == "Ada lives in Lisbon."
    assert updated_at(put.json()) > updated_at(patched.json())
    current = (await client.get(f"{MEMORIES}/{memory_id}", headers=ada)).json()
    assert updated_at(current) == updated_at(put.json())
    events = await history(client, ada, memory_id)
    assert [(e["action"], e["old_text"], e["new_text"]) for e in events] == [
        ("add", None, "Ada lives in Porto."),
        ("update", "Ada lives in Porto.", "Ada lives in Braga."),
        ("update", "Ada lives in Braga.", "Ada lives in Lisbon."),
    ]
    assert times(events) == sorted(times(events))
    assert times(events)[1:] == [updated_at(answer.json()) for answer in (patched, put)]


async def test_a_thread_deletion_that_waited_while_a_patch_changed_its_memory_comes_after_it(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, ada)
    memory = await remember(client, ada, text="Ada lives in Porto.", source_thread_id=thread_id)

    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        # The thread held as a memory written from it holds it: its deletion begins its
        # transaction, then waits.
        await MemoryRepository(session, tenant).citable_threads(
            Owner.user("ada"), [uuid.UUID(thread_id)]
        )
        deleting = asyncio.create_task(
            client.delete(
                f"/v1/users/me/threads/{thread_id}", headers=ada, params={"cascade": "memories"}
            )
        )
        assert await waiting_locks(owner_engine, 1) == 1
        patched = await client.patch(
            f"{MEMORIES}/{memory['id']}", headers=ada, json={"text": "Ada lives in Braga."}
        )
        assert patched.status_code == 200, patched.text
        assert not deleting.done()
    deleted = await deleting
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["memory"] == 1

    events = await history(client, ada, memory["id"])
    assert [(e["action"], e["old_text"], e["new_text"]) for e in events] == [
        ("add", None, "Ada lives in Porto."),
        ("update", "Ada lives in Porto.", "Ada lives in Braga."),
        ("delete", "Ada lives in Braga.", None),
    ]
    assert times(events) == sorted(times(events))
    assert times(events)[1] == updated_at(patched.json())


async def test_a_procedure_write_that_waited_while_a_patch_changed_its_slot_comes_after_it(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    procedures = "/v1/users/me/procedures"
    written = await client.put(procedures, headers=ada, json={"style": "Answer briefly."})
    assert written.status_code == 200, written.text
    [style] = [
        m
        for m in (await client.get(MEMORIES, headers=ada)).json()["items"]
        if m["kind"] == "procedural"
    ]

    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        # The slots' lock, as another write of them holds it.
        await MemoryRepository(session, tenant).lock_procedures(Owner.user("ada"))
        replacing = asyncio.create_task(
            client.put(procedures, headers=ada, json={"style": "Answer in full."})
        )
        assert await waiting_locks(owner_engine, 1) == 1
        patched = await client.patch(
            f"{MEMORIES}/{style['id']}", headers=ada, json={"text": "Answer in one line."}
        )
        assert patched.status_code == 200, patched.text
        assert not replacing.done()
    replaced = await replacing
    assert replaced.status_code == 200, replaced.text

    events = await history(client, ada, style["id"])
    assert [(e["action"], e["old_text"], e["new_text"]) for e in events] == [
        ("add", None, "Answer briefly."),
        ("update", "Answer briefly.", "Answer in one line."),
        ("supersede", "Answer in one line.", "Answer in full."),
    ]
    assert times(events) == sorted(times(events))
    superseded = (await client.get(f"{MEMORIES}/{style['id']}", headers=ada)).json()
    assert updated_at(superseded) > updated_at(patched.json())
