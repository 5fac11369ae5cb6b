"""Write-path passes driven directly (no worker): the strategies end to end, catching up after
a model outage, long backlogs in windows, and two passes racing on one thread."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import create_sessionmaker
from service.extraction.pipeline import WritePath, cosines_between, speaker_of
from service.kit.post_commit import BackgroundRunner
from service.memories.embedding import EmbeddingBackfill
from service.memories.vector_columns import VectorColumns
from service.providers import build_embedder, embedder_config_from_settings
from service.providers.llm import LLMUnavailable, OpenAIChatModel
from service.threads.models import Message
from tests.conftest import bearer
from tests.extraction.conftest import extraction_requests, fact, say
from tests.fixtures.factories import memories, start_thread
from tests.fixtures.openai_server import (
    API_KEY,
    MODEL,
    FakeOpenAIServer,
    RecordedRequest,
    ScriptedExtraction,
    extraction,
)


@pytest.fixture
async def make_write_path(
    app: FastAPI,
    settings: Settings,
    runtime_engine: AsyncEngine,
    fresh_llm: FakeOpenAIServer,
) -> AsyncIterator[Any]:
    embedder = build_embedder(embedder_config_from_settings(settings))
    chat_model = OpenAIChatModel(
        model=MODEL,
        base_url=fresh_llm.base_url,
        api_key=API_KEY,
        timeout_seconds=10,
        max_retries=0,
    )
    background = BackgroundRunner()
    sessionmaker = create_sessionmaker(runtime_engine)

    def make(**overrides: Any) -> WritePath:
        # The app's state, with the passes' own model, database pool and background runner.
        return WritePath(
            replace(
                app.state.mneme,
                settings=settings.model_copy(update=overrides),
                sessionmaker=sessionmaker,
                embedding_backfill=EmbeddingBackfill(VectorColumns(embedder), sessionmaker),
                background=background,
                chat_model=chat_model,
            )
        )

    yield make
    await background.drain()
    await chat_model.aclose()


def new_messages(request: RecordedRequest) -> list[str]:
    section = request.user.split("## New messages (extract from these)\n")[1]
    return [line for line in section.splitlines() if line.startswith("{")]


def earlier_messages(request: RecordedRequest) -> str:
    if "## Earlier messages" not in request.user:
        return ""
    return request.user.split("## Earlier messages")[1].split("## New messages")[0]


async def test_interval_and_farewell_passes_over_the_turns_since_the_last_pass(
    client: AsyncClient,
    make_write_path: Any,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> None:
    write_path = make_write_path(extraction_strategy="both", extraction_interval_turns=3)
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    tenant_thread = (tenant, uuid.UUID(thread_id))
    fresh_llm.reply = lambda request: extraction([])

    for n in (1, 2):
        await say(client, headers, thread_id, f"Question number {n} about trains in Spain?")
        assert await write_path.extract(*tenant_thread, org_writes=False) == []
    await say(client, headers, thread_id, "And a third question about Spanish trains?", None)
    assert await write_path.extract(*tenant_thread, org_writes=False) == []  # unanswered
    answered = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": [{"role": "assistant", "content": "The AVE is fast."}]},
    )
    assert answered.status_code == 201
    [interval] = await write_path.extract(*tenant_thread, org_writes=False)
    assert (interval.from_seq, interval.through_seq) == (0, 5)
    assert len(new_messages(extraction_requests(fresh_llm)[-1])) == 6

    await say(client, headers, thread_id, "Great, thanks. Goodbye!", "Bye!")
    [farewell] = await write_path.extract(*tenant_thread, org_writes=False)
    assert (farewell.from_seq, farewell.through_seq) == (6, 7)
    request = extraction_requests(fresh_llm)[-1]
    assert len(new_messages(request)) == 2
    assert "The AVE is fast." in earlier_messages(request)  # context, already processed
    assert len(extraction_requests(fresh_llm)) == 2


async def test_after_a_model_outage_the_next_pass_reads_every_turn_it_missed(
    client: AsyncClient,
    make_write_path: Any,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> None:
    write_path = make_write_path(extraction_strategy="every_turn")
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I just moved to Lisbon from Berlin.")
    fresh_llm.mode = "fail"
    with pytest.raises(LLMUnavailable):
        await write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False)
    assert await memories(client, headers) == []

    fresh_llm.mode = "summarize"
    fresh_llm.reply = lambda request: extraction(
        [fact("User lives in Lisbon.", evidence="moved to Lisbon"), fact("User has a bike.")]
    )
    await say(client, headers, thread_id, "I cycle everywhere on my old bike.")
    [caught_up] = await write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False)
    assert (caught_up.from_seq, caught_up.through_seq) == (0, 3)
    assert len(new_messages(extraction_requests(fresh_llm)[-1])) == 4
    lisbon = next(m for m in await memories(client, headers) if "Lisbon" in m["text"])
    messages = (
        await client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    ).json()["items"]
    assert lisbon["source_message_ids"] == [messages[0]["id"]]  # where the evidence is


async def test_a_long_backlog_is_read_in_windows_each_with_its_context(
    client: AsyncClient,
    make_write_path: Any,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> None:
    write_path = make_write_path(extraction_strategy="every_turn", extraction_max_window_messages=2)
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    for n in range(3):
        await say(client, headers, thread_id, f"Here is a fact number {n} about my garden.")
    fresh_llm.reply = lambda request: extraction([])
    passes = await write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False)
    assert [(p.from_seq, p.through_seq) for p in passes] == [(0, 1), (2, 3), (4, 5)]
    requests = extraction_requests(fresh_llm)
    assert earlier_messages(requests[0]) == ""
    assert "fact number 0" in earlier_messages(requests[1])
    assert "fact number 1" in earlier_messages(requests[2])
    assert await write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False) == []


async def test_two_passes_racing_on_one_thread_write_once(
    client: AsyncClient,
    make_write_path: Any,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> None:
    write_path = make_write_path(extraction_strategy="every_turn")
    headers = bearer(settings, tenant, "alex")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I am allergic to peanuts.")
    fresh_llm.reply = lambda request: extraction([fact("User is allergic to peanuts.")])
    fresh_llm.hold_back()
    runs = [
        asyncio.create_task(write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False))
        for _ in range(2)
    ]
    for _ in range(200):
        if len(extraction_requests(fresh_llm)) == 2:
            break
        await asyncio.sleep(0.02)
    fresh_llm.release()
    outcomes = [outcome for run in await asyncio.gather(*runs) for outcome in run]
    assert sorted(o.status for o in outcomes) == ["superseded", "written"]
    assert [m["text"] for m in await memories(client, headers)] == ["User is allergic to peanuts."]


def test_a_fact_names_its_speaker_unless_the_name_looks_like_a_secret() -> None:
    def said_by(name: str) -> Message:
        return Message(id=uuid.uuid4(), name=name, role="user", content="I like tea.")

    ada, secret = said_by("Ada"), said_by("ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert speaker_of([ada.id], [ada, secret]) == "Ada"
    # The API would refuse the name as a memory's speaker: the fact is kept without it.
    assert speaker_of([secret.id], [ada, secret]) is None


async def test_after_an_outage_each_move_supersedes_the_home_before_it(
    client: AsyncClient,
    make_write_path: Any,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    tenant: str,
) -> None:
    write_path = make_write_path(extraction_strategy="every_turn")
    headers = bearer(settings, tenant, "alex")
    thread_id = uuid.UUID(await start_thread(client, headers))
    fresh_llm.reply = ScriptedExtraction(
        [
            (
                f"I live in {city}",
                [fact(f"User lives in {city}.", subject="home_city", evidence=f"I live in {city}")],
            )
            for city in ("Porto", "City0", "City1", "City2", "City3")
        ]
    )
    await say(client, headers, str(thread_id), "I live in Porto.")
    await write_path.extract(tenant, thread_id, org_writes=False)
    fresh_llm.mode = "fail"
    said = []
    for n in range(4):
        said.append((await say(client, headers, str(thread_id), f"I live in City{n} now."))[0])
        with pytest.raises(LLMUnavailable):
            await write_path.extract(tenant, thread_id, org_writes=False)

    fresh_llm.mode = "summarize"
    [caught_up] = await write_path.extract(tenant, thread_id, org_writes=False)
    assert (caught_up.from_seq, caught_up.through_seq) == (2, 9)
    assert caught_up.record is not None and caught_up.record.superseded == 4
    [live] = await memories(client, headers, kind="semantic")
    assert live["text"] == "User lives in City3."
    superseded = {
        m["text"]: m
        for m in await memories(client, headers, kind="semantic", lifecycle="superseded")
    }
    # Each home stops being current when the next one was said, as passes one turn apart do.
    chain = ["Porto", "City0", "City1", "City2", "City3"]
    for n, (old, new) in enumerate(itertools.pairwise(chain)):
        replaced = superseded[f"User lives in {old}."]
        successor = superseded.get(f"User lives in {new}.", live)
        assert replaced["superseded_by"] == successor["id"]
        assert datetime.fromisoformat(replaced["invalid_at"]) == datetime.fromisoformat(
            said[n]["created_at"]
        )


def test_candidates_are_compared_with_each_other_by_the_cosine_of_their_vectors() -> None:
    between = cosines_between({3: [0.0, 2.0], 0: [1.0, 0.0], 1: [1.0, 1.0], 2: None})
    assert between == pytest.approx({(0, 1): 0.7071068, (0, 3): 0.0, (1, 3): 0.7071068})
    assert cosines_between({0: [1.0, 0.0], 1: None}) == {}
