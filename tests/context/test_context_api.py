"""The context endpoint: the right sections, within budget, explained, and nothing leaked."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import CONTEXT_BUDGET_MIN_TOKENS, Settings
from service.context.service import HEADER, TITLES
from service.kit.token_counting import _load, count_tokens
from tests.conftest import assert_problem, bearer, new_tenant
from tests.db.sent_queries import queries_of
from tests.fixtures.factories import long_conversation, remember_all, start_thread
from tests.fixtures.state import tenant_state
from tests.plans import sent_by_requests, statements_sent


async def context(
    client: AsyncClient, headers: dict[str, str], user: str = "me", **body: Any
) -> dict[str, Any]:
    response = await client.post(f"/v1/users/{user}/context", headers=headers, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def section(result: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in result["sections"] if s["name"] == name), None)


async def test_a_new_user_gets_an_empty_block(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    result = await context(client, bearer(settings, tenant, "nobody-yet"), query="hello")
    assert result["text"] == "" and result["sections"] == [] and result["token_count"] == 0


async def test_sections_render_with_scores_and_ids(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    await remember_all(
        client, admin, {"text": "Support hours are 9 to 17 CET", "category": "policy"}, org=True
    )
    headers = bearer(settings, tenant, "alice", name="Alice")
    facts = await remember_all(
        client,
        headers,
        {"text": "Alice is vegetarian"},
        {"text": "Had dinner at a ramen place in Kyoto", "kind": "episodic"},
    )
    await client.patch(
        "/v1/users/me/profile",
        headers={**headers, "Content-Type": "application/json-patch+json"},
        json=[{"op": "add", "path": "/timezone", "value": "Europe/Lisbon"}],
    )
    await client.put("/v1/org/procedures", headers=admin, json={"style": "Be formal"})
    await client.put("/v1/users/me/procedures", headers=headers, json={"style": "Be brief"})
    result = await context(client, headers, query="what should we eat for dinner")
    text = result["text"]
    assert text.startswith("You have long-term memory")
    assert "## Organization\n• Support hours are 9 to 17 CET" in text
    assert "<memory>\nname: Alice\ntimezone: Europe/Lisbon\n</memory>" in text
    assert "- Style: Be brief" in text and "Be formal" not in text  # the user's slot wins
    assert "• Alice is vegetarian" in text
    assert "\u2013 Had dinner at a ramen place in Kyoto" in text
    fact_item = section(result, "facts")["items"][0]  # type: ignore[index]
    assert fact_item["id"] == facts[0]["id"]
    assert fact_item["scores"]["final_score"] > 0
    assert result["token_count"] == count_tokens(text) <= result["budget_tokens"] == 1200


async def test_budget_is_never_exceeded_and_items_are_whole(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    rng = random.Random(3)
    topics = ["coffee", "travel", "work", "music", "family", "sport"]
    await remember_all(
        client,
        headers,
        *[
            {
                "text": f"{rng.choice(topics)} note {i}: " + " ".join(rng.choices(topics, k=12)),
                "kind": rng.choice(["semantic", "episodic"]),
            }
            for i in range(40)
        ],
    )
    for budget in [CONTEXT_BUDGET_MIN_TOKENS, 80, 100, 120, 200, 333, 500, 900]:
        result = await context(
            client,
            headers,
            query="coffee and travel",
            budget_tokens=budget,
            k_user=10,
            k_episodic=10,
        )
        assert count_tokens(result["text"]) == result["token_count"] <= budget
        for item in (i for s in result["sections"] for i in s["items"]):
            assert item["text"] in result["text"]
        if budget < 120:
            assert sum(result["omitted"].values()) > 0


async def test_org_memory_reaches_every_user_of_the_tenant_but_no_other_tenant(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    await remember_all(client, admin, {"text": "Refunds are accepted within 30 days"}, org=True)
    for user in ("alice", "bob"):
        result = await context(client, bearer(settings, tenant, user), query="refund policy")
        assert "Refunds are accepted within 30 days" in result["text"]
    stranger = await context(client, bearer(settings, new_tenant(), "alice"), query="refund policy")
    assert "Refunds" not in stranger["text"]


async def test_superseded_and_proposed_facts_are_left_out_unless_asked(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    old, _proposed = await remember_all(
        client,
        headers,
        {"text": "Lives in Lisbon"},
        {"text": "Might be moving to Berlin", "lifecycle": "proposed", "needs_review": True},
    )
    await client.patch(
        f"/v1/users/me/memories/{old['id']}", headers=headers, json={"lifecycle": "superseded"}
    )
    plain = await context(client, headers, query="where does she live")
    assert "Lisbon" not in plain["text"] and "Berlin" not in plain["text"]
    asked = await context(client, headers, query="where does she live", include_proposed=True)
    assert "Might be moving to Berlin" in asked["text"] and "Lisbon" not in asked["text"]


async def test_mmr_keeps_near_duplicates_from_filling_the_block(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await remember_all(
        client,
        headers,
        {"text": "Loves Italian food, especially pasta"},
        {"text": "Loves Italian food, pasta above all"},
        {"text": "Really loves Italian food and pasta"},
        {"text": "Enjoys Japanese ramen on cold days"},
    )
    result = await context(
        client, headers, query="favourite food", k_user=2, mmr_lambda=0.3, include=["facts"]
    )
    texts = [i["text"] for i in section(result, "facts")["items"]]  # type: ignore[index]
    assert len(texts) == 2 and any("ramen" in t for t in texts)


async def test_an_episode_repeated_on_many_days_does_not_fill_earlier_episodes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Fourteen runs share the question's word and rank above everything else: the section
    shows one of them and the distinct episodes after them, at the default `mmr_lambda`."""
    headers = bearer(settings, tenant, "gus")
    runs = [
        {
            "text": f"On 2026-{month:02d}-{day:02d} Gus went for a run along the coast.",
            "kind": "episodic",
            "event_at": f"2026-{month:02d}-{day:02d}T08:00:00Z",
        }
        for month in range(1, 8)
        for day in (5, 20)
    ]
    others = [
        {"text": "Gus ran his first 10k race in Porto in 52 minutes.", "kind": "episodic"},
        {"text": "Gus played chess with his neighbour.", "kind": "episodic"},
        {"text": "Gus repainted the kitchen.", "kind": "episodic"},
    ]
    await remember_all(client, headers, *runs, *others)

    result = await context(client, headers, query="running", include=["episodes"])

    shown = [i["text"] for i in section(result, "episodes")["items"]]  # type: ignore[index]
    assert len(shown) == 4
    assert sum("went for a run" in text for text in shown) == 1, shown
    assert "Gus ran his first 10k race in Porto in 52 minutes." in shown


async def test_a_text_an_earlier_section_shows_is_not_shown_again_in_a_later_one(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """An org rule a user fact repeats, a fact an episode repeats (in another case and
    spacing): the first section in the block's order keeps it, and the later one shows the
    memories after the copy instead."""
    admin = bearer(settings, tenant, "root", admin=True)
    await remember_all(
        client,
        admin,
        {"text": "Expense reports are due on the 5th of each month.", "category": "policy"},
        org=True,
    )
    headers = bearer(settings, tenant, "fay")
    await remember_all(
        client,
        headers,
        {"text": "expense reports are  due on the 5th of each month."},
        {"text": "Fay moved to Berlin in March 2026."},
        {"text": "Fay files her expense reports from Berlin."},
        {"text": "Fay moved  to Berlin in March 2026.", "kind": "episodic"},
        {"text": "Fay visited Berlin for a conference in 2024.", "kind": "episodic"},
    )
    for query in ("when are expense reports due?", "when did Fay move to Berlin?"):
        result = await context(client, headers, query=query, k_user=2, k_episodic=1)

        shown = [
            (s["name"], " ".join(i["text"].lower().split()))
            for s in result["sections"]
            for i in s["items"]
        ]
        assert len({text for _, text in shown}) == len(shown), shown
        assert ("org", "expense reports are due on the 5th of each month.") in shown
        assert ("facts", "fay moved to berlin in march 2026.") in shown
        assert [name for name, _ in shown] == ["org", "facts", "facts", "episodes"], shown
        assert "Fay visited Berlin for a conference in 2024." in result["text"]


async def test_include_and_format_shape_the_response(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await remember_all(
        client,
        headers,
        {"text": "Plays the cello"},
        {"text": "Went to a concert", "kind": "episodic"},
    )
    only_facts = await context(client, headers, query="music", include=["facts"], format="json")
    assert only_facts["text"] is None
    assert [s["name"] for s in only_facts["sections"]] == ["facts"]
    text_only = await context(client, headers, query="music", format="text")
    assert text_only["sections"] is None and "Plays the cello" in text_only["text"]


async def test_context_is_read_only(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await remember_all(client, headers, {"text": "Plays the cello"})
    await remember_all(
        client, bearer(settings, tenant, "root", admin=True), {"text": "Open 9-5"}, org=True
    )
    thread_id = await start_thread(client, headers)
    await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": [{"role": "user", "content": "Any concerts soon?"}]},
    )
    before = await tenant_state(owner_engine, tenant)

    result = await context(client, headers, query="music", thread_id=thread_id)

    assert "Plays the cello" in result["text"] and "Any concerts soon?" in result["text"]
    assert await tenant_state(owner_engine, tenant) == before


async def test_other_users_and_tenants_get_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await remember_all(client, bearer(settings, tenant, "alice"), {"text": "Alice's secret"})
    response = await client.post(
        "/v1/users/alice/context", json={"query": "secret"}, headers=bearer(settings, tenant, "bob")
    )
    assert_problem(response, 404, "NOT_FOUND")
    foreign = await client.post(
        "/v1/users/alice/context",
        json={"query": "secret"},
        headers=bearer(settings, new_tenant(), "svc", service=True),
    )
    assert foreign.status_code == 200 and "secret" not in foreign.json()["text"]


async def test_thread_window_is_included_newest_turns_first_when_trimmed(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = (await client.post("/v1/users/me/threads", headers=headers, json={})).json()["id"]
    messages = [
        {"role": role, "content": f"{role} turn {n}: " + "words " * 20}
        for n in range(1, 9)
        for role in ("user", "assistant")
    ]
    await client.post(
        f"/v1/users/me/threads/{thread_id}/messages", headers=headers, json={"messages": messages}
    )
    full = await context(client, headers, query="hi", thread_id=thread_id, budget_tokens=4000)
    recent = section(full, "recent")
    assert recent is not None and len(recent["items"]) == 16
    assert full["summarization"] == "off"
    assert "## Recent messages\nuser: user turn 1" in full["text"]
    trimmed = await context(client, headers, query="hi", thread_id=thread_id, budget_tokens=150)
    kept = [item["text"] for item in section(trimmed, "recent")["items"]]  # type: ignore[index]
    assert 0 < len(kept) < 16
    assert kept[-1].startswith("assistant turn 8")  # the newest survive, in order
    assert trimmed["token_count"] <= 150 and trimmed["omitted"]["recent"] == 16 - len(kept)


async def test_replies_may_be_empty_and_one_with_nothing_visible_is_not_shown(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    tool_call = {"id": "c1", "type": "function", "function": {"name": "ci", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Is the build green?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call]},
        {"role": "tool", "content": "   "},
        {"role": "assistant", "content": " \u200b\n"},
        {"role": "assistant", "content": "Yes, all green."},
    ]
    appended = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages", headers=headers, json={"messages": messages}
    )
    assert appended.status_code == 201, appended.text
    # Stored as sent; only the user's message is a human turn.
    assert [(m["content"], m["label"]) for m in appended.json()["items"]] == [
        (message["content"], "#1" if message["role"] == "user" else None) for message in messages
    ]

    result = await context(client, headers, query="build", thread_id=thread_id)

    recent = section(result, "recent")
    assert recent is not None
    assert [item["text"] for item in recent["items"]] == ["Is the build green?", "Yes, all green."]
    assert "user: Is the build green?\nassistant: Yes, all green." in result["text"]


async def test_a_long_conversation_is_read_only_as_far_back_as_the_block_can_show(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The recent section offers the newest turns whose lines fit the budget; the thread is
    read a page at a time, newest first, and no further back than that."""
    headers = bearer(settings, tenant, "alice")
    thread_id = await long_conversation(client, headers, 300, "turn {n} about the trip")

    with queries_of(app.state.mneme.engine) as sent:
        result = await context(
            client, headers, query="the trip", thread_id=thread_id, budget_tokens=300
        )

    pages = [query for query in sent if "FROM message" in query and "seq DESC" in query]
    assert len(pages) == 1  # 64 turns of ~8 tokens: more than the block's 300
    kept = [item["text"] for item in section(result, "recent")["items"]]  # type: ignore[index]
    numbers = [int(text.split()[1]) for text in kept]
    assert numbers == list(range(300 - len(kept), 300))  # the newest, without a gap
    assert result["token_count"] <= 300
    # The turns read and not shown count as omitted (the 64 of the page read).
    assert result["omitted"]["recent"] == 64 - len(kept)

    everything = await context(
        client, headers, query="the trip", thread_id=thread_id, budget_tokens=32_000
    )
    assert len(section(everything, "recent")["items"]) == 300  # type: ignore[index]


async def test_a_turn_longer_than_half_the_block_is_shown_shortened_never_passed_over(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """A diary pasted between short turns: at every budget the section is the newest turns
    without a gap, and the diary, once reached, is shown by its beginning and its end around
    a marker, in at most half the budget."""
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    diary = (
        "Here is my diary from the summer. "
        + " ".join(
            f"Day {day}: I watered the tomatoes and basil, then read for an hour."
            for day in range(400)
        )
        + " Which of these days was the hottest?"
    )
    messages = [
        {"role": "user", "content": "When should I plant tomatoes?"},
        {"role": "assistant", "content": "Plant them in April."},
        {"role": "user", "content": diary},
        {"role": "assistant", "content": "Noted the diary."},
        {"role": "user", "content": "What about peppers?"},
    ]
    url = f"/v1/users/me/threads/{thread_id}/messages"
    assert (await client.post(url, headers=headers, json={"messages": messages})).is_success
    stored = [m["id"] for m in (await client.get(url, headers=headers)).json()["items"]]

    reached = []
    for budget in range(80, 1300, 40):
        result = await context(
            client, headers, query="peppers", thread_id=thread_id, budget_tokens=budget
        )
        recent = section(result, "recent")
        items = recent["items"] if recent else []
        assert [i["id"] for i in items] == stored[len(stored) - len(items) :], budget
        assert result["token_count"] <= budget
        if len(items) >= 3:
            reached.append(budget)
            shown = items[-3]["text"]
            assert shown.startswith("Here is my diary from the summer.")
            assert shown.endswith("Which of these days was the hottest?")
            assert " tokens of this message not shown …] " in shown
            assert shown in result["text"]
            assert items[-3]["tokens"] <= budget // 2
    # From some budget on, the diary and the turn before it are shown, shortened.
    assert reached and reached[-1] == 1280 and len(items) == 5

    # What the shortened diary leaves out is still found through the memories drawn from it,
    # which a message shown whole would keep out of Earlier episodes.
    await remember_all(
        client,
        headers,
        {
            "text": "Day 200: I watered the tomatoes and basil, then read for an hour.",
            "kind": "episodic",
            "source_thread_id": thread_id,
            "source_message_ids": [stored[2]],
        },
        {
            "text": "What about peppers?",
            "kind": "episodic",
            "source_thread_id": thread_id,
            "source_message_ids": [stored[4]],
        },
    )
    result = await context(
        client, headers, query="what did I do on day 200?", thread_id=thread_id, budget_tokens=1200
    )
    episodes = [i["text"] for i in section(result, "episodes")["items"]]  # type: ignore[index]
    assert episodes == ["Day 200: I watered the tomatoes and basil, then read for an hour."]


async def test_the_newest_turn_is_shown_at_every_budget_that_can_hold_it(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The newest turn is what the next model call answers: it goes into the block before the
    organization's, the profile's and the memories' shares, whatever those hold."""
    admin = bearer(settings, tenant, "root", admin=True)
    headers = bearer(settings, tenant, "alice", name="Alice")
    patch = {"Content-Type": "application/json-patch+json"}
    for path, who, key in (
        ("/v1/org/profile", admin, "office"),
        ("/v1/users/me/profile", headers, "home"),
    ):
        for n in range(4):
            response = await client.patch(
                path,
                headers={**who, **patch},
                json=[{"op": "add", "path": f"/{key}{n}", "value": f"Lisbon, floor {n}"}],
            )
            assert response.status_code == 200, response.text
    await client.put("/v1/org/procedures", headers=admin, json={"style": "Be formal and brief."})
    await remember_all(
        client, admin, *({"text": f"Trips to Japan need form J-{n}."} for n in range(4)), org=True
    )
    await remember_all(
        client,
        headers,
        *({"text": f"Alice visited Japan in 20{n}0."} for n in range(1, 5)),
        *({"text": f"Alice booked a Japan trip {n}.", "kind": "episodic"} for n in range(4)),
    )
    thread_id = await start_thread(client, headers)
    newest = [
        {
            "role": "user",
            "content": "Help me plan restaurants for the Japan trip: " + "sushi, " * 20,
        },
        {"role": "assistant", "content": "Gladly. Which cities will you visit?"},
    ]
    url = f"/v1/users/me/threads/{thread_id}/messages"
    turns = [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi."}]
    response = await client.post(url, headers=headers, json={"messages": [*turns, *newest]})
    assert response.status_code == 201, response.text
    alone = "\n".join(f"{m['role']}: {m['content']}" for m in newest)
    smallest = count_tokens(f"{HEADER}\n\n## {TITLES['recent']}\n{alone}")

    stored = [m["id"] for m in (await client.get(url, headers=headers)).json()["items"]]

    for budget in range(smallest, smallest + 200, 10):
        result = await context(
            client, headers, query="Japan trip", thread_id=thread_id, budget_tokens=budget
        )

        recent = section(result, "recent")
        assert recent is not None, (budget, result["text"])
        assert [i["id"] for i in recent["items"]][-2:] == stored[-2:]
        question, answer = [i["text"] for i in recent["items"]][-2:]
        assert answer == newest[1]["content"]
        # Whole once it fits in half the budget, until then shortened (see the test above).
        assert question == newest[0]["content"] or "not shown …]" in question
        assert result["token_count"] <= budget
    assert question == newest[0]["content"]
    # The other sections take what the turn leaves them.
    assert section(result, "org") is not None and section(result, "facts") is not None


async def test_recent_messages_are_the_newest_whole_turns_without_a_gap_at_every_budget(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Questions and replies of different lengths: a reply that does not fit must not make
    way for the shorter question before it, nor the block open with a reply to a question it
    leaves out."""
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/messages"
    turns = [
        message
        for n in range(12)
        for message in (
            {"role": "user", "content": f"Message {n}: I want to plan a trip to Kyoto, item {n}."},
            {
                "role": "assistant",
                "content": f"Reply {n}: Sure, Kyoto in spring is lovely; cherry blossoms "
                f"around early April. Detail {n}.",
            },
        )
    ]
    assert (await client.post(url, headers=headers, json={"messages": turns})).is_success
    stored = [m["id"] for m in (await client.get(url, headers=headers)).json()["items"]]
    newest = "\n".join(f"{m['role']}: {m['content']}" for m in turns[-2:])
    smallest = count_tokens(f"{HEADER}\n\n## {TITLES['recent']}\n{newest}")

    for budget in range(100, 1001, 10):
        result = await context(
            client,
            headers,
            query="Kyoto trip",
            thread_id=thread_id,
            budget_tokens=budget,
            include=["recent"],
        )
        recent = section(result, "recent")
        shown = [item["id"] for item in recent["items"]] if recent else []
        assert shown == stored[len(stored) - len(shown) :], budget  # the newest, no gap
        assert len(shown) % 2 == 0, budget  # whole turns: it opens with a question
        assert recent is None or recent["items"][0]["kind"] == "message:user", budget
        assert shown or smallest > budget, budget
        assert result["omitted"].get("recent", 0) == len(stored) - len(shown), budget


async def test_turns_read_across_pages_are_shown_whole(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Turns of three messages: the thread's pages (newest first) end inside a turn, whose
    question is on the next page."""
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/messages"
    roles = ("user", "assistant", "assistant")
    messages = [{"role": roles[n % 3], "content": f"turn {n} about the trip"} for n in range(300)]
    for start in range(0, 300, 100):
        batch = {"messages": messages[start : start + 100]}
        assert (await client.post(url, headers=headers, json=batch)).is_success

    for budget in (200, 560, 600, 700, 1200, 32_000):
        result = await context(
            client,
            headers,
            query="the trip",
            thread_id=thread_id,
            budget_tokens=budget,
            include=["recent"],
        )
        kept = [int(item["text"].split()[1]) for item in section(result, "recent")["items"]]  # type: ignore[index]
        assert kept == list(range(300 - len(kept), 300)), budget
        assert kept[0] % 3 == 0, budget  # it opens with a question


async def test_another_users_thread_is_a_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    alice = bearer(settings, tenant, "alice")
    thread_id = (await client.post("/v1/users/me/threads", headers=alice, json={})).json()["id"]
    response = await client.post(
        "/v1/users/me/context",
        headers=bearer(settings, tenant, "bob"),
        json={"query": "hi", "thread_id": thread_id},
    )
    assert_problem(response, 404, "NOT_FOUND")


async def turns_stored_as_episodes(
    client: AsyncClient, headers: dict[str, str], thread_id: str, contents: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The user's turns appended to the thread, and each stored as an episode drawn from it
    (as the write path stores a thread's turns): the messages and the memories."""
    appended = (
        await client.post(
            f"/v1/users/me/threads/{thread_id}/messages",
            headers=headers,
            json={"messages": [{"role": "user", "content": content} for content in contents]},
        )
    ).json()["items"]
    stored = await remember_all(
        client,
        headers,
        *(
            {
                "text": f"user: {message['content']}",
                "kind": "episodic",
                "source_thread_id": thread_id,
                "source_message_ids": [message["id"]],
            }
            for message in appended
        ),
    )
    return appended, stored


async def test_a_threads_own_turns_are_not_repeated_as_earlier_episodes(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The thread's turns stored as episodic memories are in the block once, as messages."""
    headers = bearer(settings, tenant, "alice")
    thread_id = (await client.post("/v1/users/me/threads", headers=headers, json={})).json()["id"]
    turns = ["I adopted a greyhound called Pixel", "Pixel sleeps on the sofa all day"]
    appended, stored = await turns_stored_as_episodes(client, headers, thread_id, turns)
    elsewhere = (await client.post("/v1/users/me/threads", headers=headers, json={})).json()
    outside = (
        await client.post(
            f"/v1/users/me/threads/{elsewhere['id']}/messages",
            headers=headers,
            json={"messages": [{"role": "user", "content": "The park was busy today."}]},
        )
    ).json()["items"][0]["id"]
    stored += await remember_all(
        client,
        headers,
        # From the same thread but also from a message outside it: not a repeat.
        {
            "text": "Walked Pixel the greyhound in the park",
            "kind": "episodic",
            "source_message_ids": [appended[0]["id"], outside],
        },
        {"text": "Took Pixel to the vet last spring", "kind": "episodic"},
    )
    turn_ids = {memory["id"] for memory in stored[:2]}
    query = "what about Pixel the greyhound"

    without_thread = await context(client, headers, query=query, budget_tokens=4000)
    episodes = section(without_thread, "episodes")
    assert episodes is not None
    assert turn_ids <= {item["id"] for item in episodes["items"]}

    with_thread = await context(
        client, headers, query=query, thread_id=thread_id, budget_tokens=4000
    )
    episodes = section(with_thread, "episodes")
    assert episodes is not None
    shown = {item["id"] for item in episodes["items"]}
    assert shown == {stored[2]["id"], stored[3]["id"]}
    recent = section(with_thread, "recent")
    assert recent is not None
    assert [item["text"] for item in recent["items"]] == turns
    assert with_thread["text"].count("sleeps on the sofa") == 1

    # Without the recent turns in the block, the stored turns are the only place they appear.
    no_recent = await context(
        client,
        headers,
        query=query,
        thread_id=thread_id,
        budget_tokens=4000,
        include=["facts", "episodes", "thread"],
    )
    episodes = section(no_recent, "episodes")
    assert episodes is not None and turn_ids <= {item["id"] for item in episodes["items"]}


async def test_the_episodes_left_out_as_shown_turns_leave_the_section_full(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The thread's turns stored as episodes rank first for the question, and the block shows
    the turns themselves: the section is filled from the episodes ranked after them."""
    headers = bearer(settings, tenant, "alice")
    thread_id = (await client.post("/v1/users/me/threads", headers=headers, json={})).json()["id"]
    contents = [f"The greyhound Pixel chased ball number {n} in the park" for n in range(8)]
    await turns_stored_as_episodes(client, headers, thread_id, contents)
    others = await remember_all(
        client,
        headers,
        *({"text": f"Pixel the greyhound met dog {n}", "kind": "episodic"} for n in range(6)),
    )

    result = await context(
        client,
        headers,
        query="Pixel the greyhound in the park",
        thread_id=thread_id,
        budget_tokens=4000,
        k_episodic=4,
    )

    episodes = section(result, "episodes")
    assert episodes is not None and len(episodes["items"]) == 4
    assert {item["id"] for item in episodes["items"]} <= {memory["id"] for memory in others}


async def test_instructions_layer_the_users_slots_over_the_orgs_for_random_slot_sets(
    client: AsyncClient, settings: Settings
) -> None:
    """The context reads both owners' slots in one statement; what it shows must be what the
    two procedure endpoints say, slot by slot (the user's where set, else the org's)."""
    rng = random.Random(15)
    slots = ["style", "workflow", "safety", "task_policies"]
    titles = {"style": "Style", "workflow": "Workflow", "safety": "Safety"}
    titles["task_policies"] = "Task policies"
    for round_ in range(4):
        tenant = new_tenant()
        admin = bearer(settings, tenant, "root", admin=True)
        headers = bearer(settings, tenant, "alice")
        org_slots = {s: f"org {s} rule {round_}" for s in rng.sample(slots, rng.randint(0, 4))}
        user_slots = {s: f"user {s} rule {round_}" for s in rng.sample(slots, rng.randint(0, 4))}
        if org_slots:
            await client.put("/v1/org/procedures", headers=admin, json=org_slots)
        if user_slots:
            await client.put("/v1/users/me/procedures", headers=headers, json=user_slots)
        own = (await client.get("/v1/users/me/procedures", headers=headers)).json()
        org = (await client.get("/v1/org/procedures", headers=headers)).json()
        expected = [
            f"{titles[slot]}: {(own[slot] or org[slot])['text']}"
            for slot in slots
            if own[slot] or org[slot]
        ]
        result = await context(
            client, headers, query="anything", include=["procedures"], budget_tokens=4000
        )
        shown = section(result, "procedures")
        assert ([item["text"] for item in shown["items"]] if shown else []) == expected


async def test_the_orgs_and_the_users_profiles_each_land_in_their_own_section(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """Both profiles are read in one statement; each must still go to its own section, and
    another user's profile to neither."""
    admin = bearer(settings, tenant, "root", admin=True)
    patch = {"Content-Type": "application/json-patch+json"}
    for path, headers, key, value in (
        ("/v1/org/profile", admin, "office", "Lisbon"),
        ("/v1/users/me/profile", bearer(settings, tenant, "alice"), "diet", "vegetarian"),
        ("/v1/users/me/profile", bearer(settings, tenant, "bob"), "diet", "carnivore"),
    ):
        response = await client.patch(
            path,
            headers={**headers, **patch},
            json=[{"op": "add", "path": f"/{key}", "value": value}],
        )
        assert response.status_code == 200, response.text
    alice = bearer(settings, tenant, "alice")

    result = await context(client, alice, query="where do we eat", budget_tokens=4000)

    org, profile = section(result, "org"), section(result, "profile")
    assert org is not None and [i["text"] for i in org["items"]] == ["office: Lisbon"]
    assert profile is not None and [i["text"] for i in profile["items"]] == ["diet: vegetarian"]
    assert "carnivore" not in result["text"]
    only_org = await context(client, alice, query="where do we eat", include=["org"])
    assert [s["name"] for s in only_org["sections"]] == ["org"]


async def test_a_blocks_reads_besides_its_search_go_to_the_driver(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    """The profiles, the account's overlay, the procedures and the thread's window are read on
    every call: on the driver, not through the session (whose execution costs ten times the
    statement)."""
    admin = bearer(settings, tenant, "root", admin=True)
    service = bearer(settings, tenant, "backend", service=True)
    response = await client.put(
        "/v1/users/alice/account", headers=service, json={"name": "Alice", "socials": ["github"]}
    )
    assert response.status_code == 200, response.text
    patch = {"Content-Type": "application/json-patch+json"}
    for path, headers in (("/v1/org/profile", admin), ("/v1/users/alice/profile", service)):
        response = await client.patch(
            path,
            headers={**headers, **patch},
            json=[{"op": "add", "path": "/office", "value": "Lisbon"}],
        )
        assert response.status_code == 200, response.text
    await client.put("/v1/org/procedures", headers=admin, json={"safety": "No medical advice"})
    await client.put("/v1/users/alice/procedures", headers=service, json={"style": "Be brief"})
    alice = bearer(settings, tenant, "alice")  # no claims: the overlay is the stored one
    thread_id = await start_thread(client, alice)
    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=alice,
        json={"messages": [{"role": "user", "content": "Which floor is the office on?"}]},
    )
    assert response.status_code == 201, response.text
    await context(client, alice, query="warm-up", thread_id=thread_id)

    with statements_sent(app.state.mneme.engine) as through_the_session:
        result = await context(
            client, alice, query="where is the office", thread_id=thread_id, budget_tokens=4000
        )

    assert sent_by_requests(through_the_session) == []
    assert "user: Which floor is the office on?" in result["text"]
    assert '<memory>\nname: Alice\nsocials: ["github"]\noffice: Lisbon\n</memory>' in result["text"]
    assert [i["text"] for i in section(result, "org")["items"]] == ["office: Lisbon"]  # type: ignore[index]
    assert "- Style: Be brief" in result["text"] and "- Safety: No medical advice" in result["text"]


async def test_the_answer_names_the_encoding_it_counted_with(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    result = await context(client, bearer(settings, tenant, "alice"), query="hello")
    assert result["encoding"] == "cl100k_base"


@pytest.mark.parametrize("encoding", ["o200k_base", "no-such-encoding"])
async def test_an_encoding_unavailable_offline_is_refused_not_counted_with_another(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    encoding: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An empty tiktoken cache and no network, whatever the machine running the test has.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(
        "tiktoken.load.read_file", lambda blobpath: (_ for _ in ()).throw(OSError("offline"))
    )
    _load.cache_clear()
    try:
        response = await client.post(
            "/v1/users/me/context",
            headers=bearer(settings, tenant, "alice"),
            json={"query": "hello", "encoding": encoding},
        )
    finally:
        _load.cache_clear()
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in problem["errors"]] == [["body", "encoding"]]
    assert encoding in problem["errors"][0]["msg"]


async def test_a_turn_without_user_text_asks_about_its_last_message_with_visible_text(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    await remember_all(
        client,
        headers,
        {"text": "Alice is flying to Lisbon on Friday"},
        {"text": "Alice keeps a tortoise called Shelly"},
    )
    thread_id = await start_thread(client, headers)
    turns = f"/v1/users/me/threads/{thread_id}/turns"
    tool_round = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function"}]},
        {"role": "tool", "content": "Flight TP1351 to Lisbon leaves on Friday at 07:40."},
        {"role": "assistant", "content": "\u200b"},
    ]
    response = await client.post(
        turns, headers=headers, json={"messages": tool_round, "context": {"k_user": 1}}
    )
    assert response.status_code == 201, response.text
    facts = section(response.json()["context"], "facts")
    assert facts is not None
    assert [item["text"] for item in facts["items"]] == ["Alice is flying to Lisbon on Friday"]

    # A turn holding no visible text at all asks nothing: refused, and nothing stored.
    blank = [{"role": "tool", "content": "   "}, {"role": "assistant", "content": "\u2060"}]
    refused = await client.post(turns, headers=headers, json={"messages": blank})
    problem = assert_problem(refused, 422, "VALIDATION_FAILED")
    assert "none of the messages" in problem["detail"]
    assert "user message" not in problem["detail"]
    assert problem["errors"][0]["loc"] == ["body", "context", "query"]
    listed = await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    assert len(listed.json()["items"]) == len(tool_round)


async def test_a_tight_budget_keeps_the_summary_entries_the_block_does_not_show_verbatim(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    url = f"/v1/users/me/threads/{thread_id}/messages"
    turns = [
        message
        for n in range(1, 7)
        for message in (
            {"role": "user", "content": f"question {n} about the trip"},
            {"role": "assistant", "content": f"answer {n} about the trip"},
        )
    ]
    assert (await client.post(url, headers=headers, json={"messages": turns})).is_success
    stored = (await client.get(url, headers=headers)).json()["items"]
    # One summary of all six turns; the five most recent are also raw (the window's buffer),
    # so only the first turn's entry says what Recent messages cannot.
    entries = [
        {
            "question": f"question {n} about the trip",
            "answer": f"answer {n} about the trip",
            "refs": [f"#{n}"],
            "message_ids": [m["id"] for m in stored[2 * n - 2 : 2 * n]],
        }
        for n in range(1, 7)
    ]
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO thread_summary (tenant_id, thread_id, sequence, start_index, "
                "end_index, entries) VALUES (:t, :th, 1, 0, 12, CAST(:entries AS jsonb))"
            ),
            {"t": tenant, "th": thread_id, "entries": json.dumps(entries)},
        )

    squeezed = 0
    for budget in range(120, 400, 20):
        result = await context(
            client,
            headers,
            query="the trip",
            thread_id=thread_id,
            budget_tokens=budget,
            include=["thread", "recent"],
            format="json",
        )
        thread = section(result, "thread")
        recent = section(result, "recent")
        shown = {item["id"] for item in recent["items"]} if recent else set()
        kept = {item["id"] for item in thread["items"]} if thread else set()
        restating = {
            f"summary:1:{n - 1}"
            for n, entry in enumerate(entries, start=1)
            if set(entry["message_ids"]) <= shown
        }
        if kept & restating:
            # An entry that repeats turns shown verbatim is kept only when nothing else is left.
            assert kept >= {f"summary:1:{n}" for n in range(6)} - restating, budget
        if recent and recent["omitted"] and thread and thread["omitted"]:
            squeezed += 1
            assert "summary:1:0" in kept, budget
    assert squeezed
