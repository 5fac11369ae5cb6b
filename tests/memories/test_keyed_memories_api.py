"""Memories addressed by a client's key: put adds once then updates, keys are per owner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.memories.repository import writers_lock_key
from tests.conftest import as_tenant, assert_problem, bearer
from tests.fixtures.locks import waiting_locks

PATH = "/v1/users/me/keyed-memories"


def at(key: str, kind: str = "semantic", category: str | None = "notes") -> dict[str, str]:
    params = {"kind": kind, "key": key}
    if category is not None:
        params["category"] = category
    return params


async def memories(client: AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = await client.get("/v1/users/me/memories", headers=headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_put_adds_once_then_updates_the_same_memory(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    first = await client.put(
        PATH,
        params=at("k1"),
        json={"text": "Kim likes jazz.", "metadata": {"n": 1}},
        headers=headers,
    )
    assert first.status_code == 201, first.text
    added = first.json()
    assert added["created"] is True and added["store_key"] == "k1"
    assert added["kind"] == "semantic" and added["category"] == "notes"

    second = await client.put(
        PATH,
        params=at("k1"),
        json={"text": "Kim likes bebop.", "metadata": {"n": 2}},
        headers=headers,
    )
    assert second.status_code == 200, second.text
    updated = second.json()
    assert updated["id"] == added["id"] and updated["created"] is False
    assert updated["text"] == "Kim likes bebop." and updated["metadata"] == {"n": 2}

    got = await client.get(PATH, params=at("k1"), headers=headers)
    assert got.status_code == 200 and got.json()["text"] == "Kim likes bebop."
    assert [m["id"] for m in await memories(client, headers)] == [added["id"]]
    history = await client.get(f"/v1/users/me/memories/{added['id']}/history", headers=headers)
    assert [e["action"] for e in history.json()["items"]] == ["add", "update"]


async def test_two_keys_may_hold_the_same_text_and_namespaces_keep_keys_apart(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "lou")
    body = {"text": "Same words."}
    ids = set()
    for params in (at("a"), at("b"), at("a", category="other"), at("a", kind="episodic")):
        response = await client.put(PATH, params=params, json=body, headers=headers)
        assert response.status_code == 201, response.text
        ids.add(response.json()["id"])
    assert len(ids) == 4
    # Unkeyed writes still refuse exact duplicates of each other.
    plain = [
        await client.post("/v1/users/me/memories", json=body, headers=headers) for _ in range(2)
    ]
    assert [r.json()["duplicate"] for r in plain] == [False, True]


async def test_concurrent_puts_of_a_new_key_add_one_memory(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "max")
    responses = await asyncio.gather(
        *(
            client.put(PATH, params=at("race"), json={"text": f"v{i}"}, headers=headers)
            for i in range(4)
        )
    )
    assert sorted(r.status_code for r in responses) == [200, 200, 200, 201]
    assert len({r.json()["id"] for r in responses}) == 1
    assert len(await memories(client, headers)) == 1


async def test_delete_by_key_forgets_it_and_other_users_cannot_reach_it(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    owner = bearer(settings, tenant, "nia")
    await client.put(PATH, params=at("x"), json={"text": "Nia's secret hobby."}, headers=owner)
    other = bearer(settings, tenant, "oz")
    assert_problem(await client.get(PATH, params=at("x"), headers=other), 404, "NOT_FOUND")
    assert_problem(await client.delete(PATH, params=at("x"), headers=other), 404, "NOT_FOUND")
    addressed = await client.get("/v1/users/nia/keyed-memories", params=at("x"), headers=other)
    assert_problem(addressed, 404, "NOT_FOUND")

    assert (await client.delete(PATH, params=at("x"), headers=owner)).status_code == 204
    assert_problem(await client.get(PATH, params=at("x"), headers=owner), 404, "NOT_FOUND")
    assert await memories(client, owner) == []


async def test_bad_addresses_and_secrets_are_refused_and_write_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "pat")
    bad_kind = await client.put(
        PATH, params=at("k", kind="dream"), json={"text": "x"}, headers=headers
    )
    assert_problem(bad_kind, 422, "VALIDATION_FAILED")
    bad_category = await client.put(
        PATH, params=at("k", category="Not Valid"), json={"text": "x"}, headers=headers
    )
    assert_problem(bad_category, 422, "VALIDATION_FAILED")
    too_long = await client.put(PATH, params=at("k" * 513), json={"text": "x"}, headers=headers)
    assert_problem(too_long, 422, "VALIDATION_FAILED")
    secret = await client.put(
        PATH, params=at("k"), json={"text": "My SSN is 123-45-6789."}, headers=headers
    )
    assert_problem(secret, 422, "SECRET_REFUSED")
    await client.put(PATH, params=at("k"), json={"text": "Fine."}, headers=headers)
    secret_update = await client.put(
        PATH, params=at("k"), json={"text": "card 4111 1111 1111 1111"}, headers=headers
    )
    assert_problem(secret_update, 422, "SECRET_REFUSED")
    secret_key = await client.put(
        PATH, params=at("password: hunter2hunter2"), json={"text": "Fine."}, headers=headers
    )
    body = assert_problem(secret_key, 422, "SECRET_REFUSED")
    assert body["errors"][0]["loc"] == ["query", "key"] and "hunter2" not in secret_key.text
    assert [m["text"] for m in await memories(client, headers)] == ["Fine."]


async def test_a_key_whose_memory_expired_takes_a_new_one(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "quinn")
    first = await client.put(PATH, params=at("k"), json={"text": "Old."}, headers=headers)
    assert first.status_code == 201, first.text
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE memory SET expires_at = now() - interval '1 minute' WHERE id = :id"),
            {"id": first.json()["id"]},
        )
    assert_problem(await client.get(PATH, params=at("k"), headers=headers), 404, "NOT_FOUND")
    again = await client.put(PATH, params=at("k"), json={"text": "New."}, headers=headers)
    assert again.status_code == 201, again.text
    assert again.json()["id"] != first.json()["id"]
    assert [m["text"] for m in await memories(client, headers)] == ["New."]
    # The expired memory is removed as the retention sweep removes it: with its history.
    history_path = f"/v1/users/me/memories/{first.json()['id']}/history"
    history = await client.get(history_path, headers=headers)
    assert_problem(history, 404, "NOT_FOUND")


# --- entity tags and preconditions ------------------------------------------------------------


async def stored_texts(engine: AsyncEngine, tenant: str, key: str) -> list[str]:
    async with engine.begin() as connection:
        await as_tenant(connection, tenant)
        rows = await connection.execute(
            text("SELECT text FROM memory WHERE store_key = :key"), {"key": key}
        )
        return list(rows.scalars())


async def test_a_key_answers_with_the_memorys_tag_and_location(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    added = await client.put(
        PATH, params=at("k|1"), json={"text": "Kim likes jazz."}, headers=headers
    )
    assert added.status_code == 201, added.text
    assert added.headers["location"] == (
        "/v1/users/kim/keyed-memories?kind=semantic&key=k%7C1&category=notes"
    )
    by_key = await client.get(added.headers["location"], headers=headers)
    assert by_key.status_code == 200 and by_key.json()["id"] == added.json()["id"]
    by_id = await client.get(f"/v1/users/me/memories/{added.json()['id']}", headers=headers)
    assert added.headers["etag"] == by_key.headers["etag"] == by_id.headers["etag"]
    cached = await client.get(
        PATH, params=at("k|1"), headers={**headers, "If-None-Match": added.headers["etag"]}
    )
    assert cached.status_code == 304 and cached.headers["etag"] == added.headers["etag"]

    replaced = await client.put(
        PATH, params=at("k|1"), json={"text": "Kim likes bebop."}, headers=headers
    )
    assert replaced.status_code == 200 and "location" not in replaced.headers
    assert replaced.headers["etag"] != added.headers["etag"]


async def test_if_match_guards_puts_and_deletes_of_a_key(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "kim")
    added = await client.put(PATH, params=at("k2"), json={"text": "One."}, headers=headers)
    seen = added.headers["etag"]
    first = await client.put(
        PATH, params=at("k2"), json={"text": "Two."}, headers={**headers, "If-Match": seen}
    )
    assert first.status_code == 200, first.text
    for tag in (seen, '"bogus"', "bogus"):
        stale = await client.put(
            PATH, params=at("k2"), json={"text": "Three."}, headers={**headers, "If-Match": tag}
        )
        body = assert_problem(stale, 412, "PRECONDITION_FAILED")
        assert stale.headers["etag"] == body["current_etag"] == first.headers["etag"]
        refused = await client.delete(PATH, params=at("k2"), headers={**headers, "If-Match": tag})
        assert_problem(refused, 412, "PRECONDITION_FAILED")
    assert await stored_texts(runtime_engine, tenant, "k2") == ["Two."]
    gone = await client.delete(
        PATH, params=at("k2"), headers={**headers, "If-Match": first.headers["etag"]}
    )
    assert gone.status_code == 204
    assert await stored_texts(runtime_engine, tenant, "k2") == []


async def test_star_preconditions_choose_between_adding_and_replacing(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "kim")
    for tag in ("*", '"bogus"'):
        only_replace = await client.put(
            PATH,
            params=at("k3"),
            json={"text": "Nothing yet."},
            headers={**headers, "If-Match": tag},
        )
        # Nothing was read, so nothing changed since: the detail says the key holds nothing.
        body = assert_problem(only_replace, 412, "PRECONDITION_FAILED")
        assert "'k3' holds no memory" in body["detail"] and "since you read" not in body["detail"]
        assert "etag" not in only_replace.headers and "current_etag" not in body
    assert await stored_texts(runtime_engine, tenant, "k3") == []

    only_add = {**headers, "If-None-Match": "*"}
    added = await client.put(PATH, params=at("k3"), json={"text": "First."}, headers=only_add)
    assert added.status_code == 201, added.text
    again = await client.put(PATH, params=at("k3"), json={"text": "Second."}, headers=only_add)
    body = assert_problem(again, 412, "PRECONDITION_FAILED")
    assert body["current_etag"] == added.headers["etag"]
    replaced = await client.put(
        PATH, params=at("k3"), json={"text": "Second."}, headers={**headers, "If-Match": "*"}
    )
    assert replaced.status_code == 200, replaced.text
    assert await stored_texts(runtime_engine, tenant, "k3") == ["Second."]


async def test_a_put_replaces_every_field_it_carries_and_a_repeated_put_writes_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    first = await client.put(
        PATH,
        params=at("seat"),
        json={
            "text": "Prefers aisle seats.",
            "confidence": 0.9,
            "event_at": "2026-01-01T00:00:00Z",
        },
        headers=headers,
    )
    assert first.status_code == 201, first.text
    body = {"text": "Prefers aisle seats.", "confidence": 0.3, "expires_at": "2999-01-01T00:00:00Z"}
    second = await client.put(PATH, params=at("seat"), json=body, headers=headers)
    assert second.status_code == 200, second.text
    replaced = second.json()
    assert replaced["confidence"] == 0.3 and replaced["event_at"] is None
    assert replaced["expires_at"] == "2999-01-01T00:00:00Z"

    again = await client.put(PATH, params=at("seat"), json=body, headers=headers)
    assert again.status_code == 200 and again.headers["etag"] == second.headers["etag"]
    history = await client.get(f"/v1/users/me/memories/{replaced['id']}/history", headers=headers)
    assert [e["action"] for e in history.json()["items"]] == ["add", "update"]


async def test_a_put_brings_a_superseded_keyed_memory_back(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A key's memory superseded by a procedure slot written over it: the next put of the key
    makes it live again (the key holds it all along)."""
    headers = bearer(settings, tenant, "kim")
    style = at("tone", kind="procedural", category="style")
    added = await client.put(PATH, params=style, json={"text": "Answer briefly."}, headers=headers)
    assert added.status_code == 201, added.text
    slots = await client.put(
        "/v1/users/me/procedures", json={"style": "Answer in detail."}, headers=headers
    )
    assert slots.status_code == 200, slots.text
    superseded = (await client.get(PATH, params=style, headers=headers)).json()
    assert (superseded["lifecycle"], superseded["text"]) == ("superseded", "Answer briefly.")
    only_add = await client.put(
        PATH,
        params=style,
        json={"text": "Answer in one line."},
        headers={**headers, "If-None-Match": "*"},
    )
    assert_problem(only_add, 412, "PRECONDITION_FAILED")

    for words in ("Answer in one line.", "Answer in one line."):
        again = await client.put(PATH, params=style, json={"text": words}, headers=headers)
        assert again.status_code == 200, again.text
        back = again.json()
        assert (back["id"], back["created"]) == (added.json()["id"], False)
        assert (back["lifecycle"], back["invalid_at"], back["text"]) == ("confirmed", None, words)
    search = await client.post(
        "/v1/users/me/memories/search",
        json={"query": "one line", "mode": "lexical", "kinds": ["procedural"]},
        headers=headers,
    )
    assert [hit["memory"]["id"] for hit in search.json()["hits"]] == [back["id"]]


async def test_a_put_that_brings_a_memory_back_takes_the_writers_lock_before_its_row(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    """A put that makes a superseded memory live again confirms it, as a confirming PATCH
    does, and takes their locks in the PATCH's order (the derived writers' lock, then the
    memory's row): taken the other way, a put and a PATCH of the same memory each held what the
    other waited for."""
    headers = bearer(settings, tenant, "ada")
    added = await client.put(PATH, params=at("tea"), json={"text": "Green tea."}, headers=headers)
    memory_id = added.json()["id"]
    retired = await client.patch(
        f"/v1/users/me/memories/{memory_id}", json={"lifecycle": "superseded"}, headers=headers
    )
    assert retired.status_code == 200, retired.text
    async with owner_engine.connect() as holder:
        transaction = await holder.begin()
        await holder.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": writers_lock_key(tenant, Owner.user("ada"))},
        )
        put = asyncio.ensure_future(
            client.put(PATH, params=at("tea"), json={"text": "Black tea."}, headers=headers)
        )
        assert await waiting_locks(owner_engine) >= 1
        # The put waits for the writers' lock holding no lock on the memory's row.
        async with owner_engine.connect() as prober, prober.begin():
            row = await prober.execute(
                text("SELECT id FROM memory WHERE id = :id FOR UPDATE NOWAIT"),
                {"id": memory_id},
            )
            assert [str(r.id) for r in row] == [memory_id]
        await transaction.rollback()
        written = await put
    assert written.status_code == 200, written.text
    assert (written.json()["lifecycle"], written.json()["text"]) == ("confirmed", "Black tea.")


@pytest.mark.parametrize("key", ["%20", "%E2%80%8B", "%20%C2%A0%E2%81%A0"])
async def test_a_key_of_nothing_visible_is_refused(
    client: AsyncClient, settings: Settings, tenant: str, key: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    url = f"{PATH}?kind=semantic&key={key}"
    body = assert_problem(
        await client.put(url, json={"text": "Blank."}, headers=headers), 422, "VALIDATION_FAILED"
    )
    assert body["errors"][0]["loc"] == ["query", "key"]
    assert await memories(client, headers) == []


async def test_a_key_that_is_not_utf8_is_refused_and_reads_no_other_key(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "kim")
    for key in ("%FF", "%C3", "a%E2%82"):
        url = f"{PATH}?kind=semantic&key={key}"
        refused = await client.put(url, json={"text": "Bytes."}, headers=headers)
        assert_problem(refused, 422, "VALIDATION_FAILED")
        assert_problem(await client.get(url, headers=headers), 422, "VALIDATION_FAILED")
    # A key that names the replacement character itself is a key like any other.
    replacement = f"{PATH}?kind=semantic&key=%EF%BF%BD"
    added = await client.put(replacement, json={"text": "Replacement."}, headers=headers)
    assert added.status_code == 201, added.text
    assert (await client.get(replacement, headers=headers)).json()["store_key"] == "\ufffd"
    assert_problem(
        await client.get(f"{PATH}?kind=semantic&key=%FE", headers=headers), 422, "VALIDATION_FAILED"
    )


# --- moving a keyed memory ----------------------------------------------------------------------


async def test_a_patch_of_the_category_moves_the_key_with_its_memory(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A keyed memory's address is its kind, category and key: a PATCH of its category moves
    it there, so the keyed routes find it at the new address and the old one holds nothing."""
    headers = bearer(settings, tenant, "ada")
    added = await client.put(
        PATH, params=at("diet", category=None), json={"text": "Ada is vegetarian."}, headers=headers
    )
    assert added.status_code == 201, added.text
    memory_id = added.json()["id"]
    moved = await client.patch(
        f"/v1/users/me/memories/{memory_id}", json={"category": "food"}, headers=headers
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["category"] == "food" and moved.json()["store_key"] == "diet"

    found = await client.get(PATH, params=at("diet", category="food"), headers=headers)
    assert found.status_code == 200 and found.json()["id"] == memory_id
    assert found.headers["etag"] == moved.headers["etag"]
    old = at("diet", category=None)
    assert_problem(await client.get(PATH, params=old, headers=headers), 404, "NOT_FOUND")
    # The key went with its memory: a put at the old address adds a memory of its own.
    again = await client.put(PATH, params=old, json={"text": "Ada eats fish."}, headers=headers)
    assert again.status_code == 201 and again.json()["id"] != memory_id
    replaced = await client.put(
        PATH, params=at("diet", category="food"), json={"text": "Ada is vegan."}, headers=headers
    )
    assert replaced.status_code == 200 and replaced.json()["id"] == memory_id
    assert sorted((m["category"] or "", m["text"]) for m in await memories(client, headers)) == [
        ("", "Ada eats fish."),
        ("food", "Ada is vegan."),
    ]


async def test_a_patch_that_moves_a_key_onto_another_memorys_address_is_409(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    seat = await client.put(
        PATH, params=at("seat", category=None), json={"text": "Aisle seats."}, headers=headers
    )
    travel = await client.put(
        PATH, params=at("seat", category="travel"), json={"text": "Window seats."}, headers=headers
    )
    assert seat.status_code == travel.status_code == 201
    path = f"/v1/users/me/memories/{seat.json()['id']}"
    for change in ({"category": "travel"}, {"category": "travel", "text": "Middle seats."}):
        refused = await client.patch(path, json=change, headers=headers)
        body = assert_problem(refused, 409, "CONFLICT")
        assert body["key"] == "seat" and body["category"] == "travel"
        assert body["existing_id"] == travel.json()["id"]
        assert "seat" in body["detail"] and "travel" in body["detail"]
    # Nothing changed: each memory is where it was, as it was, with no history of the attempt.
    unchanged = await client.get(path, headers=headers)
    assert unchanged.headers["etag"] == seat.headers["etag"]
    history = await client.get(f"{path}/history", headers=headers)
    assert [event["action"] for event in history.json()["items"]] == ["add"]
    held = await client.get(PATH, params=at("seat", category="travel"), headers=headers)
    assert held.headers["etag"] == travel.headers["etag"]
    # Out of the category, and back into a free one.
    back = await client.patch(path, json={"category": "flights"}, headers=headers)
    assert back.status_code == 200 and back.json()["category"] == "flights"


async def test_a_key_moves_onto_an_address_whose_memory_expired(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "ada")
    expired = await client.put(
        PATH, params=at("k", category="a"), json={"text": "Old."}, headers=headers
    )
    kept = await client.put(
        PATH, params=at("k", category="b"), json={"text": "New."}, headers=headers
    )
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE memory SET expires_at = now() - interval '1 minute' WHERE id = :id"),
            {"id": expired.json()["id"]},
        )
    moved = await client.patch(
        f"/v1/users/me/memories/{kept.json()['id']}", json={"category": "a"}, headers=headers
    )
    assert moved.status_code == 200, moved.text
    found = await client.get(PATH, params=at("k", category="a"), headers=headers)
    assert found.json()["id"] == kept.json()["id"]
    # The expired memory went as the retention sweep removes it: with its history.
    history = await client.get(
        f"/v1/users/me/memories/{expired.json()['id']}/history", headers=headers
    )
    assert_problem(history, 404, "NOT_FOUND")


async def test_a_put_at_the_address_a_move_is_waiting_for_finds_the_moved_memory(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    """A move holds its new address as a put holds its key: a put there that comes while the
    move waits writes after it, over the memory it moved (not a second memory of the key)."""
    headers = bearer(settings, tenant, "ada")
    added = await client.put(
        PATH, params=at("k", category="a"), json={"text": "One."}, headers=headers
    )
    memory_id = added.json()["id"]
    async with owner_engine.connect() as holder:
        transaction = await holder.begin()
        await holder.execute(
            text("SELECT 1 FROM memory WHERE id = :id FOR UPDATE"), {"id": memory_id}
        )
        move = asyncio.ensure_future(
            client.patch(
                f"/v1/users/me/memories/{memory_id}", json={"category": "b"}, headers=headers
            )
        )
        assert await waiting_locks(owner_engine) >= 1
        put = asyncio.ensure_future(
            client.put(PATH, params=at("k", category="b"), json={"text": "Two."}, headers=headers)
        )
        await waiting_locks(owner_engine, at_least=2)
        await transaction.rollback()
        moved, written = await move, await put
    assert moved.status_code == 200, moved.text
    assert written.status_code == 200, written.text
    assert written.json()["id"] == memory_id and written.json()["text"] == "Two."
    assert [m["id"] for m in await memories(client, headers)] == [memory_id]


async def test_a_keyed_instruction_moves_into_a_slot_unless_its_key_is_taken_there(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A move into a slot's category is a move like any other (409 onto a taken address),
    and one that lands fills the slot, superseding the slot's other memory."""
    headers = bearer(settings, tenant, "ada")
    draft = await client.put(
        PATH, params=at("tone", kind="procedural"), json={"text": "Be terse."}, headers=headers
    )
    style = await client.put(
        PATH,
        params=at("tone", kind="procedural", category="style"),
        json={"text": "Be warm."},
        headers=headers,
    )
    workflow = await client.put(
        PATH,
        params=at("steps", kind="procedural", category="workflow"),
        json={"text": "Plan first."},
        headers=headers,
    )
    assert draft.status_code == style.status_code == workflow.status_code == 201
    path = f"/v1/users/me/memories/{draft.json()['id']}"
    taken = await client.patch(path, json={"category": "style"}, headers=headers)
    body = assert_problem(taken, 409, "CONFLICT")
    assert body["existing_id"] == style.json()["id"]

    moved = await client.patch(path, json={"category": "workflow"}, headers=headers)
    assert moved.status_code == 200, moved.text
    procedures = (await client.get("/v1/users/me/procedures", headers=headers)).json()
    assert procedures["workflow"]["memory_id"] == draft.json()["id"]
    assert procedures["style"]["memory_id"] == style.json()["id"]
    replaced = await client.get(
        PATH, params=at("steps", kind="procedural", category="workflow"), headers=headers
    )
    assert replaced.json()["lifecycle"] == "superseded"
