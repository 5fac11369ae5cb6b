"""A memory citing a thread, written while that thread is deleted (`?cascade=memories`) or its
user purged: the outcome is one of the two serial orders. The check that the thread is citable
holds the thread's row (key share) until the memory commits, and the delete holds it for the
deletion before it reads what to forget: a memory written first is forgotten (or, for the
organization's, redacted) with the thread, and one written after is a 422, as for a thread
that never was. It was a memory acknowledged with a `source_thread_id` that names no thread.

Each interleaving is made with a transaction of the test's own: one that deletes the thread
and has not committed yet, or one that holds the place of the memory's text among the owner's
live memories (so the write waits, after its check, until the test lets it go on)."""

from __future__ import annotations

import asyncio
from typing import Any

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from tests.conftest import assert_problem, bearer
from tests.fixtures.factories import start_thread
from tests.fixtures.locks import waiting_locks


async def hold_the_place_of(
    session: AsyncSession, tenant: str, user_id: str | None, words: str
) -> None:
    """Insert, uncommitted, a live memory saying `words` for the owner: a write of the same
    words waits at its insert until this transaction ends (and stores its own once it rolls
    back)."""
    await session.execute(
        text(
            "INSERT INTO memory (tenant_id, scope, user_id, kind, text) "
            "VALUES (:t, :scope, :u, 'semantic', :words)"
        ),
        {"t": tenant, "scope": "user" if user_id else "org", "u": user_id, "words": words},
    )


async def test_a_memory_citing_a_thread_being_deleted_waits_and_is_refused(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, ada)
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        params = {"t": tenant, "id": thread_id}
        # What the thread's deletion does, not committed yet.
        await session.execute(
            text("SELECT 1 FROM thread WHERE tenant_id = :t AND id = :id FOR UPDATE"), params
        )
        await session.execute(text("DELETE FROM thread WHERE tenant_id = :t AND id = :id"), params)
        writing = asyncio.create_task(
            client.post(
                "/v1/users/me/memories",
                headers=ada,
                json={"text": "Ada's cat is called Pixel.", "source_thread_id": thread_id},
            )
        )
        waiting = await waiting_locks(owner_engine, 1)
        assert not writing.done(), (await writing).text
        assert waiting == 1
    body = assert_problem(await writing, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in body["errors"]] == [["body", "source_thread_id"]]
    listing = await client.get("/v1/users/me/memories", headers=ada)
    assert listing.json()["items"] == []


async def test_a_cascade_delete_forgets_a_memory_citing_the_thread_written_just_before(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, ada)
    words = "Ada's cat is called Pixel."
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await hold_the_place_of(session, tenant, "ada", words)
        writing = asyncio.create_task(
            client.post(
                "/v1/users/me/memories",
                headers=ada,
                json={"text": words, "source_thread_id": thread_id},
            )
        )
        assert await waiting_locks(owner_engine, 1) == 1
        deleting = asyncio.create_task(
            client.delete(
                f"/v1/users/me/threads/{thread_id}",
                headers=ada,
                params={"cascade": "memories"},
            )
        )
        waiting = await waiting_locks(owner_engine, 2)
        assert not deleting.done(), (await deleting).text
        assert waiting == 2
        await session.rollback()
    written = await writing
    assert written.status_code == 201, written.text
    deleted = await deleting
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["memory"] == 1
    memory = await client.get(f"/v1/users/me/memories/{written.json()['id']}", headers=ada)
    assert memory.status_code == 404


async def org_memories(client: AsyncClient, admin: dict[str, str]) -> list[dict[str, Any]]:
    listing = await client.get("/v1/org/memories", headers=admin, params={"limit": 100})
    assert listing.status_code == 200, listing.text
    items: list[dict[str, Any]] = listing.json()["items"]
    return items


async def test_an_org_memory_citing_a_users_thread_written_just_before_a_purge_is_redacted(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    thread_id = await start_thread(client, ada)
    words = "The team meets on Mondays."
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        await hold_the_place_of(session, tenant, None, words)
        writing = asyncio.create_task(
            client.post(
                "/v1/org/memories",
                headers=admin,
                json={"text": words, "source_thread_id": thread_id},
            )
        )
        assert await waiting_locks(owner_engine, 1) == 1
        purging = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        waiting = await waiting_locks(owner_engine, 2)
        assert not purging.done(), (await purging).text
        assert waiting == 2
        await session.rollback()
    written = await writing
    assert written.status_code == 201, written.text
    purged = await purging
    assert purged.status_code == 200, purged.text
    assert purged.json()["redacted"] == {"memory (org provenance)": 1}
    [memory] = await org_memories(client, admin)
    assert memory["text"] == words and memory["source_thread_id"] is None
