"""Without an LLM the write path still works: every human turn becomes an episodic memory of
category `turn` (through the durable queue), so search and context find it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from httpx import AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.extraction.turns import TURN_PART_TOKENS
from service.kit.token_counting import count_tokens
from service.main import create_app
from service.threads import service as threads_service
from tests.conftest import bearer
from tests.extraction.conftest import jobs, say, serve, wait_for_passes, write_path_settings
from tests.fixtures.factories import memories, remember, start_thread


@pytest.fixture(scope="module")
async def turns_client(cluster: EmbeddedCluster, settings: Settings) -> AsyncIterator[AsyncClient]:
    async for client in serve(create_app(write_path_settings(cluster))):
        yield client


async def test_each_human_turn_is_stored_as_an_episodic_turn_memory(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(turns_client, headers)
    first, _ = await say(
        turns_client, headers, thread_id, "We adopted a greyhound called Comet.", "Congrats!"
    )
    await wait_for_passes(turns_client, headers, 1)
    # A question nobody answered yet is stored at once: no model waits for the reply here.
    await say(turns_client, headers, thread_id, "Comet loves the beach.", None)
    passes = await wait_for_passes(turns_client, headers, 2)

    assert [(p["mode"], p["from_seq"], p["through_seq"]) for p in reversed(passes)] == [
        ("turns", 0, 1),
        ("turns", 2, 2),
    ]
    turns = await memories(turns_client, headers, kind="episodic", category="turn")
    by_text = {m["text"]: m for m in turns}
    assert set(by_text) == {"We adopted a greyhound called Comet.", "Comet loves the beach."}
    adopted = by_text["We adopted a greyhound called Comet."]
    assert adopted["source_thread_id"] == thread_id
    assert adopted["source_message_ids"] == [first["id"]]
    assert adopted["event_at"] == first["created_at"]
    assert adopted["metadata"] == {"origin": "turn", "seq": 0}
    assert (await jobs(turns_client, headers))["extraction"] == "turns"

    found = await turns_client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": "what is the dog called?"}
    )
    assert found.json()["hits"][0]["memory"]["text"] == "We adopted a greyhound called Comet."
    context = await turns_client.post(
        "/v1/users/me/context", headers=headers, json={"query": "the greyhound"}
    )
    assert "We adopted a greyhound called Comet." in context.json()["text"]


async def test_secrets_in_turns_are_not_stored_and_explicit_writes_still_work(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(turns_client, headers)
    await say(turns_client, headers, thread_id, "my key is sk-abcdefghijklmnopqrstuvwxyz123")
    await say(turns_client, headers, thread_id, "I water the plants on Sundays.")
    passes = await wait_for_passes(turns_client, headers, 1)
    assert sum(p["dropped"].get("secret", 0) for p in passes) == 1
    assert [m["text"] for m in await memories(turns_client, headers)] == [
        "I water the plants on Sundays."
    ]
    written = await remember(turns_client, headers, text="User prefers tea.")
    assert written["duplicate"] is False


async def test_the_parts_of_a_pasted_log_fit_the_context_blocks_share_for_episodes(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A pasted log stored as turn memories: its parts are what the question is about, and
    a block without the thread, at a modest budget, shows some of them as Earlier episodes."""
    headers = bearer(settings, tenant, "ada")
    await remember(
        turns_client, headers, text="Ada moved to Lisbon in October 2026.", kind="episodic"
    )
    thread_id = await start_thread(turns_client, headers)
    log = "Here is the log:\n" + "\n".join(
        f"2026-12-07 10:{n % 60:02d}:00 ERROR worker-{n} failed to connect to db "
        f"host{n}.example.internal: timeout after 30s"
        for n in range(400)
    )
    [message] = await say(turns_client, headers, thread_id, log, None)
    await wait_for_passes(turns_client, headers, 1)

    response = await turns_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "why are the workers failing?", "budget_tokens": 500},
    )

    block = response.json()
    [episodes] = [s for s in block["sections"] if s["name"] == "episodes"]
    parts = [item for item in episodes["items"] if item["text"] in log]
    assert len(parts) >= 2, block["text"]
    assert block["token_count"] > 250  # most of the budget, where no part fitted before
    listed = await memories(turns_client, headers, kind="episodic", category="turn", limit=200)
    assert all(m["source_message_ids"] == [message["id"]] for m in listed)


async def test_a_turn_keeps_its_authors_name_as_the_memorys_speaker(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(turns_client, headers)
    response = await turns_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "name": "  Ada ", "content": "I signed up for the marathon."},
                {"role": "user", "content": "My knee hurts after running."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    assert [m["name"] for m in response.json()["items"]] == ["Ada", None]
    await wait_for_passes(turns_client, headers, 1)
    turns = await memories(turns_client, headers, kind="episodic", category="turn")
    assert {m["text"]: m["speaker"] for m in turns} == {
        "I signed up for the marathon.": "Ada",
        "My knee hurts after running.": None,
    }


async def test_an_authors_name_that_looks_like_a_secret_is_not_remembered_with_the_turn(
    turns_client: AsyncClient, settings: Settings, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An append refuses such a name now; a message stored before it did still holds one.
    monkeypatch.setattr(threads_service, "refuse_message_secrets", lambda messages: None)
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(turns_client, headers)
    response = await turns_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "name": "SSN 123-45-6789", "content": "I run on Mondays."},
                {"role": "user", "name": "Ada", "content": "I swim on Fridays."},
            ]
        },
    )
    assert response.status_code == 201, response.text

    # The pass completes (the API would refuse such a speaker, which failed it for good).
    passes = await wait_for_passes(turns_client, headers, 1)

    assert passes[0]["through_seq"] == 1
    turns = await memories(turns_client, headers, kind="episodic", category="turn")
    assert {m["text"]: m["speaker"] for m in turns} == {
        "I run on Mondays.": None,
        "I swim on Fridays.": "Ada",
    }


async def test_a_turn_said_again_in_another_thread_is_its_source_too_and_outlives_the_first(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    first_thread = await start_thread(turns_client, headers)
    [first] = await say(turns_client, headers, first_thread, "ok thanks", None)
    await wait_for_passes(turns_client, headers, 1)
    second_thread = await start_thread(turns_client, headers)
    [again] = await say(turns_client, headers, second_thread, "ok thanks", None)
    [latest, _] = await wait_for_passes(turns_client, headers, 2)

    # One memory for the text (a live memory's text is unique), with both turns as sources.
    assert latest["reconfirmed"] == 1 and latest["written"] == []
    [turn] = await memories(turns_client, headers, kind="episodic", category="turn")
    assert turn["source_thread_id"] == first_thread
    assert turn["source_message_ids"] == [first["id"], again["id"]]
    events = await turns_client.get(f"/v1/users/me/memories/{turn['id']}/history", headers=headers)
    [reconfirmed] = [e for e in events.json()["items"] if e["action"] == "update"]
    assert reconfirmed["changes"]["reason"] == "reconfirmed"
    assert reconfirmed["changes"]["source_message_ids_added"] == [again["id"]]

    # Forgetting the first thread's memories keeps the one the second thread still says.
    deleted = await turns_client.delete(
        f"/v1/users/me/threads/{first_thread}?cascade=memories", headers=headers
    )
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["deleted"]["memory"] == 0
    [kept] = await memories(turns_client, headers, kind="episodic", category="turn")
    assert kept["id"] == turn["id"]
    assert kept["source_thread_id"] == second_thread
    assert kept["source_message_ids"] == [again["id"]]

    # Forgetting the second one too leaves it no source: it goes.
    deleted = await turns_client.delete(
        f"/v1/users/me/threads/{second_thread}?cascade=memories", headers=headers
    )
    assert deleted.json()["deleted"]["memory"] == 1
    assert await memories(turns_client, headers, kind="episodic", category="turn") == []


async def test_a_message_longer_than_a_part_is_stored_whole_in_parts_cut_between_sentences(
    turns_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(turns_client, headers)
    diary = "Here is my diary, please remember it. " + " ".join(
        f"Day {day}: I watered the tomatoes and basil, then read for an hour." for day in range(400)
    )
    [message] = await say(turns_client, headers, thread_id, diary, None)
    await say(
        turns_client,
        headers,
        thread_id,
        "my key is sk-abcdefghijklmnopqrstuvwxyz123 " + diary,
        None,
    )
    passes = await wait_for_passes(turns_client, headers, 1)

    parts = sorted(
        await memories(turns_client, headers, kind="episodic", category="turn", limit=200),
        key=lambda memory: memory["event_at"],
    )
    # Every word of the message is in a part, none cut: each part but the last ends a
    # sentence, and together they are the message. Each part fits the share Earlier episodes
    # gets of the default budget, and is at least half of it.
    assert " ".join(part["text"] for part in parts) == diary
    assert all(count_tokens(part["text"]) <= TURN_PART_TOKENS for part in parts)
    assert all(count_tokens(part["text"]) > TURN_PART_TOKENS // 2 for part in parts[:-1])
    assert all(part["text"].endswith("for an hour.") for part in parts)
    for number, part in enumerate(parts, start=1):
        assert part["source_message_ids"] == [message["id"]]
        assert part["metadata"] == {
            "origin": "turn",
            "seq": 0,
            "part": number,
            "parts": len(parts),
        }
    # A secret anywhere in a long message keeps all of it out, not only the part holding it.
    assert sum(p["dropped"].get("secret", 0) for p in passes) == 1

    found = await turns_client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        json={"query": "Day 350", "mode": "lexical", "limit": 1},
    )
    [hit] = found.json()["hits"]
    assert "Day 350: I watered the tomatoes" in hit["memory"]["text"]
