"""A client has a time limit for each part of its request: a head that stops (or trickles) and a
body that stops midway are answered 408 `REQUEST_TIMEOUT` and the connection is closed; a body
that keeps flowing, however long it takes in all, and a kept-alive connection between requests
are untouched. Run against real uvicorn with the service's HTTP protocol, and with the service
itself behind it: a request that timed out stores nothing and is counted as the 408 its client
got; one whose client went before its body was in is counted as 499, not as a server error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from starlette.types import ASGIApp, Receive, Scope, Send

from service.config import Settings
from service.http_protocol import ProblemHttpToolsProtocol
from service.state import AppState
from tests.conftest import bearer
from tests.fixtures.loopback import served_in_loop

READ_TIMEOUT = 0.5


class QuickTimeoutProtocol(ProblemHttpToolsProtocol):
    read_timeout_seconds = READ_TIMEOUT


class PatientProtocol(ProblemHttpToolsProtocol):
    """A read limit far past any test's wait: only the client can end a request it leaves
    unfinished, however long the shared event loop is held up elsewhere."""

    read_timeout_seconds = 120.0


disconnected: list[str] = []
"""The paths whose request saw its client gone while it read the body."""

answers_sent: dict[str, asyncio.Event] = {}
"""Set once the request of a path (a large answer, `/large…`) has sent the last of it."""

LARGE_ANSWER_BYTES = 32 * 1024 * 1024
"""More than a loopback connection's buffers hold (the transport's and the kernel's)."""


async def _read_body(receive: Receive) -> int | None:
    """The body's length; None when the client went before it was in."""
    length = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        length += len(message.get("body", b""))
        if not message.get("more_body", False):
            return length


async def _answer_with(send: Send, answer: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(answer)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": answer})


async def _echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body and answers its length (`/slow-answer`: `slow`, late)."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/late-reader":
        # Busy elsewhere before it reads its body: the server stops reading the connection once
        # it holds more of the body than it buffers for a request.
        await asyncio.sleep(3 * READ_TIMEOUT)
    length = await _read_body(receive)
    if length is None:
        disconnected.append(scope["path"])
        return
    if scope["path"].startswith("/large"):
        await _answer_in_parts(send, scope["path"])
        return
    if scope["path"] == "/slow-answer":
        await asyncio.sleep(3 * READ_TIMEOUT)
        await _answer_with(send, b"slow")
        return
    await _answer_with(send, str(length).encode())


async def _answer_in_parts(send: Send, path: str) -> None:
    """`LARGE_ANSWER_BYTES` in parts of 1 MiB, then the path's event set."""
    part = b"a" * (1024 * 1024)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(LARGE_ANSWER_BYTES).encode())],
        }
    )
    for _ in range(LARGE_ANSWER_BYTES // len(part)):
        await send({"type": "http.response.body", "body": part, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
    answers_sent.setdefault(path, asyncio.Event()).set()


def _served(
    app: ASGIApp, protocol: type[ProblemHttpToolsProtocol] = QuickTimeoutProtocol
) -> AbstractAsyncContextManager[int]:
    """`app` under uvicorn with the short read limit, or `protocol`'s (its lifespan is the
    caller's)."""
    return served_in_loop(
        app,
        http=protocol,
        log_level="error",
        lifespan="off",
        timeout_keep_alive=5,
        # A connection this module leaves open does not hold the server's stop.
        timeout_graceful_shutdown=2,
    )


@pytest.fixture
async def server_port() -> AsyncIterator[int]:
    async with _served(_echo_length) as port:
        yield port


@pytest.fixture
async def service_port(app: FastAPI) -> AsyncIterator[int]:
    async with _served(app) as port:
        yield port


@pytest.fixture
async def patient_service_port(app: FastAPI) -> AsyncIterator[int]:
    async with _served(app, PatientProtocol) as port:
        yield port


async def _answer(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    raw = await asyncio.wait_for(reader.read(), timeout=10)
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return status_line, headers, body


SCHEDULED_CLIENT = """
import pickle, socket, sys, time
port, parts = pickle.load(sys.stdin.buffer)
with socket.create_connection(("127.0.0.1", port)) as connection:
    for pause, data in parts:
        time.sleep(pause)
        connection.sendall(data)
    connection.settimeout(10)
    answer = b""
    while chunk := connection.recv(65536):
        answer += chunk
sys.stdout.buffer.write(answer)
"""
"""Sends each part after its pause, then reads the answer to its end and prints it."""


async def _sent_from_another_process(
    port: int, parts: list[tuple[float, bytes]]
) -> tuple[str, dict[str, str], bytes]:
    """The answer to `parts` (pause in seconds, bytes) sent by a client in a process of its own.
    A client on the server's own event loop sends only when that loop runs: a stall of the loop
    (a collection, a busy machine) past the read limit would hold back the client's bytes and
    not the server's timer, and make a punctual client look late. A process of its own keeps
    sending into the kernel's buffers, which the server reads before its timers when it runs."""
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SCHEDULED_CLIENT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    raw, errors = await asyncio.wait_for(client.communicate(pickle.dumps((port, parts))), 30)
    assert client.returncode == 0, errors.decode()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return status_line, headers, body


def _timed_out(status: str, headers: dict[str, str], body: bytes) -> str:
    assert status.startswith("HTTP/1.1 408"), status
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    problem = json.loads(body)
    assert problem["code"] == "REQUEST_TIMEOUT" and problem["status"] == 408
    detail: str = problem["detail"]
    return detail


async def test_a_head_that_stops_midway_is_a_408_problem(server_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    started = time.monotonic()
    writer.write(b"POST /stalled HTTP/1.1\r\nHost: mneme\r\nContent-")
    await writer.drain()
    detail = _timed_out(*await _answer(reader))
    assert "request line and headers" in detail
    assert time.monotonic() - started >= READ_TIMEOUT
    writer.close()


async def test_a_head_sent_a_byte_at_a_time_gets_no_more_time(server_port: int) -> None:
    head = b"GET /trickled HTTP/1.1\r\nHost: mneme\r\nX-Padding: " + b"a" * 40 + b"\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    started = time.monotonic()

    async def trickle() -> None:
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            # Each byte well within the limit; the whole head (~8 s) far beyond it.
            await asyncio.sleep(READ_TIMEOUT / 4)

    trickling = asyncio.create_task(trickle())
    try:
        _timed_out(*await _answer(reader))
    finally:
        trickling.cancel()
    assert time.monotonic() - started < 4 * READ_TIMEOUT
    writer.close()


async def test_a_body_that_stops_midway_is_a_408_and_its_request_sees_the_client_gone(
    server_port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    writer.write(b"POST /half HTTP/1.1\r\nHost: mneme\r\nContent-Length: 100\r\n\r\n" + b"x" * 40)
    await writer.drain()
    status, headers, body = await _answer(reader)
    detail = _timed_out(status, headers, body)
    assert "request body" in detail
    # The request stopped reading: it answered nothing besides the 408.
    assert body.count(b"{") == 1
    await asyncio.sleep(0.1)
    assert "/half" in disconnected
    writer.close()


async def test_a_body_that_keeps_flowing_may_take_longer_in_all(server_port: int) -> None:
    head = b"POST /slow HTTP/1.1\r\nHost: mneme\r\nContent-Length: 40\r\nConnection: close\r\n\r\n"
    # Four parts, each within the limit of the one before: twice the limit in all.
    parts = [(0.0, head)] + [(READ_TIMEOUT / 2, b"y" * 10)] * 4
    status, _, body = await _sent_from_another_process(server_port, parts)
    assert status.startswith("HTTP/1.1 200"), status
    assert body == b"40"


async def test_a_body_the_server_stopped_reading_is_not_late(server_port: int) -> None:
    body = b"z" * (1024 * 1024)
    request = (
        b"POST /late-reader HTTP/1.1\r\nHost: mneme\r\nConnection: close\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    status, _, answer = await _sent_from_another_process(server_port, [(0.0, request)])
    assert status.startswith("HTTP/1.1 200"), status
    assert answer == str(len(body)).encode()


async def test_a_head_behind_a_request_still_answered_is_timed_out_after_that_answer(
    server_port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    started = time.monotonic()
    writer.write(
        b"GET /slow-answer HTTP/1.1\r\nHost: mneme\r\n\r\n"
        + b"GET /never-finished HTTP/1.1\r\nHost: mn"
    )
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), timeout=10)
    # The first answer whole, then the 408 of the head that never ended: never one inside
    # the other, though that head was late long before the first answer was done.
    first, _, rest = raw.partition(b"\r\n\r\nslow")
    assert first.startswith(b"HTTP/1.1 200") and b"408" not in first
    assert rest.startswith(b"HTTP/1.1 408"), raw
    assert time.monotonic() - started >= 3 * READ_TIMEOUT
    writer.close()


async def test_a_connection_that_sends_nothing_is_closed_without_an_answer(
    server_port: int,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), timeout=10) == b""
    assert time.monotonic() - started >= READ_TIMEOUT
    writer.close()


async def test_a_kept_alive_connection_waits_between_requests_as_before(server_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server_port)
    request = b"POST /kept HTTP/1.1\r\nHost: mneme\r\nContent-Length: 3\r\n\r\nabc"
    writer.write(request)
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    assert first.startswith(b"HTTP/1.1 200")
    assert await asyncio.wait_for(reader.readexactly(1), timeout=10) == b"3"
    # Idle for longer than the read limit, well within uvicorn's keep-alive of 5 s.
    await asyncio.sleep(3 * READ_TIMEOUT)
    writer.write(request.replace(b"/kept", b"/again"))
    await writer.drain()
    second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
    assert second.startswith(b"HTTP/1.1 200")
    writer.close()


def _requests_counted(app: FastAPI, status: int) -> float:
    """The service's count of POSTs to the memories route that ended with `status` (those
    the protocol or the input guard ended before the route ran count under it too)."""
    state: AppState = app.state.mneme
    counted = state.metrics.registry.get_sample_value(
        "mneme_http_requests_total",
        {"method": "POST", "route": "/v1/users/{user_id}/memories", "status": str(status)},
    )
    return counted or 0.0


def _unfinished_memory(settings: Settings, tenant: str, user: str) -> bytes:
    authorization = bearer(settings, tenant, user)["Authorization"]
    return (
        b"POST /v1/users/me/memories HTTP/1.1\r\nHost: mneme\r\n"
        + f"Authorization: {authorization}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        + b'{"text": "Half a'
    )


async def test_the_service_stores_nothing_of_a_timed_out_request_and_counts_its_408(
    service_port: int, app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    before = {status: _requests_counted(app, status) for status in (408, 422, 500)}
    reader, writer = await asyncio.open_connection("127.0.0.1", service_port)
    writer.write(_unfinished_memory(settings, tenant, "slow-writer"))
    await writer.drain()
    _timed_out(*await _answer(reader))
    writer.close()
    await asyncio.sleep(0.2)
    # Counted (and logged) as what the client got, not as the truncated body's 422 or a 500.
    assert _requests_counted(app, 408) == before[408] + 1
    assert _requests_counted(app, 422) == before[422]
    assert _requests_counted(app, 500) == before[500]
    listed = await client.get(
        "/v1/users/me/memories", headers=bearer(settings, tenant, "slow-writer")
    )
    assert listed.status_code == 200 and listed.json()["items"] == []


async def test_a_client_gone_before_its_body_was_in_is_counted_as_499(
    patient_service_port: int, app: FastAPI, settings: Settings, tenant: str
) -> None:
    # With the short read limit, a stall of the shared loop past it makes the request's end a
    # race between the client's close and the server's 408; the patient server has no such race.
    before = {status: _requests_counted(app, status) for status in (408, 422, 499, 500)}
    _, writer = await asyncio.open_connection("127.0.0.1", patient_service_port)
    writer.write(_unfinished_memory(settings, tenant, "gone-writer"))
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.close()
    deadline = time.monotonic() + 5
    # The count is the only sign the request has ended.
    while _requests_counted(app, 499) == before[499] and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    assert _requests_counted(app, 499) == before[499] + 1
    assert _requests_counted(app, 408) == before[408]
    assert _requests_counted(app, 422) == before[422]
    assert _requests_counted(app, 500) == before[500]


async def _open_with_a_small_window(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection whose receive buffer is small: what it does not read stays on the server."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=raw, limit=16 * 1024)


async def test_an_answer_its_client_does_not_read_is_dropped_and_its_request_ends(
    server_port: int,
) -> None:
    reader, writer = await _open_with_a_small_window(server_port)
    sent = answers_sent.setdefault("/large-unread", asyncio.Event())
    started = time.monotonic()
    writer.write(b"GET /large-unread HTTP/1.1\r\nHost: mneme\r\n\r\n")
    await writer.drain()
    # The request ends, though its client takes none of the answer...
    await asyncio.wait_for(sent.wait(), timeout=10 * READ_TIMEOUT)
    assert time.monotonic() - started >= READ_TIMEOUT
    # ... and its connection is gone: what the client then reads stops short of the answer.
    received = 0
    with contextlib.suppress(ConnectionResetError):
        while chunk := await asyncio.wait_for(reader.read(1024 * 1024), timeout=10):
            received += len(chunk)
    assert received < LARGE_ANSWER_BYTES
    writer.close()


async def test_an_answer_read_slowly_but_steadily_arrives_whole(server_port: int) -> None:
    reader, writer = await _open_with_a_small_window(server_port)
    writer.write(b"GET /large-read HTTP/1.1\r\nHost: mneme\r\nConnection: close\r\n\r\n")
    await writer.drain()
    await asyncio.sleep(READ_TIMEOUT / 2)  # reads nothing at first, for less than the limit
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    received = 0
    while chunk := await asyncio.wait_for(reader.read(1024 * 1024), timeout=10):
        received += len(chunk)
    assert received == LARGE_ANSWER_BYTES
    writer.close()
