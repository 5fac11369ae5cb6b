"""Threads and messages: ordered, never lost, idempotent, labelled, private, deletable."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.factories import start_thread
from tests.secret_samples import SAMPLES


async def append(
    client: AsyncClient, headers: dict[str, str], thread_id: str, *messages: dict[str, Any]
) -> dict[str, Any]:
    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": list(messages)},
    )
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def turn(role: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
async def test_a_secret_in_a_thread_title_or_metadata_is_refused_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str, kind: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    sample = SAMPLES[kind]
    bodies: list[dict[str, Any]] = [
        {"title": sample.text},
        {"metadata": {"note": sample.text}},
        {"metadata": {"notes": [{"deeper": sample.text}]}},
    ]
    for body in bodies:
        response = await client.post("/v1/users/me/threads", headers=headers, json=body)
        problem = assert_problem(response, 422, "SECRET_REFUSED")
        assert problem["errors"][0]["loc"][:2] == ["body", next(iter(body))]
        assert sample.core not in response.text
    assert (await client.get("/v1/users/me/threads", headers=headers)).json()["items"] == []

    thread_id = await start_thread(client, headers, title="Trip planning", metadata={"app": "x"})
    for body in bodies:
        response = await client.patch(
            f"/v1/users/me/threads/{thread_id}", headers=headers, json=body
        )
        assert_problem(response, 422, "SECRET_REFUSED")
    got = (await client.get(f"/v1/users/me/threads/{thread_id}", headers=headers)).json()
    assert (got["title"], got["metadata"]) == ("Trip planning", {"app": "x"})


async def test_thread_lifecycle(client: AsyncClient, settings: Settings, tenant: str) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers, title="Trip planning", metadata={"app": "x"})
    got = (await client.get(f"/v1/users/me/threads/{thread_id}", headers=headers)).json()
    assert (got["title"], got["metadata"], got["user_id"]) == (
        "Trip planning",
        {"app": "x"},
        "alice",
    )
    renamed = await client.patch(
        f"/v1/users/me/threads/{thread_id}", headers=headers, json={"title": "Lisbon trip"}
    )
    assert renamed.json()["title"] == "Lisbon trip"
    removed = await client.delete(f"/v1/users/me/threads/{thread_id}", headers=headers)
    assert removed.status_code == 200
    assert removed.json()["deleted"] == {
        "thread": 1,
        "message": 0,
        "thread_summary": 0,
        "extraction_cursor": 0,
    }
    assert_problem(
        await client.get(f"/v1/users/me/threads/{thread_id}", headers=headers), 404, "NOT_FOUND"
    )


async def test_threads_list_most_recent_activity_first(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    first = await start_thread(client, headers, title="first")
    second = await start_thread(client, headers, title="second")
    await append(client, headers, first, turn("user", "bump"))
    page = (await client.get("/v1/users/me/threads?limit=1", headers=headers)).json()
    assert [t["id"] for t in page["items"]] == [first]
    rest = (
        await client.get(
            f"/v1/users/me/threads?limit=1&cursor={page['next_cursor']}", headers=headers
        )
    ).json()
    assert [t["id"] for t in rest["items"]] == [second]
    assert rest["next_cursor"] is None


async def test_messages_keep_order_roles_and_human_turn_labels(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    appended = await append(
        client,
        headers,
        thread_id,
        turn("system", "be nice"),
        turn("human", "hi"),
        turn("ai", "hello!"),
        turn("user", "book a table"),
        turn("assistant", "", tool_calls=[{"id": "c1", "name": "book", "arguments": "{}"}]),
        turn("tool", "booked"),
        turn("assistant", "done"),
    )
    items = appended["items"]
    assert [m["seq"] for m in items] == list(range(7))
    assert [m["role"] for m in items] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [m["label"] for m in items] == [None, "#1", None, "#2", None, None, None]
    assert items[4]["tool_calls"][0]["name"] == "book"
    more = await append(client, headers, thread_id, turn("user", "thanks"))
    assert (more["items"][0]["seq"], more["items"][0]["label"]) == (7, "#3")
    second_turn = (
        await client.get(f"/v1/users/me/threads/{thread_id}/messages?label=2", headers=headers)
    ).json()["items"]
    assert [m["content"] for m in second_turn] == ["book a table", "", "booked", "done"]
    page = (
        await client.get(f"/v1/users/me/threads/{thread_id}/messages?limit=3", headers=headers)
    ).json()
    rest = (
        await client.get(
            f"/v1/users/me/threads/{thread_id}/messages?cursor={page['next_cursor']}",
            headers=headers,
        )
    ).json()
    assert [m["seq"] for m in page["items"] + rest["items"]] == list(range(8))


async def test_the_window_of_a_long_thread_is_its_newest_messages_with_their_labels(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    for first in range(0, 201, 100):
        await append(
            client,
            headers,
            thread_id,
            *(
                turn("user" if seq % 2 == 0 else "assistant", f"message {seq}")
                for seq in range(first, min(first + 100, 201))
            ),
        )
    window_url = f"/v1/users/me/threads/{thread_id}/window"
    cut = (await client.get(f"{window_url}?max_messages=5", headers=headers)).json()
    assert [m["seq"] for m in cut["messages"]] == [196, 197, 198, 199, 200]
    assert [m["label"] for m in cut["messages"]] == ["#99", None, "#100", None, "#101"]
    assert (cut["start_index"], cut["truncated"]) == (196, True)
    by_default = (await client.get(window_url, headers=headers)).json()
    assert len(by_default["messages"]) == settings.thread_window_max_messages == 200
    assert (by_default["start_index"], by_default["truncated"]) == (1, True)
    whole = (await client.get(f"{window_url}?max_messages=1000", headers=headers)).json()
    assert [m["seq"] for m in whole["messages"]] == list(range(201))
    assert (whole["start_index"], whole["truncated"]) == (0, False)
    for refused in ("0", "1001", "many"):
        response = await client.get(f"{window_url}?max_messages={refused}", headers=headers)
        assert_problem(response, 422, "VALIDATION_FAILED")
    messages_url = f"/v1/users/me/threads/{thread_id}/messages"
    early_page = (await client.get(f"{messages_url}?limit=151", headers=headers)).json()
    late_page = (
        await client.get(
            f"{messages_url}?cursor={early_page['next_cursor']}&limit=4", headers=headers
        )
    ).json()
    assert [(m["seq"], m["label"]) for m in late_page["items"]] == [
        (151, None),
        (152, "#77"),
        (153, None),
        (154, "#78"),
    ]


async def test_appends_are_idempotent_by_client_id_and_by_key(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    first = await append(
        client,
        headers,
        thread_id,
        turn("user", "a", client_message_id="m1"),
        turn("assistant", "b", client_message_id="m2"),
    )
    again = await append(
        client,
        headers,
        thread_id,
        turn("user", "a", client_message_id="m1"),
        turn("assistant", "b", client_message_id="m2"),
        turn("user", "c", client_message_id="m3"),
    )
    assert again["duplicates"] == 2
    assert [m["id"] for m in again["items"][:2]] == [m["id"] for m in first["items"]]
    assert again["items"][2]["seq"] == 2
    keyed = {**headers, "Idempotency-Key": "append-1"}
    url = f"/v1/users/me/threads/{thread_id}/messages"
    body = {"messages": [turn("user", "d")]}
    one = await client.post(url, headers=keyed, json=body)
    two = await client.post(url, headers=keyed, json=body)
    assert one.json() == two.json()
    listed = (await client.get(url, headers=headers)).json()["items"]
    assert [m["content"] for m in listed] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("role", ["user", "human"])
@pytest.mark.parametrize("content", ["", "   ", "\n\t", "\u200b\u2060", "\ufeff\u3000"])
@pytest.mark.parametrize("endpoint", ["messages", "turns"])
async def test_a_user_message_of_only_whitespace_or_invisible_characters_is_refused_with_its_batch(
    client: AsyncClient, settings: Settings, tenant: str, role: str, content: str, endpoint: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/{endpoint}"
    body = {"messages": [turn("user", "Hello"), turn("assistant", "Hi!"), turn(role, content)]}

    refused = await client.post(url, headers=headers, json=body)

    problem = assert_problem(refused, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in problem["errors"]] == [["body", "messages", 2, "content"]]
    listed = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert listed.json()["items"] == []


@pytest.mark.parametrize(("first", "retry"), [("me", "alice"), ("alice", "me")])
async def test_a_keyed_retry_replays_whether_the_path_says_me_or_the_callers_own_id(
    client: AsyncClient, settings: Settings, tenant: str, first: str, retry: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    keyed = {**headers, "Idempotency-Key": "append-either-way"}
    body = {"messages": [turn("assistant", "ok A")]}

    one = await client.post(
        f"/v1/users/{first}/threads/{thread_id}/messages", headers=keyed, json=body
    )
    two = await client.post(
        f"/v1/users/{retry}/threads/{thread_id}/messages", headers=keyed, json=body
    )

    assert one.status_code == two.status_code == 201, two.text
    assert two.headers["Idempotent-Replayed"] == "true"
    assert two.json() == one.json()
    url = f"/v1/users/me/threads/{thread_id}/messages"
    listed = (await client.get(url, headers=headers)).json()["items"]
    assert [m["content"] for m in listed] == ["ok A"]


@pytest.mark.parametrize("endpoint", ["messages", "turns"])
async def test_an_append_answers_each_message_sent_with_its_stored_row_in_order(
    client: AsyncClient, settings: Settings, tenant: str, endpoint: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/{endpoint}"
    question = turn("user", "What is the capital of France?", client_message_id="u-1")
    first = await client.post(
        url, headers=headers, json={"messages": [question, turn("assistant", "Paris.")]}
    )
    assert first.status_code == 201, first.text
    assert [(m["seq"], m["content"]) for m in first.json()["items"]] == [
        (0, "What is the capital of France?"),
        (1, "Paris."),
    ]
    # A repeat within the batch and a repeat of a stored message each answer with the row
    # that stands for them; the messages without an id answer with their own.
    batch = [
        turn("user", "a", client_message_id="x"),
        turn("user", "b", client_message_id="x"),
        turn("assistant", "c"),
        question,
        turn("user", "d", client_message_id="y"),
        turn("assistant", "e"),
    ]
    second = await client.post(url, headers=headers, json={"messages": batch})
    assert second.status_code == 201, second.text
    answered = second.json()
    assert answered["duplicates"] == 2
    assert [(m["seq"], m["content"]) for m in answered["items"]] == [
        (2, "a"),
        (2, "a"),
        (3, "c"),
        (0, "What is the capital of France?"),
        (4, "d"),
        (5, "e"),
    ]
    listed = (
        await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    ).json()["items"]
    by_seq = {m["seq"]: m["id"] for m in listed}
    items = first.json()["items"] + answered["items"]
    assert [m["id"] for m in items] == [by_seq[m["seq"]] for m in items]


async def test_concurrent_appends_get_gap_free_positions(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    await asyncio.gather(
        *(
            append(client, headers, thread_id, turn("user", f"m{i}"), turn("assistant", f"r{i}"))
            for i in range(6)
        )
    )
    listed = (
        await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    ).json()["items"]
    assert [m["seq"] for m in listed] == list(range(12))
    for user_message, reply in zip(listed[::2], listed[1::2], strict=True):
        assert reply["content"] == "r" + user_message["content"][1:]


async def test_bad_messages_are_refused_and_nothing_is_stored(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/messages"
    refused = await client.post(
        url, headers=headers, json={"messages": [turn("user", "fine"), turn("wizard", "nope")]}
    )
    assert_problem(refused, 422, "VALIDATION_FAILED")
    assert (await client.get(url, headers=headers)).json()["items"] == []


async def test_cascade_delete_forgets_memories_from_the_thread_only(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    other_thread = await start_thread(client, headers)
    for text, source in (
        ("From the thread", thread_id),
        ("From elsewhere", other_thread),
        ("No provenance", None),
    ):
        body: dict[str, Any] = {"text": text}
        if source:
            body["source_thread_id"] = source
        assert (
            await client.post("/v1/users/me/memories", headers=headers, json=body)
        ).status_code == 201
    plain = await client.delete(f"/v1/users/me/threads/{other_thread}", headers=headers)
    assert plain.status_code == 200 and "memory" not in plain.json()["deleted"]
    cascaded = await client.delete(
        f"/v1/users/me/threads/{thread_id}?cascade=memories", headers=headers
    )
    assert cascaded.status_code == 200
    assert cascaded.json()["deleted"]["memory"] == 1
    remaining = (await client.get("/v1/users/me/memories", headers=headers)).json()["items"]
    assert sorted(m["text"] for m in remaining) == ["From elsewhere", "No provenance"]
    bad = await client.delete(
        f"/v1/users/me/threads/{other_thread}?cascade=everything", headers=headers
    )
    assert_problem(bad, 422, "VALIDATION_FAILED")


async def test_other_users_and_tenants_get_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    owner = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, owner)
    await append(client, owner, thread_id, turn("user", "secret plans"))
    base = f"/v1/users/alice/threads/{thread_id}"
    calls = [
        ("GET", base, None),
        ("PATCH", base, {"title": "x"}),
        ("DELETE", base, None),
        ("GET", f"{base}/messages", None),
        ("POST", f"{base}/messages", {"messages": [turn("user", "planted")]}),
    ]
    bob = bearer(settings, tenant, "bob")
    foreign_service = bearer(settings, new_tenant(), "agent", service=True)
    for headers in (bob, foreign_service):
        for method, url, body in calls:
            assert_problem(
                await client.request(method, url, json=body, headers=headers), 404, "NOT_FOUND"
            )
    assert_problem(await client.get("/v1/users/alice/threads", headers=bob), 404, "NOT_FOUND")
    service = bearer(settings, tenant, "agent", service=True)
    messages = (await client.get(f"{base}/messages", headers=service)).json()["items"]
    assert [m["content"] for m in messages] == ["secret plans"]


@pytest.mark.parametrize("last_seq", [2**53 - 1, 2**63 - 1])
@pytest.mark.parametrize("route", ["messages", "turns"])
async def test_an_append_past_the_last_position_a_thread_holds_is_a_conflict_storing_nothing(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    last_seq: int,
    route: str,
) -> None:
    # No thread the API fills gets there; one imported (or written) so can, and its next
    # position then overflowed `bigint` into a 500.
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    await append(client, headers, thread_id, turn("user", "first"))
    async with owner_engine.begin() as connection:
        await connection.execute(
            sql("UPDATE message SET seq = :seq WHERE tenant_id = :t AND thread_id = :th"),
            {"seq": last_seq, "t": tenant, "th": thread_id},
        )

    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/{route}",
        headers=headers,
        json={"messages": [turn("user", "after the end")]},
    )

    problem = assert_problem(response, 409, "CONFLICT")
    assert "new thread" in problem["detail"]
    listed = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert [m["content"] for m in listed.json()["items"]] == ["first"]
