"""Thread summaries per seed 000: trigger arithmetic, excerpts, refs, sequences and failures.

Summary passes run against the migrated database and a real OpenAI-compatible server on
127.0.0.1 (tests/fixtures/openai_server.py), through the real `openai` client.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.kit.token_counting import count_tokens
from service.providers.llm import LLMUnavailable, OpenAIChatModel
from service.threads.models import Message, Thread, ThreadSummary
from service.threads.summaries import (
    SUMMARY_SYSTEM_PROMPT,
    SummaryPassResult,
    SummaryWindow,
    compute_summary_window,
    format_summaries_for_prompt,
    format_summary_entries,
    human_turn_labels,
    summarize_thread,
    window_start_index,
)
from tests.fixtures.locks import waiting_locks
from tests.fixtures.openai_server import (
    API_KEY,
    MODEL,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
    completion,
    summary_entries,
)

Sessions = async_sessionmaker[AsyncSession]
Turn = tuple[str, str] | dict[str, Any]


# --- pure turn arithmetic ---------------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    seq: int
    role: str


def thread_of(*roles: str) -> list[Msg]:
    return [Msg(seq, role) for seq, role in enumerate(roles)]


def exchanges(count: int) -> list[str]:
    return ["user", "assistant"] * count


def test_turn_labels_count_human_messages_over_the_whole_thread() -> None:
    messages = thread_of("system", "user", "assistant", "user", "assistant", "tool", "user")
    assert human_turn_labels(messages) == [0, 1, 1, 2, 2, 2, 3]
    assert human_turn_labels(messages[3:], humans_before=1) == [2, 2, 2, 3]


@pytest.mark.parametrize(
    ("turns", "expected_turns"),
    [(1, None), (2, None), (3, 3), (4, 3), (5, 3), (6, 6), (7, 6), (9, 9), (10, 9)],
)
def test_the_window_is_the_largest_multiple_of_k_uncompressed_turns(
    turns: int, expected_turns: int | None
) -> None:
    window = compute_summary_window(
        thread_of(*exchanges(turns)), humans_before=0, last_end=None, keep_recent=3
    )
    if expected_turns is None:
        assert window is None
        return
    assert window == SummaryWindow(
        start_index=0,
        end_index=min(2 * expected_turns, 2 * turns),
        first_turn=1,
        last_turn=expected_turns,
    )


def test_the_window_starts_where_the_stored_summaries_end() -> None:
    messages = thread_of(*exchanges(8))
    window = compute_summary_window(messages, humans_before=0, last_end=6, keep_recent=3)
    assert window == SummaryWindow(start_index=6, end_index=12, first_turn=4, last_turn=6)
    # Only what follows `last_end` is needed, with the human turns before it counted.
    tail = compute_summary_window(messages[6:], humans_before=3, last_end=6, keep_recent=3)
    assert tail == window
    assert compute_summary_window(messages, humans_before=0, last_end=12, keep_recent=3) is None


def test_a_trailing_question_without_an_answer_is_not_a_complete_turn() -> None:
    messages = thread_of(*exchanges(2), "user")
    assert compute_summary_window(messages, humans_before=0, last_end=None, keep_recent=3) is None
    answered = thread_of(*exchanges(2), "user", "tool")
    assert compute_summary_window(answered, humans_before=0, last_end=None, keep_recent=3) == (
        SummaryWindow(start_index=0, end_index=6, first_turn=1, last_turn=3)
    )


def test_k_below_one_never_opens_a_window() -> None:
    messages = thread_of(*exchanges(20))
    for keep_recent in (0, -1):
        for force in (False, True):
            assert (
                compute_summary_window(
                    messages,
                    humans_before=0,
                    last_end=None,
                    keep_recent=keep_recent,
                    force=force,
                )
                is None
            )


def test_force_takes_every_complete_turn_even_fewer_than_k() -> None:
    messages = thread_of("system", *exchanges(2), "user")
    assert compute_summary_window(messages, humans_before=0, last_end=None, keep_recent=3) is None
    assert compute_summary_window(
        messages, humans_before=0, last_end=None, keep_recent=3, force=True
    ) == SummaryWindow(start_index=0, end_index=5, first_turn=1, last_turn=2)


def test_the_first_window_starts_at_the_threads_start_whatever_comes_first() -> None:
    for opening in ("assistant", "system", "tool"):
        messages = thread_of(opening, opening, *exchanges(3))
        assert compute_summary_window(
            messages, humans_before=0, last_end=None, keep_recent=3
        ) == SummaryWindow(start_index=0, end_index=8, first_turn=1, last_turn=3)


@dataclass
class StoredSummary:
    sequence: int
    end_index: int
    entries: list[dict[str, Any]] = field(default_factory=list)


def test_prompt_format_is_oldest_pass_first_with_a_blank_line_between_passes() -> None:
    summaries = [
        StoredSummary(2, 12, [{"question": "Q3", "answer": "A3", "refs": ["#3"]}]),
        StoredSummary(
            1,
            6,
            [
                {"question": "Q1", "answer": "A1", "refs": ["#1", "#2"]},
                {"question": "Q2", "answer": "A2", "refs": []},
                {"question": None, "answer": "corrupt entries are skipped"},
            ],
        ),
        StoredSummary(3, 18, []),
    ]
    assert format_summaries_for_prompt(summaries) == (
        "Q: Q1 (#1, #2)\nA: A1\nQ: Q2\nA: A2\n\nQ: Q3 (#3)\nA: A3"
    )
    assert format_summaries_for_prompt([]) == ""


def test_raw_messages_start_after_the_last_window_but_keep_the_recent_turns() -> None:
    messages = thread_of("system", *exchanges(9))  # humans at 1, 3, …, 17
    summaries = [StoredSummary(1, 7), StoredSummary(2, 13)]
    assert window_start_index([], messages, 5) == 0
    assert window_start_index(summaries, messages, 0) == 13
    assert window_start_index(summaries, messages, 2) == 13  # turns #8, #9 are raw anyway
    assert window_start_index(summaries, messages, 5) == 9  # turns #5..#9
    assert window_start_index(summaries, messages, 50) == 1  # every turn


# --- summary passes against the database and the fake model -----------------------------------


@pytest.fixture
def llm_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
async def chat_model(llm_server: FakeOpenAIServer) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel(
        model=MODEL,
        base_url=llm_server.base_url,
        api_key=API_KEY,
        timeout_seconds=5,
        max_retries=0,
    )
    yield model
    await model.aclose()


@pytest.fixture(scope="module")
def sessions(runtime_engine: AsyncEngine) -> Sessions:
    return create_sessionmaker(runtime_engine)


@pytest.fixture
def k3(settings: Settings) -> Settings:
    return settings.model_copy(update={"thread_summary_keep_recent": 3})


async def new_thread(sessions: Sessions, tenant: str) -> uuid.UUID:
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(
            text("INSERT INTO tenant (id) VALUES (:t) ON CONFLICT DO NOTHING"), {"t": tenant}
        )
        await session.execute(
            text(
                "INSERT INTO user_account (tenant_id, id) VALUES (:t, 'u1') ON CONFLICT DO NOTHING"
            ),
            {"t": tenant},
        )
        thread = Thread(tenant_id=tenant, user_id="u1")
        session.add(thread)
        await session.flush()
        return thread.id


async def add_messages(
    sessions: Sessions, tenant: str, thread_id: uuid.UUID, *turns: Turn
) -> list[Message]:
    async with tenant_transaction(sessions, tenant) as session:
        count = (
            await session.execute(
                text("SELECT count(*) FROM message WHERE thread_id = :id"), {"id": thread_id}
            )
        ).scalar_one()
        added = []
        for offset, turn in enumerate(turns):
            values = {"role": turn[0], "content": turn[1]} if isinstance(turn, tuple) else turn
            message = Message(
                tenant_id=tenant, thread_id=thread_id, user_id="u1", seq=count + offset, **values
            )
            session.add(message)
            added.append(message)
        await session.flush()
        return added


def exchange(n: int) -> list[Turn]:
    return [("user", f"question {n}"), ("assistant", f"answer {n}")]


async def summaries_of(
    sessions: Sessions, tenant: str, thread_id: uuid.UUID
) -> list[ThreadSummary]:
    async with tenant_transaction(sessions, tenant) as session:
        rows = await session.execute(
            select(ThreadSummary)
            .where(ThreadSummary.thread_id == thread_id)
            .order_by(ThreadSummary.sequence)
        )
        return list(rows.scalars())


async def delete_summaries(
    sessions: Sessions, tenant: str, thread_id: uuid.UUID, *, from_sequence: int = 0
) -> None:
    async with tenant_transaction(sessions, tenant) as session:
        await session.execute(
            delete(ThreadSummary).where(
                ThreadSummary.thread_id == thread_id, ThreadSummary.sequence >= from_sequence
            )
        )


def windows(summaries: list[ThreadSummary]) -> list[tuple[int, int, int]]:
    return [(s.sequence, s.start_index, s.end_index) for s in summaries]


async def test_a_fresh_thread_is_summarised_at_turns_3_6_and_9(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    written_at = []
    for n in range(1, 11):
        await add_messages(sessions, tenant, thread_id, *exchange(n))
        result = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
        if result.status == "written":
            written_at.append(n)
        else:
            assert result.status == "not_due"

    assert written_at == [3, 6, 9]
    summaries = await summaries_of(sessions, tenant, thread_id)
    assert windows(summaries) == [(1, 0, 6), (2, 6, 12), (3, 12, 18)]
    assert [[line["id"] for line in r.transcript()] for r in llm_server.requests] == [
        ["#1", "#2", "#3"],
        ["#4", "#5", "#6"],
        ["#7", "#8", "#9"],
    ]
    assert [entry["question"] for entry in summaries[1].entries] == [
        "question 4",
        "question 5",
        "question 6",
    ]
    assert all(s.model == MODEL for s in summaries)


async def test_the_excerpt_runs_from_the_threads_start_to_the_next_human_turn_with_every_role(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    tool_call = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}
    messages = await add_messages(
        sessions,
        tenant,
        thread_id,
        ("assistant", "Hi! Your order #A17 shipped."),  # 0: before the first human turn
        ("user", "book a table"),  # 1: #1
        {"role": "assistant", "content": "", "tool_calls": [tool_call]},
        ("tool", "booked for 8pm"),
        ("system", "The user is now on the premium plan."),
        ("assistant", "Done: 8pm."),
        ("user", "and a taxi?"),  # 6: #2
        ("assistant", "Taxi at 7:30."),
        ("user", "thanks"),  # 8: #3
        ("assistant", "You're welcome."),
        ("user", "one more thing"),  # 10: #4, unanswered
    )

    result = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)

    assert result.status == "written"
    assert result.window == SummaryWindow(start_index=0, end_index=10, first_turn=1, last_turn=3)
    (request,) = llm_server.requests
    transcript = request.transcript()
    assert [line["id"] for line in transcript] == ["#1", "#2", "#3"]
    # What the assistant said before the user spoke opens the first turn's line.
    assert transcript[0]["messages"] == [
        {"role": "assistant", "content": "Hi! Your order #A17 shipped."},
        {"role": "user", "content": "book a table"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call]},
        {"role": "tool", "content": "booked for 8pm"},
        {"role": "system", "content": "The user is now on the premium plan."},
        {"role": "assistant", "content": "Done: 8pm."},
    ]
    assert transcript[2]["messages"][-1] == {"role": "assistant", "content": "You're welcome."}
    assert request.system == SUMMARY_SYSTEM_PROMPT
    summary = result.summary
    assert summary is not None
    assert summary.message_ids == [m.id for m in messages[:10]]
    assert summary.entries[0]["message_ids"] == [str(m.id) for m in messages[:6]]
    assert summary.tokens_before == count_tokens(request.user)
    assert summary.tokens_after == count_tokens(format_summary_entries(summary.entries))
    assert summary.tokens_after > 0


async def test_refs_are_resolved_to_the_message_ids_of_their_turns(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    messages = await add_messages(
        sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3)
    )
    entries = [
        {"question": "plans", "answer": "dinner", "refs": ["#2", "#99", "3", "#2", "later"]},
        {"question": "  ", "answer": "", "refs": ["#1"]},  # blank: dropped
        {"question": "greeting", "answer": "none", "refs": []},
    ]
    llm_server.reply = lambda _: completion(json.dumps({"entries": entries}))

    result = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)

    assert result.summary is not None
    assert result.summary.entries == [
        {
            "question": "plans",
            "answer": "dinner",
            "refs": ["#2", "#3"],
            "message_ids": [str(m.id) for m in messages[2:6]],
        },
        {"question": "greeting", "answer": "none", "refs": [], "message_ids": []},
    ]


async def test_empty_model_output_writes_nothing(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    llm_server.mode = "empty"

    result = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)

    assert result.status == "empty"
    assert await summaries_of(sessions, tenant, thread_id) == []
    llm_server.mode = "summarize"
    again = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    assert again.window == result.window
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 6)]


async def test_a_pass_whose_thread_is_being_deleted_waits_and_writes_nothing(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    owner_engine: AsyncEngine,
) -> None:
    """The pass holds its thread from its check to its commit: a deletion under way is waited
    for, then seen (it wrote a summary of a thread that was gone: a foreign-key violation)."""
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    async with tenant_transaction(sessions, tenant) as session:
        params = {"t": tenant, "id": thread_id}
        # What the thread's deletion does, not committed yet.
        await session.execute(
            text("SELECT 1 FROM thread WHERE tenant_id = :t AND id = :id FOR UPDATE"), params
        )
        await session.execute(
            text("DELETE FROM message WHERE tenant_id = :t AND thread_id = :id"), params
        )
        await session.execute(text("DELETE FROM thread WHERE tenant_id = :t AND id = :id"), params)
        passing = asyncio.create_task(summarize_thread(sessions, chat_model, k3, tenant, thread_id))
        waiting = await waiting_locks(owner_engine)
        assert not passing.done(), await passing
        assert waiting == 1
    result = await passing
    assert result.status == "thread_not_found"
    assert await summaries_of(sessions, tenant, thread_id) == []


async def test_a_model_failure_writes_nothing_and_the_next_trigger_retries_the_window(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    llm_server.mode = "fail"
    with pytest.raises(LLMUnavailable, match="HTTP 500"):
        await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    llm_server.mode = "malformed"
    with pytest.raises(LLMUnavailable, match="does not match"):
        await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    assert await summaries_of(sessions, tenant, thread_id) == []

    llm_server.mode = "summarize"
    await add_messages(sessions, tenant, thread_id, *exchange(4))
    result = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)

    assert result.status == "written"
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 6)]
    assert [line["id"] for line in llm_server.requests[-1].transcript()] == ["#1", "#2", "#3"]


async def test_deleting_summaries_heals_from_the_earliest_missing_window(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    for n in range(1, 10):
        await add_messages(sessions, tenant, thread_id, *exchange(n))
        await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [
        (1, 0, 6),
        (2, 6, 12),
        (3, 12, 18),
    ]

    await delete_summaries(sessions, tenant, thread_id, from_sequence=3)
    healed = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    assert healed.status == "written"
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [
        (1, 0, 6),
        (2, 6, 12),
        (3, 12, 18),
    ]

    await delete_summaries(sessions, tenant, thread_id)
    await add_messages(sessions, tenant, thread_id, *exchange(10))
    rewritten = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    # Ten uncompressed turns: the largest multiple of three, from the thread's start.
    assert rewritten.window == SummaryWindow(start_index=0, end_index=18, first_turn=1, last_turn=9)
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 18)]
    assert (await summarize_thread(sessions, chat_model, k3, tenant, thread_id)).status == (
        "not_due"
    )


async def test_k_below_one_disables_summaries(
    sessions: Sessions,
    settings: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    off = settings.model_copy(update={"thread_summary_keep_recent": 0})

    for force in (False, True):
        result = await summarize_thread(sessions, chat_model, off, tenant, thread_id, force=force)
        assert result == SummaryPassResult("disabled")
    assert llm_server.requests == []
    assert await summaries_of(sessions, tenant, thread_id) == []


async def test_without_a_chat_model_nothing_happens(
    sessions: Sessions, k3: Settings, tenant: str
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    assert (await summarize_thread(sessions, None, k3, tenant, thread_id)).status == "unconfigured"


async def test_force_summarises_every_complete_uncovered_turn_now(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), ("user", "open"))

    assert (await summarize_thread(sessions, chat_model, k3, tenant, thread_id)).status == (
        "not_due"
    )
    forced = await summarize_thread(sessions, chat_model, k3, tenant, thread_id, force=True)

    assert forced.status == "written"
    assert forced.window == SummaryWindow(start_index=0, end_index=4, first_turn=1, last_turn=2)
    again = await summarize_thread(sessions, chat_model, k3, tenant, thread_id, force=True)
    assert again.status == "not_due"
    assert len(llm_server.requests) == 1
    # The cadence continues from the stored end: three more complete turns are due.
    await add_messages(
        sessions, tenant, thread_id, ("assistant", "closed"), *exchange(4), *exchange(5)
    )
    later = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)
    assert later.window == SummaryWindow(start_index=4, end_index=10, first_turn=3, last_turn=5)
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 4), (2, 4, 10)]


async def test_concurrent_passes_write_the_window_once(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    llm_server.hold = True
    passes = [
        asyncio.create_task(summarize_thread(sessions, chat_model, k3, tenant, thread_id))
        for _ in range(2)
    ]
    for _ in range(500):
        if len(llm_server.requests) == 2:
            break
        await asyncio.sleep(0.01)
    llm_server.release()
    results = await asyncio.gather(*passes)

    # The overtaken pass started again from the written window's end: nothing more was due.
    assert sorted(result.status for result in results) == ["not_due", "written"]
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 6)]
    assert len(llm_server.requests) == 2


async def test_a_pass_overtaken_by_a_narrower_one_starts_again_from_its_end(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    """Turns appended while a pass waits on the model are read by a second pass, whose window
    is wider; when the first writes before it, the second starts again from the first's end,
    so the turns only it had read are summarised now, not at some later append."""
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    wider_asked = threading.Event()

    def reply(request: RecordedRequest) -> Reply:
        turns = [line["id"] for line in request.transcript()]
        if "#4" in turns:
            wider_asked.set()
            # The wider pass answers well after the narrower one has written.
            time.sleep(1.0)
        else:
            wider_asked.wait(timeout=10)
        return completion(json.dumps({"entries": summary_entries(request)}))

    llm_server.reply = reply
    narrower = asyncio.create_task(summarize_thread(sessions, chat_model, k3, tenant, thread_id))
    for _ in range(500):
        if llm_server.requests:
            break
        await asyncio.sleep(0.01)
    await add_messages(sessions, tenant, thread_id, *exchange(4), *exchange(5), *exchange(6))
    wider = await summarize_thread(sessions, chat_model, k3, tenant, thread_id)

    assert (await narrower).status == "written"
    assert wider.status == "written"
    assert wider.window == SummaryWindow(start_index=6, end_index=12, first_turn=4, last_turn=6)
    assert windows(await summaries_of(sessions, tenant, thread_id)) == [(1, 0, 6), (2, 6, 12)]


async def test_another_tenants_thread_is_not_found(
    sessions: Sessions,
    k3: Settings,
    tenant: str,
    chat_model: OpenAIChatModel,
    llm_server: FakeOpenAIServer,
) -> None:
    thread_id = await new_thread(sessions, tenant)
    await add_messages(sessions, tenant, thread_id, *exchange(1), *exchange(2), *exchange(3))
    other = "t-" + uuid.uuid4().hex[:12]
    await new_thread(sessions, other)

    result = await summarize_thread(sessions, chat_model, k3, other, thread_id)

    assert result.status == "thread_not_found"
    assert llm_server.requests == []
