"""A thread's messages and changes are timed when they are made, after the thread's lock, not
when their transaction began: an append (or a change of the thread) whose transaction began
first but waited for the thread while another append held it comes after that append. A
thread's messages are timed in the order of their positions, each a time of its own, and its
`updated_at` never goes back."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.principal import Principal
from service.config import Settings
from service.services import unit_of_work
from service.threads.dependencies import thread_service
from service.threads.schemas import MessageIn, ThreadUpdate
from tests.conftest import bearer
from tests.fixtures.factories import start_thread
from tests.fixtures.locks import transaction_start, waiting_locks


def said(*contents: str) -> list[MessageIn]:
    return [MessageIn(role="user", content=content) for content in contents]


def time(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def thread_as_read(
    client: AsyncClient, headers: dict[str, str], thread_id: str
) -> dict[str, Any]:
    response = await client.get(f"/v1/users/me/threads/{thread_id}", headers=headers)
    assert response.status_code == 200, response.text
    thread: dict[str, Any] = response.json()
    return thread


async def messages(
    client: AsyncClient, headers: dict[str, str], thread_id: str
) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_an_append_that_began_first_but_waited_for_the_thread_comes_after_the_one_holding_it(
    app: FastAPI, client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, ada)
    thread = uuid.UUID(thread_id)
    principal = Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")
    state = app.state.mneme

    async with unit_of_work(state, principal) as first:
        first_began = await transaction_start(first.session)
        async with unit_of_work(state, principal) as second:
            assert await transaction_start(second.session) > first_began
            # The second append holds the thread until it commits; the first waits for it.
            await second.get(thread_service).append("ada", thread, said("Second 1.", "Second 2."))
            appending = asyncio.create_task(
                first.get(thread_service).append("ada", thread, said("First 1.", "First 2."))
            )
            assert await waiting_locks(owner_engine, 1) == 1
            assert not appending.done()
        held = await thread_as_read(client, ada, thread_id)
        await appending
    appended = await thread_as_read(client, ada, thread_id)

    stored = await messages(client, ada, thread_id)
    assert [(m["seq"], m["content"]) for m in stored] == [
        (0, "Second 1."),
        (1, "Second 2."),
        (2, "First 1."),
        (3, "First 2."),
    ]
    times = [time(m["created_at"]) for m in stored]
    # In position order, each its own: messages of one append too.
    assert times == sorted(times) and len(set(times)) == len(times)
    assert time(held["updated_at"]) == time(held["last_message_at"]) == times[1]
    assert time(appended["updated_at"]) == time(appended["last_message_at"]) == times[-1]
    assert time(appended["updated_at"]) > time(held["updated_at"])


async def test_a_change_of_a_thread_that_began_first_but_waited_for_an_append_comes_after_it(
    app: FastAPI, client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, ada)
    thread = uuid.UUID(thread_id)
    principal = Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")
    state = app.state.mneme

    async with unit_of_work(state, principal) as first:
        first_began = await transaction_start(first.session)
        async with unit_of_work(state, principal) as second:
            assert await transaction_start(second.session) > first_began
            await second.get(thread_service).append("ada", thread, said("Hello."))
            renaming = asyncio.create_task(
                first.get(thread_service).update("ada", thread, ThreadUpdate(title="Greetings"))
            )
            assert await waiting_locks(owner_engine, 1) == 1
            assert not renaming.done()
        held = await thread_as_read(client, ada, thread_id)
        await renaming
    renamed = await thread_as_read(client, ada, thread_id)

    assert renamed["title"] == "Greetings"
    assert renamed["last_message_at"] == held["last_message_at"]
    assert time(renamed["updated_at"]) > time(held["updated_at"])
    [message] = await messages(client, ada, thread_id)
    assert time(renamed["updated_at"]) > time(message["created_at"])
