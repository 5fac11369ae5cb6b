"""A thread deleted while a write-path pass on it writes: the pass re-checks, holding the thread
(KEY SHARE, which the deletion's lock waits for and waits on), that the thread is still there.
A deletion that came first is waited for, and the pass then finds no thread and writes nothing:
no failed attempt, no traceback. It used to insert the thread's extraction cursor after the
thread was gone (a foreign-key violation, the job retried). A deletion that comes after waits
for the pass, and forgets what it wrote with the thread (`?cascade=memories`)."""

from __future__ import annotations

import asyncio
import uuid

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.extraction.pipeline import WritePath
from tests.conftest import bearer
from tests.extraction.conftest import say
from tests.fixtures.factories import start_thread
from tests.fixtures.locks import waiting_locks


async def rows_of_thread(owner_engine: AsyncEngine, tenant: str, thread_id: str) -> dict[str, int]:
    queries = {
        "memory": "SELECT count(*) FROM memory WHERE tenant_id = :t "
        "AND source_thread_id = CAST(:th AS uuid)",
        "extraction_cursor": "SELECT count(*) FROM extraction_cursor WHERE tenant_id = :t "
        "AND thread_id = CAST(:th AS uuid)",
        "thread": "SELECT count(*) FROM thread WHERE tenant_id = :t AND id = CAST(:th AS uuid)",
    }
    async with owner_engine.connect() as connection:
        return {
            table: int(
                (await connection.execute(text(sql), {"t": tenant, "th": thread_id})).scalar_one()
            )
            for table, sql in queries.items()
        }


async def test_a_turn_pass_whose_thread_is_being_deleted_waits_and_writes_nothing(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I ride my bike to work every day.")
    # The app runs no model: its write path stores the turns.
    write_path = WritePath(app.state.mneme)
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        params = {"t": tenant, "id": thread_id}
        # What the thread's deletion does, not committed yet.
        await session.execute(
            text("SELECT 1 FROM thread WHERE tenant_id = :t AND id = :id FOR UPDATE"), params
        )
        await session.execute(
            text("DELETE FROM message WHERE tenant_id = :t AND thread_id = :id"), params
        )
        await session.execute(text("DELETE FROM thread WHERE tenant_id = :t AND id = :id"), params)
        passing = asyncio.create_task(write_path.store_turns(tenant, uuid.UUID(thread_id)))
        waiting = await waiting_locks(owner_engine, 1)
        assert not passing.done(), await passing
        assert waiting == 1
    outcomes = await passing
    assert [outcome.status for outcome in outcomes] == ["superseded"]
    assert await rows_of_thread(owner_engine, tenant, thread_id) == {
        "memory": 0,
        "extraction_cursor": 0,
        "thread": 0,
    }


async def test_a_cascade_delete_after_a_turn_pass_waits_for_it_and_forgets_its_memories(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, headers)
    words = "I ride my bike to work every day."
    await say(client, headers, thread_id, words)
    write_path = WritePath(app.state.mneme)
    async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
        # Holds the turn's place among Ada's live memories: the pass, past its check of the
        # thread, waits at its insert until this transaction ends.
        await session.execute(
            text(
                "INSERT INTO memory (tenant_id, scope, user_id, kind, category, text) "
                "VALUES (:t, 'user', 'ada', 'episodic', 'turn', :words)"
            ),
            {"t": tenant, "words": words},
        )
        passing = asyncio.create_task(write_path.store_turns(tenant, uuid.UUID(thread_id)))
        assert await waiting_locks(owner_engine, 1) == 1
        deleting = asyncio.create_task(
            client.delete(
                f"/v1/users/me/threads/{thread_id}", headers=headers, params={"cascade": "memories"}
            )
        )
        waiting = await waiting_locks(owner_engine, 2)
        assert not deleting.done(), (await deleting).text
        assert waiting == 2
        await session.rollback()
    [outcome] = await passing
    assert outcome.status == "written"
    deleted = await deleting
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["memory"] == 1
    assert deleted.json()["deleted"]["extraction_cursor"] == 1
    assert await rows_of_thread(owner_engine, tenant, thread_id) == {
        "memory": 0,
        "extraction_cursor": 0,
        "thread": 0,
    }
