"""Facts that stay true, through the API and the worker, with a model that never names the fact
it replaces (`omit_supersedes`): the resolver finds contradictions itself, never lets an
unrelated or weakly related extracted fact replace one the user wrote on purpose, and makes
re-confirmation visible."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from httpx import AsyncClient

from service.config import Settings
from service.extraction import pipeline
from service.threads import service as threads_service
from tests.conftest import bearer
from tests.extraction.conftest import fact, say, wait_for_passes
from tests.fixtures.factories import memories, remember, remember_texts, start_thread
from tests.fixtures.openai_server import (
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    ScriptedExtraction,
    extraction,
    new_user_messages,
)

HOME = [
    ("I live in Lisbon", [fact("User lives in Lisbon.", subject="home_city")]),
    ("moved to Porto", [fact("User lives in Porto.", subject="home_city")]),
]


async def get(client: AsyncClient, headers: dict[str, str], memory_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def history(client: AsyncClient, headers: dict[str, str], memory_id: str) -> list[Any]:
    response = await client.get(f"/v1/users/me/memories/{memory_id}/history", headers=headers)
    assert response.status_code == 200, response.text
    events: list[Any] = response.json()["items"]
    return events


async def test_a_move_supersedes_the_old_home_though_the_model_names_no_fact(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(HOME)
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I live in Lisbon.")
    await wait_for_passes(llm_client, headers, 1)
    moved, _ = await say(llm_client, headers, thread_id, "Actually I moved to Porto last month.")
    [latest, _] = await wait_for_passes(llm_client, headers, 2)

    [porto] = await memories(llm_client, headers, kind="semantic")
    assert porto["text"] == "User lives in Porto." and porto["lifecycle"] == "confirmed"
    [lisbon] = [
        m
        for m in await memories(llm_client, headers, kind="semantic", lifecycle="superseded")
        if m["text"] == "User lives in Lisbon."
    ]
    assert lisbon["superseded_by"] == porto["id"]
    # Invalid from when the user said so, not from when the pass ran.
    assert datetime.fromisoformat(lisbon["invalid_at"]) == datetime.fromisoformat(
        moved["created_at"]
    )
    [*_, supersede] = await history(llm_client, headers, lisbon["id"])
    assert supersede["action"] == "supersede"
    assert supersede["changes"]["reason"] == "subject"
    assert latest["superseded"] == 1
    response = await llm_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "Where does the user live?", "format": "text"},
    )
    block = response.json()["text"]
    assert "Porto" in block and "Lisbon" not in block


async def test_an_unrelated_preference_never_replaces_one_set_through_the_api(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    metric = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User prefers metric units.",
        category="preference",
    )
    fresh_llm.reply = ScriptedExtraction(
        [("dark mode", [fact("User prefers dark mode.", category="preference")])]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I prefer dark mode.")
    [finished] = await wait_for_passes(llm_client, headers, 1)

    live = {m["text"]: m for m in await memories(llm_client, headers, kind="semantic")}
    assert set(live) == {"User prefers metric units.", "User prefers dark mode."}
    assert (await get(llm_client, headers, metric["id"]))["lifecycle"] == "confirmed"
    assert live["User prefers dark mode."]["lifecycle"] == "confirmed"
    assert finished["superseded"] == 0 and finished["flagged"] == 0


async def test_a_fact_falls_to_its_own_subject_however_many_facts_lie_nearer(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # The resolver reads, of the new fact's category, only the facts it may act on: its
    # nearest, its repeats, and those of its subject. This one is none of the nearest (six
    # facts of another category lie nearer, cosine 0.69-0.90 to the new fact against 0.66),
    # nor similar, and its subject was written unnormalised through the API.
    headers = bearer(settings, tenant, "alex")
    lisbon = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User's home base is Lisbon.",
        category="context",
        metadata={"subject": "Home City"},
    )
    nearer = [
        "User often visits Porto for work.",
        "User loves the food in Porto.",
        "User plans a trip to Porto in May.",
        "User has friends who live in Porto.",
        "User is learning Portuguese in Porto.",
        "User's sister lives in Porto.",
    ]
    await remember_texts(llm_client, headers, nearer, kind="semantic", category="goal")
    fresh_llm.reply = ScriptedExtraction(
        [("Porto", [fact("User lives in Porto.", subject="home_city")])]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I moved to Porto.")
    [finished] = await wait_for_passes(llm_client, headers, 1)

    superseded = await get(llm_client, headers, lisbon["id"])
    [porto] = await memories(llm_client, headers, kind="semantic", category="context")
    assert porto["text"] == "User lives in Porto."
    assert (superseded["lifecycle"], superseded["superseded_by"]) == ("superseded", porto["id"])
    assert finished["superseded"] == 1 and finished["flagged"] == 0


async def test_a_subject_in_camel_case_supersedes_the_same_subject_in_snake_case(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            ("Braga", [fact("User lives in Braga.", subject="home_city")]),
            ("Faro", [fact("User lives in Faro.", subject="homeCity")]),
        ]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I live in Braga.")
    await wait_for_passes(llm_client, headers, 1)
    await say(llm_client, headers, thread_id, "I moved to Faro.")
    [latest, _] = await wait_for_passes(llm_client, headers, 2)

    [faro] = await memories(llm_client, headers, kind="semantic")
    assert faro["text"] == "User lives in Faro."
    assert faro["metadata"]["subject"] == "home_city"
    [braga] = await memories(llm_client, headers, kind="semantic", lifecycle="superseded")
    assert braga["text"] == "User lives in Braga." and braga["superseded_by"] == faro["id"]
    assert latest["superseded"] == 1


async def test_the_answer_language_is_replaced_while_languages_spoken_add_up(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")

    def answers(language: str) -> dict[str, Any]:
        return fact(
            f"User wants answers in {language}.",
            category="preference",
            subject="response_language",
        )

    def speaks(language: str) -> dict[str, Any]:
        return fact(f"User speaks {language}.", subject="languages_spoken")

    fresh_llm.reply = ScriptedExtraction(
        [
            ("in English", [answers("English"), speaks("Portuguese")]),
            ("in German", [answers("German"), speaks("Spanish")]),
        ]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "Answer in English please; I speak Portuguese.")
    await wait_for_passes(llm_client, headers, 1)
    await say(llm_client, headers, thread_id, "From now on answer in German; I speak Spanish.")
    [latest, _] = await wait_for_passes(llm_client, headers, 2)

    live = {m["text"] for m in await memories(llm_client, headers, kind="semantic")}
    assert live == {
        "User wants answers in German.",
        "User speaks Portuguese.",
        "User speaks Spanish.",
    }
    [english] = await memories(llm_client, headers, kind="semantic", lifecycle="superseded")
    assert english["text"] == "User wants answers in English."
    assert latest["superseded"] == 1


async def test_a_deliberate_fact_contradicted_on_weak_evidence_is_only_flagged(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    metric = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User prefers metric units.",
        category="preference",
    )
    fresh_llm.reply = ScriptedExtraction(
        [("imperial", [fact("User prefers imperial units.", category="preference")])]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "These days I prefer imperial units.")
    [finished] = await wait_for_passes(llm_client, headers, 1)

    assert (await get(llm_client, headers, metric["id"]))["lifecycle"] == "confirmed"
    [imperial] = [
        m
        for m in await memories(llm_client, headers, kind="semantic", lifecycle="proposed")
        if m["text"] == "User prefers imperial units."
    ]
    assert imperial["needs_review"]
    assert imperial["metadata"]["proposed_supersedes"] == [metric["id"]]
    assert imperial["metadata"]["review_reason"] == "contradicts_deliberate_fact"
    assert finished["flagged"] == 1 and finished["superseded"] == 0


async def test_confirming_a_flagged_fact_supersedes_what_it_contradicts_and_rejecting_it_does_not(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    metric = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User prefers metric units.",
        category="preference",
    )
    fresh_llm.reply = ScriptedExtraction(
        [
            ("imperial", [fact("User prefers imperial units.", category="preference")]),
            ("Fahrenheit", [fact("User prefers imperial units now.", category="preference")]),
        ]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)

    async def flagged_after(words: str, passes: int) -> tuple[dict[str, Any], dict[str, Any]]:
        said, _ = await say(llm_client, headers, thread_id, words)
        [finished, *_] = await wait_for_passes(llm_client, headers, passes)
        assert finished["flagged"] == 1
        [proposed] = await memories(llm_client, headers, kind="semantic", lifecycle="proposed")
        assert proposed["metadata"]["proposed_supersedes"] == [metric["id"]]
        return said, proposed

    # Rejected: the flagged fact goes, the fact it contradicts stays as it was.
    _, rejected = await flagged_after("These days I prefer imperial units.", 1)
    response = await llm_client.delete(f"/v1/users/me/memories/{rejected['id']}", headers=headers)
    assert response.status_code == 204, response.text
    kept = await get(llm_client, headers, metric["id"])
    assert (kept["lifecycle"], kept["updated_at"]) == ("confirmed", metric["updated_at"])

    # Confirmed: the flagged fact replaces it, as the write path supersedes.
    said, proposed = await flagged_after("I think in Fahrenheit and miles now.", 2)
    response = await llm_client.patch(
        f"/v1/users/me/memories/{proposed['id']}",
        headers=headers,
        json={"lifecycle": "confirmed"},
    )
    assert response.status_code == 200, response.text
    confirmed = response.json()
    assert (confirmed["lifecycle"], confirmed["needs_review"]) == ("confirmed", False)
    assert "proposed_supersedes" not in confirmed["metadata"]
    assert "review_reason" not in confirmed["metadata"]
    superseded = await get(llm_client, headers, metric["id"])
    assert (superseded["lifecycle"], superseded["superseded_by"]) == ("superseded", proposed["id"])
    # Invalid from when the user said so, not from when the reviewer confirmed it.
    assert datetime.fromisoformat(superseded["invalid_at"]) == datetime.fromisoformat(
        said["created_at"]
    )
    [*_, supersede] = await history(llm_client, headers, metric["id"])
    assert supersede["action"] == "supersede"
    assert supersede["changes"]["reason"] == "confirmed"
    assert supersede["changes"]["superseded_by"] == proposed["id"]
    live = await memories(llm_client, headers, kind="semantic")
    assert [m["text"] for m in live] == ["User prefers imperial units now."]
    response = await llm_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "Which units does the user prefer?", "format": "text"},
    )
    block = response.json()["text"]
    assert "imperial" in block and "metric" not in block


async def test_a_flagged_fact_said_again_waits_for_the_user(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    metric = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User prefers metric units.",
        category="preference",
    )
    fresh_llm.reply = ScriptedExtraction(
        [("imperial", [fact("User prefers imperial units.", category="preference")])]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "These days I prefer imperial units.")
    await wait_for_passes(llm_client, headers, 1)
    await say(llm_client, headers, thread_id, "Yes, imperial units for me.")
    [latest, _] = await wait_for_passes(llm_client, headers, 2)

    assert latest["reconfirmed"] == 1
    [imperial] = await memories(llm_client, headers, kind="semantic", lifecycle="proposed")
    assert imperial["text"] == "User prefers imperial units." and imperial["needs_review"]
    assert imperial["metadata"]["proposed_supersedes"] == [metric["id"]]
    [current] = await memories(llm_client, headers, kind="semantic", lifecycle="confirmed")
    assert current["id"] == metric["id"]


async def test_a_proposed_fact_confirmed_by_a_confident_repeat_replaces_what_it_names(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Proposed for its low confidence alone, naming the home it would replace: said again
    # with confidence, it is confirmed and replaces that home, as a reviewer's confirmation
    # would.
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            ("live in Lisbon", [fact("User lives in Lisbon.", subject="home_city")]),
            (
                "moving to Porto",
                [
                    fact(
                        "User lives in Porto.",
                        subject="home_city",
                        confidence=0.75,
                        supersedes=["Lisbon"],
                    )
                ],
            ),
            ("live in Porto", [fact("User lives in Porto.", subject="home_city")]),
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I live in Lisbon.")
    await wait_for_passes(llm_client, headers, 1)
    await say(llm_client, headers, thread_id, "We might be moving to Porto soon.")
    await wait_for_passes(llm_client, headers, 2)
    [lisbon] = await memories(llm_client, headers, kind="semantic", lifecycle="confirmed")
    [proposed] = await memories(llm_client, headers, kind="semantic", lifecycle="proposed")
    assert proposed["metadata"]["proposed_supersedes"] == [lisbon["id"]]
    said, _ = await say(llm_client, headers, thread_id, "Done: I live in Porto now.")
    [latest, *_] = await wait_for_passes(llm_client, headers, 3)

    porto = await get(llm_client, headers, proposed["id"])
    assert (porto["lifecycle"], porto["needs_review"]) == ("confirmed", False)
    assert "proposed_supersedes" not in porto["metadata"]
    replaced = await get(llm_client, headers, lisbon["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    # As a reviewer's confirmation: invalid from the newest message the fact was taken from.
    assert datetime.fromisoformat(replaced["invalid_at"]) == datetime.fromisoformat(
        said["created_at"]
    )
    [*_, supersede] = await history(llm_client, headers, lisbon["id"])
    assert (supersede["action"], supersede["changes"]["reason"]) == ("supersede", "confirmed")
    assert (latest["reconfirmed"], latest["superseded"]) == (1, 1)
    assert [m["id"] for m in await memories(llm_client, headers, kind="semantic")] == [porto["id"]]


# A tentative move the model gives with low confidence and, as real models often do, without
# naming the home it would replace (`omit_supersedes`).
TENTATIVE_MOVE = [
    ("I live in Lisbon", [fact("User lives in Lisbon.", subject="home_city")]),
    ("be in Porto", [fact("User lives in Porto.", subject="home_city", confidence=0.75)]),
    ("live in Porto", [fact("User lives in Porto.", subject="home_city")]),
]


async def propose_a_tentative_move(
    client: AsyncClient, server: FakeOpenAIServer, headers: dict[str, str]
) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Lisbon said, then Porto proposed for its low confidence: the thread, the message that
    proposed Porto, and the Lisbon and Porto facts as listed then."""
    server.reply = ScriptedExtraction(TENTATIVE_MOVE)
    server.omit_supersedes = True
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I live in Lisbon.")
    await wait_for_passes(client, headers, 1)
    said, _ = await say(client, headers, thread_id, "Maybe I'll be in Porto now, not sure.")
    [finished, _] = await wait_for_passes(client, headers, 2)
    assert (finished["superseded"], finished["flagged"]) == (0, 0)
    [lisbon] = await memories(client, headers, kind="semantic", lifecycle="confirmed")
    [porto] = await memories(client, headers, kind="semantic", lifecycle="proposed")
    assert lisbon["text"] == "User lives in Lisbon."
    assert (porto["text"], porto["needs_review"]) == ("User lives in Porto.", True)
    # The home it would replace, found by its subject though the model named none.
    assert porto["metadata"]["proposed_supersedes"] == [lisbon["id"]]
    assert "review_reason" not in porto["metadata"]
    return thread_id, said, lisbon, porto


async def assert_only_porto_is_current(client: AsyncClient, headers: dict[str, str]) -> None:
    live = await memories(client, headers, kind="semantic")
    assert [m["text"] for m in live] == ["User lives in Porto."]
    response = await client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "Where does the user live?", "format": "text"},
    )
    block = response.json()["text"]
    assert "Porto" in block and "Lisbon" not in block


async def test_a_tentative_move_naming_no_fact_replaces_the_old_home_once_the_user_confirms_it(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    _, said, lisbon, porto = await propose_a_tentative_move(llm_client, fresh_llm, headers)

    response = await llm_client.patch(
        f"/v1/users/me/memories/{porto['id']}", headers=headers, json={"lifecycle": "confirmed"}
    )
    assert response.status_code == 200, response.text
    confirmed = response.json()
    assert (confirmed["lifecycle"], confirmed["needs_review"]) == ("confirmed", False)
    assert "proposed_supersedes" not in confirmed["metadata"]
    replaced = await get(llm_client, headers, lisbon["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    # Invalid from when the user said so, not from when the user confirmed it.
    assert datetime.fromisoformat(replaced["invalid_at"]) == datetime.fromisoformat(
        said["created_at"]
    )
    events = await history(llm_client, headers, lisbon["id"])
    assert [e["action"] for e in events] == ["add", "supersede"]
    assert events[1]["changes"]["reason"] == "confirmed"
    assert events[1]["changes"]["superseded_by"] == porto["id"]
    await assert_only_porto_is_current(llm_client, headers)


async def test_a_tentative_move_naming_no_fact_replaces_the_old_home_once_said_with_confidence(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    thread_id, _, lisbon, porto = await propose_a_tentative_move(llm_client, fresh_llm, headers)

    said, _ = await say(llm_client, headers, thread_id, "Yes, I live in Porto now.")
    [latest, *_] = await wait_for_passes(llm_client, headers, 3)

    assert (latest["reconfirmed"], latest["superseded"]) == (1, 1)
    confirmed = await get(llm_client, headers, porto["id"])
    assert (confirmed["lifecycle"], confirmed["needs_review"]) == ("confirmed", False)
    assert "proposed_supersedes" not in confirmed["metadata"]
    replaced = await get(llm_client, headers, lisbon["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    assert datetime.fromisoformat(replaced["invalid_at"]) == datetime.fromisoformat(
        said["created_at"]
    )
    events = await history(llm_client, headers, lisbon["id"])
    assert [e["action"] for e in events] == ["add", "supersede"]
    assert events[1]["changes"]["reason"] == "confirmed"
    await assert_only_porto_is_current(llm_client, headers)


async def test_confirming_a_tentative_move_leaves_a_home_no_longer_current_as_it_is(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # The user retires the old home themselves before the move is confirmed, by a PATCH for
    # one user and by a confident repeat for the other: neither confirmation changes it again.
    for user, by_repeat in (("alex", False), ("sam", True)):
        headers = bearer(settings, tenant, user)
        thread_id, _, lisbon, porto = await propose_a_tentative_move(llm_client, fresh_llm, headers)
        response = await llm_client.patch(
            f"/v1/users/me/memories/{lisbon['id']}",
            headers=headers,
            json={"lifecycle": "superseded"},
        )
        assert response.status_code == 200, response.text
        retired = response.json()
        before = await history(llm_client, headers, lisbon["id"])

        if by_repeat:
            await say(llm_client, headers, thread_id, "Yes, I live in Porto now.")
            [latest, *_] = await wait_for_passes(llm_client, headers, 3)
            assert (latest["reconfirmed"], latest["superseded"]) == (1, 0)
        else:
            response = await llm_client.patch(
                f"/v1/users/me/memories/{porto['id']}",
                headers=headers,
                json={"lifecycle": "confirmed"},
            )
            assert response.status_code == 200, response.text
        assert (await get(llm_client, headers, porto["id"]))["lifecycle"] == "confirmed"
        assert await get(llm_client, headers, lisbon["id"]) == retired
        assert await history(llm_client, headers, lisbon["id"]) == before


async def test_a_tentative_move_said_after_the_home_in_one_pass_would_replace_it(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Both turns arrive in one append, so one pass reads them: the proposal names the home the
    # same pass wrote for the turn before it, as a pass of its own would have.
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                "in Lisbon",
                [fact("User lives in Lisbon.", subject="home_city", evidence="in Lisbon")],
            ),
            (
                "be in Porto",
                [
                    fact(
                        "User lives in Porto.",
                        subject="home_city",
                        confidence=0.75,
                        evidence="be in Porto",
                    )
                ],
            ),
        ]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    response = await llm_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": "Hello, I live in Lisbon at the moment."},
                {"role": "assistant", "content": "Nice city."},
                {"role": "user", "content": "Maybe I'll be in Porto soon, not sure."},
                {"role": "assistant", "content": "Keep me posted."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    said = response.json()["items"][2]
    await wait_for_passes(llm_client, headers, 1)
    [lisbon] = await memories(llm_client, headers, kind="semantic", lifecycle="confirmed")
    [porto] = await memories(llm_client, headers, kind="semantic", lifecycle="proposed")
    assert lisbon["text"] == "User lives in Lisbon."
    assert porto["metadata"]["proposed_supersedes"] == [lisbon["id"]]

    response = await llm_client.patch(
        f"/v1/users/me/memories/{porto['id']}", headers=headers, json={"lifecycle": "confirmed"}
    )
    assert response.status_code == 200, response.text
    replaced = await get(llm_client, headers, lisbon["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    assert datetime.fromisoformat(replaced["invalid_at"]) == datetime.fromisoformat(
        said["created_at"]
    )
    await assert_only_porto_is_current(llm_client, headers)


async def test_a_fact_set_after_the_message_that_replaces_it_is_not_invalid_before_it_was_set(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # The pass over "I moved to Porto." waits for the model while the user sets their home
    # through the API. The new home replaces it by its subject, but a fact without an event
    # time began when it was recorded: it stops being true then at the earliest, not at the
    # older message (an interval that would end before it starts).
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [("Porto", [fact("User lives in Porto.", subject="home_city")])]
    )
    fresh_llm.omit_supersedes = True
    fresh_llm.hold_back()
    thread_id = await start_thread(llm_client, headers)
    moved, _ = await say(llm_client, headers, thread_id, "I moved to Porto.")
    lisbon = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User lives in Lisbon.",
        category="context",
        metadata={"subject": "home_city"},
    )
    fresh_llm.release()
    [finished] = await wait_for_passes(llm_client, headers, 1)

    [porto] = await memories(llm_client, headers, kind="semantic")
    replaced = await get(llm_client, headers, lisbon["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    set_at = datetime.fromisoformat(lisbon["created_at"])
    assert datetime.fromisoformat(moved["created_at"]) < set_at
    assert datetime.fromisoformat(replaced["invalid_at"]) == set_at
    [*_, supersede] = await history(llm_client, headers, lisbon["id"])
    assert datetime.fromisoformat(supersede["changes"]["invalid_at"]) == set_at
    assert finished["superseded"] == 1


async def test_a_fact_that_became_true_after_the_message_replacing_it_ends_when_it_began(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # A fact's own start is its event time when it has one (when it became true).
    headers = bearer(settings, tenant, "alex")
    starts = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    acme = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User works at Acme.",
        category="context",
        event_at=starts.isoformat(),
        metadata={"subject": "employer"},
    )
    fresh_llm.reply = ScriptedExtraction(
        [("Initech", [fact("User works at Initech.", subject="employer")])]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I work at Initech.")
    await wait_for_passes(llm_client, headers, 1)

    replaced = await get(llm_client, headers, acme["id"])
    assert replaced["lifecycle"] == "superseded"
    assert datetime.fromisoformat(replaced["invalid_at"]) == starts


async def test_a_repeated_fact_is_reconfirmed_visibly(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [("vegetarian", [fact("User is vegetarian.", evidence="vegetarian")])]
    )
    thread_id = await start_thread(llm_client, headers)
    first, _ = await say(llm_client, headers, thread_id, "I'm vegetarian.")
    await wait_for_passes(llm_client, headers, 1)
    [written] = await memories(llm_client, headers, kind="semantic")
    again, _ = await say(llm_client, headers, thread_id, "As I said, I'm vegetarian.")
    [latest, _] = await wait_for_passes(llm_client, headers, 2)

    [repeated] = await memories(llm_client, headers, kind="semantic")
    assert repeated["id"] == written["id"] and latest["reconfirmed"] == 1
    assert repeated["last_confirmed_at"] > written["last_confirmed_at"]
    assert repeated["source_message_ids"] == [first["id"], again["id"]]
    [*_, event] = await history(llm_client, headers, repeated["id"])
    assert (event["action"], event["changes"]["reason"]) == ("update", "reconfirmed")
    assert event["changes"]["source_message_ids_added"] == [again["id"]]


async def test_a_subject_that_looks_like_a_secret_is_left_out_and_the_fact_kept(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [("new card", [fact("User got a new payment card.", subject="card 4111111111111111")])]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I got a new card today.")
    # The pass completes: kept, the subject would make the API refuse the memory's metadata,
    # which failed the pass for good and lost every fact of its window.
    [finished] = await wait_for_passes(llm_client, headers, 1)
    [card] = await memories(llm_client, headers, kind="semantic")
    assert finished["written"] == [card["id"]]
    assert card["text"] == "User got a new payment card."
    assert card["metadata"]["subject"] is None


async def test_a_fact_the_api_refuses_is_left_out_and_the_pass_writes_the_others(
    llm_client: AsyncClient,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A rule the resolver does not check before writing (here: the names', switched off)
    # refuses one fact: that fact is dropped and counted, the other fact of the window written.
    monkeypatch.setattr(pipeline, "remembered_name", lambda name: name)
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                "new card",
                [
                    fact("User got a new payment card.", subject="card 4111111111111111"),
                    fact("User banks with a credit union.", subject="bank"),
                ],
            )
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I got a new card today from my credit union.")
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert finished["dropped"] == {"refused": 1}
    assert [m["text"] for m in await memories(llm_client, headers, kind="semantic")] == [
        "User banks with a credit union."
    ]


async def test_an_episode_the_api_refuses_is_left_out_and_the_pass_keeps_its_facts(
    llm_client: AsyncClient,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The episode's text check switched off: the API's own rules refuse the episode when it is
    # written. Refused, it is dropped and counted; the window's fact is still written.
    monkeypatch.setattr(pipeline, "resolve_episode", lambda text: (text, None))
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = lambda request: extraction(
        [fact("User banks with a credit union.", subject="bank")],
        episode="Alex read out the card 4111 1111 1111 1111 to pay.",
    )
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I bank with a credit union.")
    [finished] = await wait_for_passes(llm_client, headers, 1)
    assert finished["dropped"] == {"episode:refused": 1}
    [bank] = await memories(llm_client, headers, kind="semantic")
    assert bank["text"] == "User banks with a credit union."
    assert finished["written"] == [bank["id"]]
    assert await memories(llm_client, headers, kind="episodic") == []


async def test_a_proposal_holding_a_nul_is_refused_alone_and_the_thread_moves_on(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Postgres text holds no NUL, and the API refuses one (422 `nul_character`). Written, one
    # fact, episode or profile value holding it failed the pass's transaction on every attempt:
    # every fact of the window was lost, and the thread's cursor never moved past it.
    headers = bearer(settings, tenant, "alex")

    def reply(request: RecordedRequest) -> Reply:
        if any("Setubal" in message for message in new_user_messages(request)):
            return extraction([fact("User lives in Setubal.", subject="home_city")])
        return extraction(
            [
                fact("User likes tea\u0000.", category="preference", subject="drink"),
                fact("User owns a bike.", subject="vehicle", evidence="my bike"),
            ],
            episode="Talked\u0000 about tea.",
            profile=[{"key": "drink", "value": "tea\u0000", "confidence": 0.95, "evidence": ""}],
        )

    fresh_llm.reply = reply
    thread_id = await start_thread(llm_client, headers)
    await say(llm_client, headers, thread_id, "I like tea, and I came here on my bike.")
    [first] = await wait_for_passes(llm_client, headers, 1)
    assert first["dropped"] == {
        "nul_character": 1,
        "episode:nul_character": 1,
        "profile:nul_character": 1,
    }
    [bike] = await memories(llm_client, headers, kind="semantic")
    assert bike["text"] == "User owns a bike."
    assert first["written"] == [bike["id"]]
    assert await memories(llm_client, headers, kind="episodic") == []
    # The next turn is a pass of its own: the cursor moved past the first one.
    await say(llm_client, headers, thread_id, "Also: I live in Setubal these days.")
    [second, _] = await wait_for_passes(llm_client, headers, 2)
    assert (second["from_seq"], second["through_seq"]) == (2, 3)
    assert {m["text"] for m in await memories(llm_client, headers, kind="semantic")} == {
        "User owns a bike.",
        "User lives in Setubal.",
    }


async def test_evidence_no_message_of_the_window_holds_is_not_stored(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Stored evidence reads as the user's words: a quote the model made up is left out, and
    # the fact (drawn from the window) is kept, citing the window's human message.
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                "oolong",
                [
                    fact(
                        "User likes oolong tea.",
                        category="preference",
                        subject="tea",
                        evidence="I absolutely adore oolong since 1999",
                    ),
                    fact(
                        "User drinks tea daily.",
                        subject="tea_habit",
                        evidence="  EVERY\nmorning  ",
                    ),
                    fact(
                        "User dislikes green tea.",
                        category="preference",
                        subject="green_tea",
                        evidence="Green tea is bitter",
                    ),
                ],
            )
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    said, _ = await say(
        llm_client,
        headers,
        thread_id,
        "I drink oolong every morning.",
        "Green tea is bitter, oolong is not.",
    )
    await wait_for_passes(llm_client, headers, 1)
    stored = {m["text"]: m for m in await memories(llm_client, headers, kind="semantic")}
    assert set(stored) == {
        "User likes oolong tea.",
        "User drinks tea daily.",
        "User dislikes green tea.",
    }
    # Found whitespace and case aside: kept as the user typed it.
    assert stored["User drinks tea daily."]["evidence"] == "every morning"
    # Made up, or the assistant's words: no evidence.
    assert stored["User likes oolong tea."]["evidence"] is None
    assert stored["User dislikes green tea."]["evidence"] is None
    for memory in stored.values():
        assert memory["source_message_ids"] == [said["id"]]


async def test_evidence_is_found_whatever_its_typography_and_stored_as_the_user_typed_it(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # The model quotes in plain ASCII what the user typed with typographic quotes, dashes and
    # compatibility characters: the quote is found, and the evidence kept is the user's text.
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                "Berlin",
                [
                    fact("User is based in Berlin.", subject="home_city", evidence="I'm based in"),
                    fact(
                        "User calls Berlin the best city.",
                        subject="favourite_city",
                        evidence='"the best city"',
                    ),
                ],
            ),
            (
                "office",
                [
                    fact("User works nine to five.", subject="work_hours", evidence="work 9-5"),
                    fact(
                        "User works at the finance office.",
                        subject="workplace",
                        evidence="at the finance office",
                    ),
                ],
            ),
        ]
    )
    thread_id = await start_thread(llm_client, headers)
    response = await llm_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {
                    "role": "user",
                    "content": "I\u2019m based in Berlin \u2014 \u201cthe best city\u201d.",
                },
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "I work \uff19\u2013\uff15 at the \ufb01nance office."},
                {"role": "assistant", "content": "Noted."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    berlin, _, office, _ = response.json()["items"]
    await wait_for_passes(llm_client, headers, 1)

    stored = {m["text"]: m for m in await memories(llm_client, headers, kind="semantic")}
    assert {text: m["evidence"] for text, m in stored.items()} == {
        "User is based in Berlin.": "I\u2019m based in",
        "User calls Berlin the best city.": "\u201cthe best city\u201d",
        "User works nine to five.": "work \uff19\u2013\uff15",
        "User works at the finance office.": "at the \ufb01nance office",
    }
    for text, said in [
        ("User is based in Berlin.", berlin),
        ("User calls Berlin the best city.", berlin),
        ("User works nine to five.", office),
        ("User works at the finance office.", office),
    ]:
        assert stored[text]["source_message_ids"] == [said["id"]]


async def test_a_move_said_in_the_same_pass_supersedes_the_home_said_before_it(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Both turns arrive in one append, so one pass reads them. The model lists the newer fact
    # first: the order of the messages decides which home is current, not the model's order.
    headers = bearer(settings, tenant, "alex")
    script = ScriptedExtraction(
        [
            (
                "in Lisbon",
                [fact("User lives in Lisbon.", subject="home_city", evidence="in Lisbon")],
            ),
            ("in Porto", [fact("User lives in Porto.", subject="home_city", evidence="in Porto")]),
        ]
    )

    def newest_first(request: RecordedRequest) -> Reply:
        _status, payload = script(request)
        content = json.loads(payload["choices"][0]["message"]["content"])
        return extraction(list(reversed(content["facts"])))

    fresh_llm.reply = newest_first
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    response = await llm_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": "Hello, I live in Lisbon at the moment."},
                {"role": "assistant", "content": "Nice city."},
                {"role": "user", "content": "Update: I live in Porto since today, I moved."},
                {"role": "assistant", "content": "Congrats on the move."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    moved = response.json()["items"][2]
    [finished] = await wait_for_passes(llm_client, headers, 1)

    [porto] = await memories(llm_client, headers, kind="semantic")
    assert porto["text"] == "User lives in Porto."
    [lisbon] = await memories(llm_client, headers, kind="semantic", lifecycle="superseded")
    assert lisbon["text"] == "User lives in Lisbon."
    assert lisbon["superseded_by"] == porto["id"]
    assert datetime.fromisoformat(lisbon["invalid_at"]) == datetime.fromisoformat(
        moved["created_at"]
    )
    # Both events are of one transaction: told apart by their action, not their time.
    events = {e["action"]: e for e in await history(llm_client, headers, lisbon["id"])}
    assert sorted(events) == ["add", "supersede"]
    assert events["supersede"]["changes"]["reason"] == "subject"
    assert set(finished["written"]) == {porto["id"], lisbon["id"]}
    assert finished["superseded"] == 1
    response = await llm_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "Where does the user live?", "format": "text"},
    )
    block = response.json()["text"]
    assert "Porto" in block and "Lisbon" not in block


async def test_a_refused_fact_leaves_what_it_would_have_replaced_to_the_next_one_said(
    llm_client: AsyncClient,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first move's message is signed with a name the API refuses as a speaker (its check,
    # switched off, would have left the name out; so is the append's, which refuses it now):
    # that fact is refused at the write, and the home it would have replaced falls to the move
    # said after it.
    monkeypatch.setattr(pipeline, "remembered_name", lambda name: name)
    monkeypatch.setattr(threads_service, "refuse_message_secrets", lambda messages: None)
    headers = bearer(settings, tenant, "alex")
    berlin = await remember(
        llm_client,
        headers,
        kind="semantic",
        text="User lives in Berlin.",
        category="context",
        metadata={"subject": "home_city"},
    )
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                "in Lisbon",
                [fact("User lives in Lisbon.", subject="home_city", evidence="in Lisbon")],
            ),
            ("in Porto", [fact("User lives in Porto.", subject="home_city", evidence="in Porto")]),
        ]
    )
    fresh_llm.omit_supersedes = True
    thread_id = await start_thread(llm_client, headers)
    response = await llm_client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {
                    "role": "user",
                    "name": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                    "content": "I moved, I live in Lisbon now.",
                },
                {"role": "assistant", "content": "Nice."},
                {"role": "user", "content": "Moved again: I live in Porto."},
                {"role": "assistant", "content": "Busy year."},
            ]
        },
    )
    assert response.status_code == 201, response.text
    [finished] = await wait_for_passes(llm_client, headers, 1)

    assert finished["dropped"] == {"refused": 1}
    [porto] = await memories(llm_client, headers, kind="semantic")
    assert porto["text"] == "User lives in Porto."
    replaced = await get(llm_client, headers, berlin["id"])
    assert (replaced["lifecycle"], replaced["superseded_by"]) == ("superseded", porto["id"])
    assert finished["superseded"] == 1


async def test_a_fact_that_outlives_its_first_thread_is_still_the_write_paths_to_replace(
    llm_client: AsyncClient, fresh_llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    # Forgetting the thread a fact came from first moves the fact to the thread that said it
    # again: a change of its provenance, which does not make it a fact the user set.
    headers = bearer(settings, tenant, "alex")
    fresh_llm.reply = ScriptedExtraction(
        [
            ("prefer metric", [fact("User prefers metric units.", category="preference")]),
            ("prefer imperial", [fact("User prefers imperial units.", category="preference")]),
        ]
    )
    fresh_llm.omit_supersedes = True
    first_thread = await start_thread(llm_client, headers)
    await say(llm_client, headers, first_thread, "I prefer metric units.")
    await wait_for_passes(llm_client, headers, 1)
    second_thread = await start_thread(llm_client, headers)
    [again, _] = await say(llm_client, headers, second_thread, "As I said, I prefer metric units.")
    await wait_for_passes(llm_client, headers, 2)
    deleted = await llm_client.delete(
        f"/v1/users/me/threads/{first_thread}?cascade=memories", headers=headers
    )
    assert deleted.json()["deleted"]["memory"] == 0
    [metric] = await memories(llm_client, headers, kind="semantic")
    assert (metric["source_thread_id"], metric["source_message_ids"]) == (
        second_thread,
        [again["id"]],
    )

    await say(llm_client, headers, second_thread, "Now I prefer imperial units.")
    [latest, *_] = await wait_for_passes(llm_client, headers, 3)
    assert (latest["superseded"], latest["flagged"]) == (1, 0)
    [imperial] = await memories(llm_client, headers, kind="semantic")
    assert imperial["text"] == "User prefers imperial units."
