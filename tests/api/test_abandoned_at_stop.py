"""A request the stop abandons (still running when the grace period ends) gets no answer: its
connection is closed, not answered uvicorn's plain-text 500, and it is counted and logged as
444, never as a server error. Run against real uvicorn with the service's HTTP protocol and the
service behind it."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fastapi import FastAPI

from service.config import Settings
from service.http_protocol import ProblemHttpToolsProtocol
from service.observability.middleware import ABANDONED_AT_STOP
from service.state import AppState
from tests.conftest import bearer
from tests.fixtures.loopback import served_in_loop

ROUTE = "/v1/users/{user_id}/memories"


class PatientProtocol(ProblemHttpToolsProtocol):
    """A read limit far past the test: the request is still waiting for its body when the
    stop gives up on it."""

    read_timeout_seconds = 120.0


def _counted(app: FastAPI, status: int) -> float:
    state: AppState = app.state.mneme
    counted = state.metrics.registry.get_sample_value(
        "mneme_http_requests_total", {"method": "POST", "route": ROUTE, "status": str(status)}
    )
    return counted or 0.0


async def test_a_request_the_stop_abandons_gets_no_answer_and_is_no_server_error(
    app: FastAPI, settings: Settings, tenant: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = {status: _counted(app, status) for status in (500, ABANDONED_AT_STOP)}
    authorization = bearer(settings, tenant, "ada")["Authorization"]
    caplog.set_level(logging.INFO, logger="mneme.access")
    async with served_in_loop(
        app,
        http=PatientProtocol,
        lifespan="off",
        log_level="error",
        timeout_graceful_shutdown=0.5,
    ) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # A body that never ends: the request is in flight when the stop comes.
        writer.write(
            b"POST /v1/users/me/memories HTTP/1.1\r\nHost: mneme\r\n"
            + f"Authorization: {authorization}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            + b'{"text": "Half a'
        )
        await writer.drain()
        await asyncio.sleep(0.2)
    # The server stopped: the request was cancelled once its grace period was over.
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert answer == b""
    for _ in range(50):
        if _counted(app, ABANDONED_AT_STOP) > before[ABANDONED_AT_STOP]:
            break
        await asyncio.sleep(0.05)
    assert _counted(app, ABANDONED_AT_STOP) == before[ABANDONED_AT_STOP] + 1
    assert _counted(app, 500) == before[500]
    logged = [r.getMessage() for r in caplog.records if r.name == "mneme.access"]
    assert f"POST {ROUTE} {ABANDONED_AT_STOP}" in logged
