"""Memories carry ETags: `If-Match` refuses a stale or bogus tag with 412 and changes nothing,
`If-None-Match` answers 304, concurrent guarded edits never lose an update, and a created
memory's `Location` reads it back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.providers.embedder import Embedder
from tests.conftest import as_tenant, assert_precondition_failed, bearer
from tests.fixtures.factories import post_created

MEMORIES = "/v1/users/me/memories"


async def stored(engine: AsyncEngine, tenant: str, memory_id: str) -> tuple[str, list[str]]:
    """The memory's text as stored, and the actions its history recorded."""
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        words = (
            await connection.execute(
                text("SELECT text FROM memory WHERE id = :id"), {"id": uuid.UUID(memory_id)}
            )
        ).scalar_one()
        actions = (
            await connection.execute(
                text("SELECT action FROM memory_event WHERE memory_id = :id ORDER BY created_at"),
                {"id": uuid.UUID(memory_id)},
            )
        ).scalars()
        return words, list(actions)


async def test_create_names_the_memory_and_its_tag_which_a_read_repeats(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The tag of what a write returned and of what a read finds are the same, however the
    values round-trip through JSON and the database (floats, offsets, nested metadata)."""
    headers = bearer(settings, tenant, "ada")
    created = await client.post(
        MEMORIES,
        json={
            "text": "Ada prefers tea.",
            "confidence": 0.7,
            "event_at": "2026-01-01T10:00:00.123456+02:00",
            "metadata": {"score": 1.5, "whole": 1.0, "tags": ["é", "x"], "z": {"b": 2, "a": 0.1}},
        },
        headers=headers,
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    assert created.headers["location"] == f"/v1/users/ada/memories/{memory_id}"
    read = await client.get(created.headers["location"], headers=headers)
    assert read.status_code == 200 and read.json()["text"] == "Ada prefers tea."
    assert read.headers["etag"] == created.headers["etag"]
    assert read.headers["etag"].startswith('"') and read.headers["etag"].endswith('"')


@pytest.mark.parametrize("tag", ['"bogus"', "bogus", "", 'W/"bogus"', '"", "x"'])
async def test_a_bogus_if_match_is_412_and_changes_nothing(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine, tag: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    created = await post_created(client, MEMORIES, headers, {"text": "Ada lives in London."})
    memory_id = created.json()["id"]
    path = f"{MEMORIES}/{memory_id}"
    refused = await client.patch(
        path, json={"text": "Ada lives in Paris."}, headers={**headers, "If-Match": tag}
    )
    assert_precondition_failed(refused, created.headers["etag"])
    deleted = await client.delete(path, headers={**headers, "If-Match": tag})
    assert_precondition_failed(deleted, created.headers["etag"])
    assert await stored(runtime_engine, tenant, memory_id) == ("Ada lives in London.", ["add"])


async def test_if_match_writes_over_the_state_it_names_only(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "ada")
    created = await post_created(client, MEMORIES, headers, {"text": "Ada likes jazz."})
    memory_id, seen = created.json()["id"], created.headers["etag"]
    path = f"{MEMORIES}/{memory_id}"

    first = await client.patch(
        path, json={"text": "Ada likes bebop."}, headers={**headers, "If-Match": seen}
    )
    assert first.status_code == 200, first.text
    assert first.headers["etag"] != seen
    assert first.headers["etag"] == (await client.get(path, headers=headers)).headers["etag"]

    stale = await client.patch(
        path, json={"text": "Ada likes swing."}, headers={**headers, "If-Match": seen}
    )
    assert_precondition_failed(stale, first.headers["etag"])
    stale_delete = await client.delete(path, headers={**headers, "If-Match": seen})
    assert_precondition_failed(stale_delete, first.headers["etag"])
    assert await stored(runtime_engine, tenant, memory_id) == (
        "Ada likes bebop.",
        ["add", "update"],
    )

    # Any listed tag may match; `*` matches whatever state the memory is in.
    listed = await client.patch(
        path,
        json={"category": "music"},
        headers={**headers, "If-Match": f'"nope", {first.headers["etag"]}'},
    )
    assert listed.status_code == 200, listed.text
    anything = await client.patch(
        path, json={"confidence": 0.9}, headers={**headers, "If-Match": "*"}
    )
    assert anything.status_code == 200, anything.text
    gone = await client.delete(path, headers={**headers, "If-Match": anything.headers["etag"]})
    assert gone.status_code == 204
    assert (await client.get(path, headers=headers)).status_code == 404


async def test_if_none_match_answers_304_until_the_memory_changes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    created = await post_created(client, MEMORIES, headers, {"text": "Ada reads Babbage."})
    path, seen = created.headers["location"], created.headers["etag"]
    for sent in (seen, f"W/{seen}", f'"other", {seen}', "*"):
        cached = await client.get(path, headers={**headers, "If-None-Match": sent})
        assert cached.status_code == 304, (sent, cached.text)
        assert cached.headers["etag"] == seen and cached.content == b""
    other = await client.get(path, headers={**headers, "If-None-Match": '"other"'})
    assert other.status_code == 200 and other.json()["id"] == created.json()["id"]

    await client.patch(path, json={"text": "Ada reads Menabrea."}, headers=headers)
    fresh = await client.get(path, headers={**headers, "If-None-Match": seen})
    assert fresh.status_code == 200 and fresh.json()["text"] == "Ada reads Menabrea."
    assert fresh.headers["etag"] != seen


class SlowEmbedder:
    """The real embedder, late: an edit's transaction stays open while it embeds, so
    concurrent edits of one memory overlap instead of finishing one by one."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.model_name = real.model_name
        self.dims = real.dims

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(0.2)
        return await self.real.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.real.embed_query(text)

    async def aclose(self) -> None:
        return None


async def test_concurrent_guarded_edits_let_exactly_one_win(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    """Writers that all read the same state and all send its tag: one applies, every other
    gets 412 with the winner's tag, and the stored text is the winner's (nothing merged or
    lost silently)."""
    writers = 6
    # One service credential per writer: requests of one credential would queue behind each
    # other's first-use bookkeeping and never reach the memory together.
    agents = [bearer(settings, tenant, f"agent-{index}", service=True) for index in range(writers)]
    created = await client.post(
        "/v1/users/zoe/memories", json={"text": "Zoe's desk is by the window."}, headers=agents[0]
    )
    assert created.status_code == 201, created.text
    path, seen = created.headers["location"], created.headers["etag"]
    backfill = app.state.mneme.embedding_backfill
    real_embedder = backfill.embedder
    backfill.embedder = SlowEmbedder(real_embedder)
    try:
        responses = await asyncio.gather(
            *(
                client.patch(
                    path,
                    json={"text": f"Zoe's desk is in room {index}."},
                    headers={**agents[index], "If-Match": seen},
                )
                for index in range(writers)
            )
        )
    finally:
        backfill.embedder = real_embedder
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (writers - 1)
    [winner] = [response for response in responses if response.status_code == 200]
    for loser in responses:
        if loser is not winner:
            assert_precondition_failed(loser, winner.headers["etag"])
    words, actions = await stored(runtime_engine, tenant, created.json()["id"])
    assert words == winner.json()["text"]
    assert actions == ["add", "update"]


async def test_org_memories_share_the_mechanism(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    created = await client.post(
        "/v1/org/memories", json={"text": "The office closes at six."}, headers=admin
    )
    assert created.status_code == 201, created.text
    memory_id = created.json()["id"]
    assert created.headers["location"] == f"/v1/org/memories/{memory_id}"
    user = bearer(settings, tenant, "ada")
    read = await client.get(created.headers["location"], headers=user)
    assert read.headers["etag"] == created.headers["etag"]
    cached = await client.get(
        created.headers["location"], headers={**user, "If-None-Match": read.headers["etag"]}
    )
    assert cached.status_code == 304
    stale = await client.patch(
        created.headers["location"],
        json={"text": "The office closes at five."},
        headers={**admin, "If-Match": '"stale"'},
    )
    assert_precondition_failed(stale, created.headers["etag"])
    assert await stored(runtime_engine, tenant, memory_id) == ("The office closes at six.", ["add"])


async def test_a_retried_create_replays_location_and_tag(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = {**bearer(settings, tenant, "ada"), "Idempotency-Key": "remember-1"}
    body = {"text": "Ada's cat is Puff.", "metadata": {"weight_kg": 4.25}}
    first = await client.post(MEMORIES, json=body, headers=headers)
    again = await client.post(MEMORIES, json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["etag"] == first.headers["etag"]
    read = await client.get(first.headers["location"], headers=headers)
    assert read.headers["etag"] == first.headers["etag"]


async def test_a_batch_names_the_collection_it_added_to(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    response = await client.post(
        f"{MEMORIES}/batch",
        json={"items": [{"text": "Ada plays chess."}, {"text": "Ada plays go."}]},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/users/ada/memories"
    listed = await client.get(response.headers["location"], headers=headers)
    ids: set[Any] = {item["id"] for item in listed.json()["items"]}
    assert ids == {item["id"] for item in response.json()["items"]}


async def test_openapi_declares_the_tags_and_preconditions(client: AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    one = spec["paths"]["/v1/users/{user_id}/memories/{memory_id}"]
    assert "ETag" in one["get"]["responses"]["200"]["headers"]
    assert "304" in one["get"]["responses"]
    assert "if-none-match" in {p["name"] for p in one["get"]["parameters"]}
    for method in ("patch", "delete"):
        assert "412" in one[method]["responses"]
        assert "if-match" in {p["name"] for p in one[method]["parameters"]}
    created = spec["paths"]["/v1/users/{user_id}/memories"]["post"]["responses"]["201"]
    assert {"Location", "ETag"} <= set(created["headers"])
    assert created["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/MemoryWritten"
    }


async def test_procedures_carry_a_tag_that_guards_their_writes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    path = "/v1/users/me/procedures"
    empty = await client.get(path, headers=headers)
    first = await client.put(
        path, json={"style": "Be brief."}, headers={**headers, "If-Match": empty.headers["etag"]}
    )
    assert first.status_code == 200, first.text
    read = await client.get(path, headers=headers)
    assert read.headers["etag"] == first.headers["etag"] != empty.headers["etag"]
    cached = await client.get(path, headers={**headers, "If-None-Match": read.headers["etag"]})
    assert cached.status_code == 304

    for tag in (empty.headers["etag"], "bogus"):
        stale = await client.put(
            path, json={"style": "Be verbose."}, headers={**headers, "If-Match": tag}
        )
        assert_precondition_failed(stale, first.headers["etag"])
    assert (await client.get(path, headers=headers)).json()["style"]["text"] == "Be brief."


async def test_concurrent_guarded_procedure_writes_let_exactly_one_win(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    writers = 4
    agents = [bearer(settings, tenant, f"agent-{index}", service=True) for index in range(writers)]
    path = "/v1/users/zoe/procedures"
    # Zoe's first write provisions her account row, which would queue the others behind it.
    first = await client.put(path, json={"workflow": "Plan first."}, headers=agents[0])
    seen = first.headers["etag"]
    backfill = app.state.mneme.embedding_backfill
    real_embedder = backfill.embedder
    backfill.embedder = SlowEmbedder(real_embedder)
    try:
        responses = await asyncio.gather(
            *(
                client.put(
                    path,
                    json={"style": f"Style number {index}."},
                    headers={**agents[index], "If-Match": seen},
                )
                for index in range(writers)
            )
        )
    finally:
        backfill.embedder = real_embedder
    statuses = sorted(response.status_code for response in responses)
    assert statuses == [200] + [412] * (writers - 1)
    [winner] = [response for response in responses if response.status_code == 200]
    stored = await client.get(path, headers=agents[0])
    assert stored.json()["style"]["text"] == winner.json()["style"]["text"]
    assert stored.headers["etag"] == winner.headers["etag"]


@pytest.mark.parametrize("route", ["user", "org", "key"])
async def test_if_none_match_refuses_a_delete_while_the_memory_exists(
    client: AsyncClient, settings: Settings, tenant: str, route: str
) -> None:
    """On a write, `If-None-Match` is a precondition like `If-Match` (RFC 9110): `*` or the
    memory's tag means "only if it is not there (in that state)", so the delete is refused."""
    headers = bearer(settings, tenant, "ada", admin=True)
    if route == "key":
        path = "/v1/users/me/keyed-memories?kind=semantic&key=k"
        created = await client.put(path, json={"text": "Ada is here."}, headers=headers)
    else:
        collection = MEMORIES if route == "user" else "/v1/org/memories"
        created = await post_created(client, collection, headers, {"text": "Ada is here."})
        path = created.headers["location"]
    tag = created.headers["etag"]
    for condition in ("*", tag, f'"other", {tag}'):
        refused = await client.delete(path, headers={**headers, "If-None-Match": condition})
        assert_precondition_failed(refused, tag)
    assert (await client.get(path, headers=headers)).status_code == 200
    other = await client.delete(path, headers={**headers, "If-None-Match": '"other"'})
    assert other.status_code == 204, other.text
