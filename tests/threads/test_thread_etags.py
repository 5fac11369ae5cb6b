"""Threads carry ETags: `If-Match` guards renames and deletes (412, nothing changed), reads
answer 304 to a current `If-None-Match`, and creates and appends name what they made."""

from __future__ import annotations

import asyncio
import uuid

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import as_tenant, assert_precondition_failed, bearer
from tests.fixtures.factories import post_created

THREADS = "/v1/users/me/threads"


async def stored_title(engine: AsyncEngine, tenant: str, thread_id: str) -> str | None:
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        title: str | None = (
            await connection.execute(
                text("SELECT title FROM thread WHERE id = :id"), {"id": uuid.UUID(thread_id)}
            )
        ).scalar_one_or_none()
        return title


async def test_a_new_thread_is_named_and_tagged_and_reads_304_while_unchanged(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    created = await post_created(client, THREADS, headers, {"title": "Trip"})
    thread_id = created.json()["id"]
    assert created.headers["location"] == f"/v1/users/alice/threads/{thread_id}"
    read = await client.get(created.headers["location"], headers=headers)
    assert read.status_code == 200 and read.headers["etag"] == created.headers["etag"]
    cached = await client.get(
        created.headers["location"], headers={**headers, "If-None-Match": read.headers["etag"]}
    )
    assert cached.status_code == 304 and cached.content == b""
    assert cached.headers["etag"] == read.headers["etag"]


async def test_if_match_guards_renames_and_deletes(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "alice")
    created = await post_created(client, THREADS, headers, {"title": "Trip"})
    thread_id, seen = created.json()["id"], created.headers["etag"]
    path = f"{THREADS}/{thread_id}"
    renamed = await client.patch(
        path, json={"title": "Lisbon trip"}, headers={**headers, "If-Match": seen}
    )
    assert renamed.status_code == 200, renamed.text
    assert renamed.headers["etag"] == (await client.get(path, headers=headers)).headers["etag"]
    for tag in (seen, '"bogus"', "bogus"):
        stale = await client.patch(
            path, json={"title": "Porto trip"}, headers={**headers, "If-Match": tag}
        )
        assert_precondition_failed(stale, renamed.headers["etag"])
        refused = await client.delete(path, headers={**headers, "If-Match": tag})
        assert_precondition_failed(refused, renamed.headers["etag"])
    assert await stored_title(runtime_engine, tenant, thread_id) == "Lisbon trip"
    deleted = await client.delete(path, headers={**headers, "If-Match": renamed.headers["etag"]})
    assert deleted.status_code == 200, deleted.text
    assert await stored_title(runtime_engine, tenant, thread_id) is None


async def test_appending_names_the_messages_and_changes_the_threads_tag(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "alice")
    created = await post_created(client, THREADS, headers, {"title": "Trip"})
    thread_id, seen = created.json()["id"], created.headers["etag"]
    messages = f"/v1/users/alice/threads/{thread_id}/messages"
    appended = await client.post(
        f"{THREADS}/{thread_id}/messages",
        json={"messages": [{"role": "user", "content": "Hello"}]},
        headers=headers,
    )
    assert appended.status_code == 201 and appended.headers["location"] == messages
    listed = await client.get(appended.headers["location"], headers=headers)
    assert [m["content"] for m in listed.json()["items"]] == ["Hello"]
    turned = await client.post(
        f"{THREADS}/{thread_id}/turns",
        json={"messages": [{"role": "user", "content": "Where to eat?"}]},
        headers=headers,
    )
    assert turned.status_code == 201 and turned.headers["location"] == messages

    stale = await client.patch(
        f"{THREADS}/{thread_id}", json={"title": "Renamed"}, headers={**headers, "If-Match": seen}
    )
    current = (await client.get(f"{THREADS}/{thread_id}", headers=headers)).headers["etag"]
    assert current != seen
    assert_precondition_failed(stale, current)
    assert await stored_title(runtime_engine, tenant, thread_id) == "Trip"


async def test_a_retried_create_replays_location_and_tag(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = {**bearer(settings, tenant, "alice"), "Idempotency-Key": "thread-1"}
    first = await post_created(client, THREADS, headers, {"title": "Trip"})
    again = await post_created(client, THREADS, headers, {"title": "Trip"})
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["etag"] == first.headers["etag"]


async def test_concurrent_guarded_renames_let_exactly_one_win(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    """Every writer sends the tag of the same state while the row is held: once released, one
    rename applies and every other gets 412 with the winner's tag."""
    writers = 5
    agents = [bearer(settings, tenant, f"agent-{index}", service=True) for index in range(writers)]
    created = await client.post("/v1/users/zoe/threads", json={"title": "Start"}, headers=agents[0])
    assert created.status_code == 201, created.text
    thread_id, seen = created.json()["id"], created.headers["etag"]

    async with runtime_engine.connect() as holder:
        transaction = await holder.begin()
        await as_tenant(holder, tenant)
        await holder.execute(
            text("SELECT 1 FROM thread WHERE id = :id FOR UPDATE"), {"id": uuid.UUID(thread_id)}
        )
        renames = [
            asyncio.create_task(
                client.patch(
                    created.headers["location"],
                    json={"title": f"Title {index}"},
                    headers={**agents[index], "If-Match": seen},
                )
            )
            for index in range(writers)
        ]
        await wait_for_lock_waiters(runtime_engine, writers)
        await transaction.rollback()
        responses = await asyncio.gather(*renames)

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (writers - 1)
    [winner] = [response for response in responses if response.status_code == 200]
    for loser in responses:
        if loser is not winner:
            assert_precondition_failed(loser, winner.headers["etag"])
    assert await stored_title(runtime_engine, tenant, thread_id) == winner.json()["title"]


async def wait_for_lock_waiters(engine: AsyncEngine, count: int) -> None:
    """Until `count` sessions wait on a row lock (each request is then inside its write)."""
    async with engine.connect() as connection:
        for _ in range(500):
            waiting = (
                await connection.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    )
                )
            ).scalar_one()
            await connection.rollback()
            if waiting >= count:
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} requests reached the locked row")
