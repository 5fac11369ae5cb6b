"""One live memory per owner, kind and text, however a memory comes to hold a text: a create,
a batch, a change of text, a superseded memory restored; sequentially or at the same time,
the writer that would make a second one gets 409 `DUPLICATE_MEMORY` naming the first (or,
for a create, the first back with `duplicate: true`), never a 500."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from httpx import AsyncClient, Response
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import as_tenant, assert_problem, bearer
from tests.fixtures.factories import memories, remember

MEMORIES = "/v1/users/me/memories"


def assert_duplicate_of(response: Response, existing_id: str) -> None:
    body = assert_problem(response, 409, "DUPLICATE_MEMORY")
    assert body["existing_id"] == existing_id, body


async def patch(
    client: AsyncClient, headers: dict[str, str], memory_id: str, **body: Any
) -> Response:
    return await client.patch(f"{MEMORIES}/{memory_id}", headers=headers, json=body)


async def test_restoring_a_superseded_memory_over_a_live_copy_is_a_conflict(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    old = await remember(client, headers, text="Ada owns a red bicycle.")
    assert (await patch(client, headers, old["id"], lifecycle="superseded")).status_code == 200
    copy = await remember(client, headers, text="Ada owns a red bicycle.")
    assert copy["duplicate"] is False and copy["id"] != old["id"]

    for lifecycle in ("confirmed", "proposed"):
        refused = await patch(client, headers, old["id"], lifecycle=lifecycle)
        assert_duplicate_of(refused, copy["id"])
    # Restored with another text, it is no copy: it comes back.
    restored = await patch(
        client, headers, old["id"], lifecycle="confirmed", text="Ada owned a red bicycle."
    )
    assert restored.status_code == 200, restored.text
    assert restored.json()["lifecycle"] == "confirmed"
    live = sorted(m["text"] for m in await memories(client, headers))
    assert live == ["Ada owned a red bicycle.", "Ada owns a red bicycle."]


async def test_a_change_that_loses_the_race_to_a_concurrent_writer_is_a_conflict(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    """Another transaction adds the text after this change looked for it and before the
    change is written: the unique index refuses the change, which answers 409 naming the
    memory that transaction added."""
    headers = bearer(settings, tenant, "ada")
    mine = await remember(client, headers, text="Ada's desk is by the window.")
    async with runtime_engine.connect() as connection:
        transaction = await connection.begin()
        await as_tenant(connection, tenant)
        theirs = (
            await connection.execute(
                text(
                    "INSERT INTO memory (tenant_id, scope, user_id, kind, text) "
                    "VALUES (:tenant, 'user', 'ada', 'semantic', :text) RETURNING id"
                ),
                {"tenant": tenant, "text": "Ada's desk is by the door."},
            )
        ).scalar_one()
        # The change does not see the uncommitted memory, and its write waits for that
        # transaction's end.
        change = asyncio.create_task(
            patch(client, headers, mine["id"], text="Ada's desk is by the door.")
        )
        await asyncio.sleep(0.5)
        assert not change.done()
        await transaction.commit()
    assert_duplicate_of(await change, str(theirs))
    unchanged = (await client.get(f"{MEMORIES}/{mine['id']}", headers=headers)).json()
    assert unchanged["text"] == "Ada's desk is by the window."


async def test_concurrent_changes_to_one_text_leave_one_winner_and_conflicts(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    writers = 10
    ids = [(await remember(client, headers, text=f"Source {n}."))["id"] for n in range(writers)]
    responses = await asyncio.gather(
        *(patch(client, headers, memory_id, text="Race target X.") for memory_id in ids)
    )
    assert Counter(r.status_code for r in responses) == {200: 1, 409: writers - 1}
    [winner] = [r.json()["id"] for r in responses if r.status_code == 200]
    for response in responses:
        if response.status_code == 409:
            assert_duplicate_of(response, winner)

    # Superseded copies of one text restored at the same time: one comes back.
    copies = []
    for _ in range(5):
        copy = await remember(client, headers, text="Restored once.")
        assert (await patch(client, headers, copy["id"], lifecycle="superseded")).status_code == 200
        copies.append(copy["id"])
    restores = await asyncio.gather(
        *(patch(client, headers, memory_id, lifecycle="confirmed") for memory_id in copies)
    )
    assert Counter(r.status_code for r in restores) == {200: 1, 409: 4}, [r.text for r in restores]
    live = [m["text"] for m in await memories(client, headers)]
    assert Counter(live)["Restored once."] == 1 and Counter(live)["Race target X."] == 1


async def expire(engine: AsyncEngine, memory_id: str) -> None:
    """Let a memory expire now (the retention sweep has not run)."""
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE memory SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": memory_id},
        )


async def events_of(engine: AsyncEngine, tenant: str, memory_ids: list[str]) -> int:
    """How many history events of these memories the database still holds."""
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        found = await connection.execute(
            text("SELECT count(*) FROM memory_event WHERE memory_id = ANY(CAST(:ids AS uuid[]))"),
            {"ids": memory_ids},
        )
        return int(found.scalar_one())


async def test_an_expired_memory_does_not_keep_its_text_from_being_stored_again(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "ada")
    # Superseded while its words are still free; restored after another memory held them.
    restorable = await remember(client, headers, text="At home.")
    assert (await patch(client, headers, restorable["id"], lifecycle="superseded")).is_success
    later = "2999-01-01T00:00:00Z"
    expired = [
        await remember(client, headers, text=words, expires_at=later)
        for words in ("On call this weekend.", "Off on Friday.", "In Porto.", "At home.")
    ]
    for memory in expired:
        await expire(owner_engine, memory["id"])
    assert await memories(client, headers) == []

    again = await remember(client, headers, text="On call this weekend.")
    assert again["duplicate"] is False and again["id"] != expired[0]["id"]
    batch = await client.post(
        f"{MEMORIES}/batch",
        headers=headers,
        json={"items": [{"text": "Off on Friday."}, {"text": "Something new."}]},
    )
    assert batch.status_code == 201, batch.text
    assert [item["duplicate"] for item in batch.json()["items"]] == [False, False]
    other = await remember(client, headers, text="In Lisbon.")
    changed = await patch(client, headers, other["id"], text="In Porto.")
    assert changed.status_code == 200, changed.text
    restored = await patch(client, headers, restorable["id"], lifecycle="confirmed")
    assert restored.status_code == 200, restored.text

    # Each expired memory is removed as the retention sweep removes it: with its history.
    for memory in expired:
        history = await client.get(f"{MEMORIES}/{memory['id']}/history", headers=headers)
        assert_problem(history, 404, "NOT_FOUND")
    assert await events_of(owner_engine, tenant, [memory["id"] for memory in expired]) == 0
    live = sorted(m["text"] for m in await memories(client, headers))
    assert live == sorted(
        ["At home.", "Off on Friday.", "On call this weekend.", "In Porto.", "Something new."]
    )


async def test_concurrent_batches_of_the_same_texts_in_any_order_all_succeed(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Batches insert in one order whatever the order of their items, so two of them never
    wait on each other's new memories in opposite orders (a deadlock); each answers in its
    own order, the later ones with the memories the first added."""
    headers = bearer(settings, tenant, "ada")
    texts = [f"Crossed batch item {n}." for n in range(8)]
    orders = [texts if n % 2 else texts[::-1] for n in range(20)]
    responses = await asyncio.gather(
        *(
            client.post(
                f"{MEMORIES}/batch", headers=headers, json={"items": [{"text": t} for t in order]}
            )
            for order in orders
        )
    )
    assert Counter(r.status_code for r in responses) == {201: 20}, [r.text for r in responses]
    ids: dict[str, set[str]] = {}
    fresh: Counter[str] = Counter()
    for order, response in zip(orders, responses, strict=True):
        items = response.json()["items"]
        assert [item["text"] for item in items] == order
        for item in items:
            ids.setdefault(item["text"], set()).add(item["id"])
            fresh[item["text"]] += not item["duplicate"]
    assert all(len(found) == 1 for found in ids.values()) and fresh == dict.fromkeys(texts, 1)
    assert len(await memories(client, headers)) == len(texts)


async def test_a_batch_never_waits_on_another_writer_in_the_opposite_order(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    """Another transaction adds two texts in the index's order and has added the first: a
    batch that names them the other way round waits for it on the first text, instead of
    adding the second and waiting there while the other transaction waits on it."""
    headers = bearer(settings, tenant, "ada")
    await remember(client, headers, text="Makes the user known.")
    insert = text(
        "INSERT INTO memory (tenant_id, scope, user_id, kind, text) "
        "VALUES (:tenant, 'user', 'ada', 'semantic', :text) RETURNING id"
    )
    async with runtime_engine.connect() as connection:
        transaction = await connection.begin()
        await as_tenant(connection, tenant)
        first, second = (
            await connection.execute(
                text(
                    "SELECT t FROM unnest(CAST(:texts AS text[])) AS t "
                    "ORDER BY md5(lower(regexp_replace(btrim(t), '\\s+', ' ', 'g')))"
                ),
                {"texts": ["Crossed with a writer A.", "Crossed with a writer B."]},
            )
        ).scalars()
        theirs = [(await connection.execute(insert, {"tenant": tenant, "text": first})).scalar()]
        batch = asyncio.create_task(
            client.post(
                f"{MEMORIES}/batch",
                headers=headers,
                json={"items": [{"text": second}, {"text": first}]},
            )
        )
        await asyncio.sleep(0.5)
        theirs.append(
            (await connection.execute(insert, {"tenant": tenant, "text": second})).scalar()
        )
        await transaction.commit()
    response = await batch
    assert response.status_code == 201, response.text
    items = response.json()["items"]
    assert [(item["text"], item["duplicate"]) for item in items] == [(second, True), (first, True)]
    assert [item["id"] for item in items] == [str(theirs[1]), str(theirs[0])]
