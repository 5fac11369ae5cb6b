"""A purge racing the writes of its user. Every write to a user's data holds the user's write lock
(shared) from before its first statement on the user's rows to its commit, and the purge holds
it alone: the two happen one after the other. A write lands before the purge (and is purged) or
after it, and then finds the user as the purge left it: a new memory, thread or profile key
re-creates the user, as a first write does; a thread that is gone is a 404. Neither side ever
answers a 5xx (a deadlock, a row deleted under the write, a user row gone after it was
ensured)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.admin.repository import AdminRepository
from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.kit.post_commit import PostCommitTasks
from service.memories.postings import StatisticsRequests
from tests.admin.conftest import JSON_PATCH, rows_of
from tests.conftest import bearer
from tests.fixtures.factories import remember, start_thread
from tests.fixtures.locks import waiting_locks

Write = Callable[[AsyncClient, dict[str, str], str, str, int], Coroutine[Any, Any, Response]]


def _messages(
    client: AsyncClient, h: dict[str, str], user: str, thread: str, i: int
) -> Coroutine[Any, Any, Response]:
    return client.post(
        f"/v1/users/{user}/threads/{thread}/messages",
        headers=h,
        json={"messages": [{"role": "user", "content": f"message {i}"}]},
    )


# Each kind of write to a user's data, and the answers it may give when a purge of the user
# comes before it, after it or in its middle.
WRITES: dict[str, tuple[Write, set[int]]] = {
    "messages": (_messages, {201, 404}),
    "turns": (
        lambda c, h, user, thread, i: c.post(
            f"/v1/users/{user}/threads/{thread}/turns",
            headers=h,
            json={"messages": [{"role": "user", "content": f"turn {i}"}]},
        ),
        {201, 404},
    ),
    "memory": (
        lambda c, h, user, thread, i: c.post(
            f"/v1/users/{user}/memories", headers=h, json={"text": f"fact {i}."}
        ),
        {201},
    ),
    "batch": (
        lambda c, h, user, thread, i: c.post(
            f"/v1/users/{user}/memories/batch",
            headers=h,
            json={"items": [{"text": f"batch {i} item {j}."} for j in range(3)]},
        ),
        {201},
    ),
    "keyed": (
        lambda c, h, user, thread, i: c.put(
            f"/v1/users/{user}/keyed-memories",
            headers=h,
            params={"kind": "semantic", "key": f"k{i % 2}"},
            json={"text": f"keyed {i}."},
        ),
        {200, 201},
    ),
    "procedures": (
        lambda c, h, user, thread, i: c.put(
            f"/v1/users/{user}/procedures", headers=h, json={"style": f"Style {i}."}
        ),
        {200},
    ),
    "profile": (
        lambda c, h, user, thread, i: c.patch(
            f"/v1/users/{user}/profile",
            headers={**h, **JSON_PATCH},
            json=[{"op": "add", "path": f"/k{i}", "value": i}],
        ),
        {200},
    ),
    "account": (
        lambda c, h, user, thread, i: c.put(
            f"/v1/users/{user}/account", headers=h, json={"name": f"Name {i}"}
        ),
        {200},
    ),
    "threads": (
        lambda c, h, user, thread, i: c.post(
            f"/v1/users/{user}/threads", headers=h, json={"title": f"t{i}"}
        ),
        {201},
    ),
    "thread_change": (
        lambda c, h, user, thread, i: c.patch(
            f"/v1/users/{user}/threads/{thread}", headers=h, json={"title": f"t{i}"}
        ),
        {200, 404},
    ),
}


async def _seed(client: AsyncClient, service: dict[str, str], user: str) -> str:
    """A thread with a message and a memory for `user`; the thread's id."""
    thread_id = await start_thread(client, service, user=user)
    appended = await _messages(client, service, user, thread_id, -1)
    assert appended.status_code == 201, appended.text
    await remember(client, service, user=user, text="A seeded fact.")
    return thread_id


@pytest.mark.parametrize("kind", sorted(WRITES))
async def test_writes_racing_a_purge_of_their_user_never_answer_a_5xx(
    client: AsyncClient, settings: Settings, tenant: str, kind: str
) -> None:
    write, allowed = WRITES[kind]
    service = bearer(settings, tenant, "backend", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    answers: list[tuple[str, int]] = []
    for round_ in range(3):
        user = f"u{round_}"
        thread_id = await _seed(client, service, user)

        async def one(i: int, user: str = user, thread_id: str = thread_id) -> Response:
            await asyncio.sleep(0.003 * i)
            return await write(client, service, user, thread_id, i)

        async def purge(user: str = user) -> Response:
            await asyncio.sleep(0.012)
            return await client.delete(f"/v1/admin/users/{user}", headers=admin)

        purged, *written = await asyncio.gather(purge(), *(one(i) for i in range(8)))
        answers += [("purge", purged.status_code)] + [(kind, r.status_code) for r in written]
    unexpected = [
        (who, status)
        for who, status in answers
        if status not in (allowed if who == kind else {200})
    ]
    assert unexpected == []


# What each write finds once a purge of its user committed before it, and the user's rows it
# leaves: a write that adds re-creates the user, holding what it wrote; one about a thread finds
# none.
AFTER_A_PURGE: dict[str, tuple[int, dict[str, int]]] = {
    "messages": (404, {}),
    "turns": (404, {}),
    "thread_change": (404, {}),
    "memory": (201, {"user_account": 1, "memory": 1}),
    "batch": (201, {"user_account": 1, "memory": 3}),
    "keyed": (201, {"user_account": 1, "memory": 1}),
    "procedures": (200, {"user_account": 1, "memory": 1}),
    "profile": (200, {"user_account": 1, "profile": 1}),
    "account": (200, {"user_account": 1}),
    "threads": (201, {"user_account": 1, "thread": 1}),
}
COUNTED = ("user_account", "profile", "thread", "message", "memory")


@pytest.mark.parametrize("kind", sorted(AFTER_A_PURGE))
async def test_a_write_during_a_purge_waits_for_it_then_finds_the_user_purged(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
    kind: str,
) -> None:
    service = bearer(settings, tenant, "backend", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    thread_id = await _seed(client, service, "ada")
    write, _ = WRITES[kind]
    expected_status, expected_rows = AFTER_A_PURGE[kind]
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        # Held as a purge holds it: the purge below queues behind it, the write behind both.
        await AdminRepository(session, tenant).lock_user_writes("ada")
        purge = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        assert await waiting_locks(owner_engine, 1) == 1
        writing = asyncio.create_task(write(client, service, "ada", thread_id, 0))
        waiting = await waiting_locks(owner_engine, 2)
        assert not writing.done(), (await writing).text
        assert waiting == 2
    purged = await purge
    assert purged.status_code == 200, purged.text
    written = await writing
    assert written.status_code == expected_status, written.text
    left = await rows_of(owner_engine, tenant, "ada")
    assert {table: left[table] for table in COUNTED} == {
        table: expected_rows.get(table, 0) for table in COUNTED
    }


USER_JOBS_SQL = """
    SELECT count(*) FROM pgqueuer
     WHERE convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :t
       AND convert_from(payload, 'UTF8')::jsonb ->> 'user_id' = :u
"""


async def test_a_recount_asked_for_before_a_purge_is_not_queued_after_it(
    app: FastAPI,
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """A search (or a write) asks for the user's statistics to be recounted after its commit,
    in a transaction of its own that holds the user's write lock; a purge of the user that
    came first commits while it waits. The request then finds the user gone and queues no
    job: one queued after the purge would name the purged user (and fail its proof)."""
    service = bearer(settings, tenant, "backend", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    await _seed(client, service, "ada")
    post_commit = PostCommitTasks()
    StatisticsRequests(app.state.mneme.sessionmaker, post_commit, tenant).ask({Owner.user("ada")})
    [enqueue] = post_commit.take()
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        # Held as a purge holds it: the purge below queues behind it, the request behind both.
        await AdminRepository(session, tenant).lock_user_writes("ada")
        purge = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        assert await waiting_locks(owner_engine, 1) == 1
        asking = asyncio.ensure_future(enqueue())
        assert await waiting_locks(owner_engine, 2) == 2
        assert not asking.done()
    purged = await purge
    assert purged.status_code == 200, purged.text
    await asking
    async with owner_engine.connect() as connection:
        jobs = await connection.execute(text(USER_JOBS_SQL), {"t": tenant, "u": "ada"})
        assert jobs.scalar_one() == 0
    assert (await rows_of(owner_engine, tenant, "ada"))["user_account"] == 0


async def test_an_end_user_writing_new_account_details_during_a_purge_waits_for_it(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """An end user's request records its token's account details on the user's row before
    anything else it does: when they changed, that is a write to the user's data too, after
    the user's write lock (otherwise it holds the row the purge deletes while it waits for the
    purge: a deadlock)."""
    admin = bearer(settings, tenant, "root", admin=True)
    await remember(client, bearer(settings, tenant, "ada", name="Ada"), text="A seeded fact.")
    renamed = bearer(settings, tenant, "ada", name="Ada Lovelace")
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await AdminRepository(session, tenant).lock_user_writes("ada")
        purge = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        assert await waiting_locks(owner_engine, 1) == 1
        writing = asyncio.create_task(
            client.post("/v1/users/me/memories", headers=renamed, json={"text": "A new fact."})
        )
        assert await waiting_locks(owner_engine, 2) == 2
    purged = await purge
    assert purged.status_code == 200, purged.text
    written = await writing
    assert written.status_code == 201, written.text
    me = await client.get("/v1/users/me", headers=renamed)
    assert me.json()["name"] == "Ada Lovelace"
    left = await rows_of(owner_engine, tenant, "ada")
    assert {table: left[table] for table in COUNTED} == {
        "user_account": 1,
        "profile": 0,
        "thread": 0,
        "message": 0,
        "memory": 1,
    }


async def test_an_org_memory_changed_while_a_purge_waited_is_redacted_after_the_change(
    client: AsyncClient,
    settings: Settings,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """The purge redacts the provenance of the organization's memories written from the
    user's conversations once it holds their locks, and times the redaction then: a change an
    administrator made to one while the purge waited (the organization's memories take no
    user's write lock) comes before it, and the memory's `updated_at` does not go back."""
    service = bearer(settings, tenant, "backend", service=True)
    admin = bearer(settings, tenant, "root", admin=True)
    thread_id = await _seed(client, service, "ada")
    org = await client.post(
        "/v1/org/memories",
        headers=admin,
        json={"text": "The offsite is in Porto.", "source_thread_id": thread_id},
    )
    assert org.status_code == 201, org.text
    path = f"/v1/org/memories/{org.json()['id']}"
    sessionmaker = create_sessionmaker(runtime_engine)
    async with tenant_transaction(sessionmaker, tenant) as session:
        await AdminRepository(session, tenant).lock_user_writes("ada")
        purge = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        assert await waiting_locks(owner_engine, 1) == 1
        changed = await client.patch(path, headers=admin, json={"text": "The offsite is in Braga."})
        assert changed.status_code == 200, changed.text
        assert not purge.done()
    purged = await purge
    assert purged.status_code == 200, purged.text
    assert purged.json()["redacted"] == {"memory (org provenance)": 1}

    redacted = (await client.get(path, headers=admin)).json()
    assert (redacted["text"], redacted["source_thread_id"]) == ("The offsite is in Braga.", None)
    assert datetime.fromisoformat(redacted["updated_at"]) > datetime.fromisoformat(
        changed.json()["updated_at"]
    )
