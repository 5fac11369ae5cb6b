"""Summaries over HTTP: appends trigger a durable background pass, the window endpoint
combines summaries with the raw recent turns, and with no LLM everything else still works."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings
from tests.fixtures.factories import start_thread
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
async def llm_client(
    cluster: EmbeddedCluster, settings: Settings, llm: FakeOpenAIServer
) -> AsyncIterator[AsyncClient]:
    llm_settings = make_settings(
        cluster,
        llm_base_url=llm.base_url,
        llm_api_key=API_KEY,
        llm_model=MODEL,
        llm_max_retries=0,
        thread_summary_keep_recent=2,
        thread_messages_buffer_recent_turns=1,
        jobs_enabled=True,
        migrate_on_start=False,
    )
    application = create_app(llm_settings)
    async with (
        LifespanManager(application),
        AsyncClient(
            transport=ASGITransport(app=application), base_url="http://mneme.test"
        ) as client,
    ):
        yield client


async def exchange(client: AsyncClient, headers: dict[str, str], thread_id: str, n: int) -> None:
    response = await client.post(
        f"/v1/users/me/threads/{thread_id}/messages",
        headers=headers,
        json={
            "messages": [
                {"role": "user", "content": f"question {n}"},
                {"role": "assistant", "content": f"answer {n}"},
            ]
        },
    )
    assert response.status_code == 201, response.text


async def wait_for_summaries(
    client: AsyncClient, headers: dict[str, str], thread_id: str, count: int
) -> list[dict[str, Any]]:
    for _ in range(200):
        response = await client.get(f"/v1/users/me/threads/{thread_id}/summaries", headers=headers)
        items: list[dict[str, Any]] = response.json()["items"]
        if len(items) >= count:
            return items
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {count} summaries after 10 s")


async def test_appends_trigger_a_background_summary_and_the_window_combines_both(
    llm_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, headers)
    for n in range(1, 4):
        await exchange(llm_client, headers, thread_id, n)
    [summary] = await wait_for_summaries(llm_client, headers, thread_id, 1)
    assert (summary["sequence"], summary["start_index"], summary["end_index"]) == (1, 0, 4)
    assert summary["model"] == MODEL
    refs = {ref for entry in summary["entries"] for ref in entry["refs"]}
    assert refs <= {"#1", "#2"}
    window = (
        await llm_client.get(f"/v1/users/me/threads/{thread_id}/window", headers=headers)
    ).json()
    assert window["summarization"] == {"enabled": True, "reason": None}
    assert window["summary_text"].startswith("Q: ")
    assert [m["content"] for m in window["messages"]] == ["question 3", "answer 3"]
    assert window["start_index"] == 4
    assert window["truncated"] is False
    cut = (
        await llm_client.get(
            f"/v1/users/me/threads/{thread_id}/window?max_messages=1", headers=headers
        )
    ).json()
    assert cut["summary_text"] == window["summary_text"]
    assert [m["content"] for m in cut["messages"]] == ["answer 3"]
    assert (cut["start_index"], cut["truncated"]) == (5, True)


async def test_deleting_summaries_heals_and_summarize_forces_a_pass(
    llm_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, headers)
    for n in range(1, 3):
        await exchange(llm_client, headers, thread_id, n)
    await wait_for_summaries(llm_client, headers, thread_id, 1)
    deleted = await llm_client.delete(
        f"/v1/users/me/threads/{thread_id}/summaries", headers=headers
    )
    assert deleted.json() == {"deleted": 1}
    forced = await llm_client.post(f"/v1/users/me/threads/{thread_id}/summarize", headers=headers)
    assert forced.status_code == 200, forced.text
    assert forced.json()["status"] == "written"
    assert forced.json()["summary"]["start_index"] == 0
    again = await llm_client.post(f"/v1/users/me/threads/{thread_id}/summarize", headers=headers)
    assert again.json() == {"status": "not_due", "summary": None}


async def test_a_failing_model_is_a_503_and_messages_are_kept(
    llm_client: AsyncClient, llm: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, headers)
    await exchange(llm_client, headers, thread_id, 1)
    llm.mode = "fail"
    try:
        response = await llm_client.post(
            f"/v1/users/me/threads/{thread_id}/summarize", headers=headers
        )
    finally:
        llm.mode = "summarize"
    problem = assert_problem(response, 503, "LLM_UNAVAILABLE")
    assert int(response.headers["Retry-After"]) == problem["retry_after_seconds"] > 0
    messages = (
        await llm_client.get(f"/v1/users/me/threads/{thread_id}/messages", headers=headers)
    ).json()["items"]
    assert len(messages) == 2


async def test_without_an_llm_threads_work_and_say_summarization_is_off(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(client, headers)
    for n in range(1, 4):
        await exchange(client, headers, thread_id, n)
    window = (await client.get(f"/v1/users/me/threads/{thread_id}/window", headers=headers)).json()
    assert window["summarization"]["enabled"] is False
    assert "LLM" in window["summarization"]["reason"]
    assert len(window["messages"]) == 6 and window["summaries"] == []
    refused = await client.post(f"/v1/users/me/threads/{thread_id}/summarize", headers=headers)
    assert_problem(refused, 409, "SUMMARIZATION_DISABLED")


async def test_summaries_of_another_users_thread_are_404(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    thread_id = await start_thread(client, bearer(settings, tenant, "alice"))
    bob = bearer(settings, tenant, "bob")
    for method, suffix in (
        ("GET", "summaries"),
        ("DELETE", "summaries"),
        ("POST", "summarize"),
        ("GET", "window"),
    ):
        response = await client.request(
            method, f"/v1/users/alice/threads/{thread_id}/{suffix}", headers=bob
        )
        assert_problem(response, 404, "NOT_FOUND")


async def test_context_carries_the_summaries_and_the_recent_turns(
    llm_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, headers)
    for n in range(1, 4):
        await exchange(llm_client, headers, thread_id, n)
    await wait_for_summaries(llm_client, headers, thread_id, 1)
    response = await llm_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "what did we discuss", "thread_id": thread_id},
    )
    result = response.json()
    assert result["summarization"] == "on"
    assert "<earlier_conversation>\nQ: " in result["text"]
    assert "## Recent messages\nuser: question 3\nassistant: answer 3" in result["text"]
    assert "question 1\nassistant" not in result["text"]  # summarised turns are not raw


async def test_every_message_is_summarised_or_raw_whatever_its_role(
    llm_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    thread_id = await start_thread(llm_client, headers)
    url = f"/v1/users/me/threads/{thread_id}"
    opening = [
        {"role": "assistant", "content": "Welcome! Your order #A17 shipped."},
        {"role": "user", "content": "When will it arrive?"},
        {"role": "system", "content": "The delivery address changed to Porto."},
        {"role": "assistant", "content": "Tomorrow."},
    ]
    appended = await llm_client.post(f"{url}/messages", headers=headers, json={"messages": opening})
    assert appended.status_code == 201, appended.text
    for n in range(2, 7):
        await exchange(llm_client, headers, thread_id, n)
    count = len(opening) + 2 * 5
    await wait_for_summaries(llm_client, headers, thread_id, 1)

    # The window's summaries and raw messages, read in one transaction, leave no gap.
    window = (await llm_client.get(f"{url}/window", headers=headers)).json()
    summaries = window["summaries"]
    covered = {seq for s in summaries for seq in range(s["start_index"], s["end_index"])}
    raw = {m["seq"] for m in window["messages"]}
    assert raw == set(range(window["start_index"], count))
    assert window["start_index"] > len(opening)
    assert covered | raw == set(range(count))
    block = await llm_client.post(
        "/v1/users/me/context",
        headers=headers,
        json={"query": "where is my order?", "thread_id": thread_id, "budget_tokens": 4000},
    )
    assert block.status_code == 200, block.text
    assert "#A17" in block.json()["text"]
    assert "Porto" in block.json()["text"]
