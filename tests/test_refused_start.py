"""A start refused for what the operator must fix is reported as its one-line reason; any other
failed start keeps its traceback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message

from service.refused_start import RefusedStartMiddleware, StartRefused


async def start_messages(app: ASGIApp) -> list[Message]:
    """What `app` sends the server for a start (the ASGI lifespan protocol, as uvicorn runs
    it: the app raises after reporting a failed start, and the server takes the report)."""
    sent: list[Message] = []
    asked = [{"type": "lifespan.startup"}]

    async def receive() -> Message:
        if asked:
            return asked.pop()
        await asyncio.Event().wait()  # the server never asks for the shutdown here
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    scope: dict[str, Any] = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    with suppress(Exception):
        await app(scope, receive, send)
    return sent


def app_failing_with(error: Exception) -> Starlette:
    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        raise error
        yield  # pragma: no cover - the start fails before it

    app = Starlette(lifespan=lifespan)
    app.add_middleware(RefusedStartMiddleware)
    return app


async def test_a_refused_start_is_reported_as_its_reason_alone() -> None:
    reason = "the database server runs PostgreSQL 15.20; Mneme needs PostgreSQL 16 or later"
    sent = await start_messages(app_failing_with(StartRefused(reason)))
    assert sent == [{"type": "lifespan.startup.failed", "message": f"mneme cannot start: {reason}"}]


@pytest.mark.parametrize("error", [RuntimeError("a defect"), KeyError("a defect")])
async def test_any_other_failed_start_keeps_its_traceback(error: Exception) -> None:
    sent = await start_messages(app_failing_with(error))
    assert [message["type"] for message in sent] == ["lifespan.startup.failed"]
    assert sent[0]["message"].startswith("Traceback (most recent call last):")
    assert "a defect" in sent[0]["message"]


async def test_a_start_that_succeeds_is_reported_as_it_was() -> None:
    app = Starlette()
    app.add_middleware(RefusedStartMiddleware)
    sent: list[Message] = []
    asked = [{"type": "lifespan.shutdown"}, {"type": "lifespan.startup"}]

    async def receive() -> Message:
        return asked.pop()

    async def send(message: Message) -> None:
        sent.append(message)

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert [message["type"] for message in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
