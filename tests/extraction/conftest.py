"""Helpers for the write-path tests: an app whose worker runs extraction against the local
OpenAI-compatible server, and small HTTP helpers to drive conversations and wait for passes
(the factories for threads and memories are in tests/fixtures/factories.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import make_settings
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, RecordedRequest

Headers = dict[str, str]


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fresh_llm(llm: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The module's server, with its switches reset after the test."""
    llm.requests.clear()
    yield llm
    llm.reply = None
    llm.omit_supersedes = False
    llm.mode = "summarize"
    llm.fail_next = 0
    llm.release()


def write_path_settings(cluster: EmbeddedCluster, **overrides: Any) -> Settings:
    """An app that runs its job worker, with summaries off (only the write path calls the
    model) and quick retries."""
    values: dict[str, Any] = {
        "jobs_enabled": True,
        "migrate_on_start": False,
        "thread_summary_keep_recent": 0,
        "job_retry_initial_delay_seconds": 0.3,
        "job_poll_interval_seconds": 0.1,
    }
    values.update(overrides)
    return make_settings(cluster, **values)


def llm_settings(cluster: EmbeddedCluster, llm: FakeOpenAIServer, **overrides: Any) -> Settings:
    return write_path_settings(
        cluster,
        llm_base_url=llm.base_url,
        llm_api_key=API_KEY,
        llm_model=MODEL,
        llm_max_retries=0,
        llm_timeout_seconds=10,
        **overrides,
    )


async def serve(application: FastAPI) -> AsyncIterator[AsyncClient]:
    async with (
        LifespanManager(application),
        AsyncClient(transport=ASGITransport(app=application), base_url="http://mneme.test") as c,
    ):
        yield c


@pytest.fixture(scope="module")
async def llm_client(
    cluster: EmbeddedCluster, settings: Settings, llm: FakeOpenAIServer
) -> AsyncIterator[AsyncClient]:
    """Extraction after every turn (`settings` first: it migrates the database)."""
    application = create_app(llm_settings(cluster, llm, extraction_strategy="every_turn"))
    async for client in serve(application):
        yield client


async def say(
    client: AsyncClient,
    headers: Headers,
    thread_id: str,
    user_text: str,
    assistant_text: str | None = "Noted.",
    *,
    user: str = "me",
) -> list[dict[str, Any]]:
    """Append the user's message and (unless None) the assistant's reply; returns them."""
    messages = [{"role": "user", "content": user_text}]
    if assistant_text is not None:
        messages.append({"role": "assistant", "content": assistant_text})
    response = await client.post(
        f"/v1/users/{user}/threads/{thread_id}/messages",
        headers=headers,
        json={"messages": messages},
    )
    assert response.status_code == 201, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def jobs(client: AsyncClient, headers: Headers, user: str = "me") -> dict[str, Any]:
    response = await client.get(f"/v1/users/{user}/jobs", headers=headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def eventually(
    client: AsyncClient,
    headers: Headers,
    check: Callable[[dict[str, Any]], bool],
    *,
    user: str = "me",
    seconds: float = 15,
) -> dict[str, Any]:
    """Poll the user's jobs endpoint until `check` holds; return what it answered."""
    for _ in range(int(seconds / 0.05)):
        body = await jobs(client, headers, user)
        if check(body):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached in {seconds} s: {body}")


async def wait_for_passes(
    client: AsyncClient, headers: Headers, count: int, *, user: str = "me"
) -> list[dict[str, Any]]:
    """The user's passes (newest first) once `count` have finished and nothing is pending."""
    body = await eventually(
        client,
        headers,
        lambda b: len(b["passes"]) >= count and not b["pending"],
        user=user,
    )
    passes: list[dict[str, Any]] = body["passes"]
    return passes


def shown_facts(request: RecordedRequest) -> list[dict[str, Any]]:
    """The current facts an extraction request showed the model (JSON lines under the
    `## Current facts` heading)."""
    lines = request.user.split("\n\n")[0].splitlines()[1:]
    return [json.loads(line) for line in lines if line.startswith("{")]


def alias_of(request: RecordedRequest, fragment: str) -> str:
    """The pass-local id the model was shown for the fact containing `fragment`."""
    for item in shown_facts(request):
        if fragment in item["text"]:
            alias: str = item["id"]
            return alias
    raise AssertionError(f"no shown fact contains {fragment!r}: {shown_facts(request)}")


def fact(text: str, **overrides: Any) -> dict[str, Any]:
    """A fact as the model proposes it."""
    values: dict[str, Any] = {
        "text": text,
        "category": "context",
        "subject": "",
        "scope": "user",
        "confidence": 0.95,
        "evidence": "",
        "supersedes": [],
    }
    values.update(overrides)
    return values


def extraction_requests(server: FakeOpenAIServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.schema_name == "memory_extraction"]
