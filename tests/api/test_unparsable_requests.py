"""Requests the HTTP server cannot parse, or will not hold, are answered with a problem document,
not plain text."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator

import pytest
from starlette.types import Receive, Scope, Send

from service.http_protocol import MAX_HEAD_BYTES, MAX_URL_BYTES, ProblemHttpToolsProtocol
from tests.fixtures.loopback import served_in_loop


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    """Reads the whole body and answers `ok` and the body's length (`/slow`: after a while)."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(0.5)
    length = 0
    while True:
        message = await receive()
        length += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    answer = b"ok %d" % length
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(answer)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture
async def server_port() -> AsyncIterator[int]:
    async with served_in_loop(_ok, http=ProblemHttpToolsProtocol, log_level="error") as port:
        yield port


async def _exchange(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return status_line, headers, body


async def test_an_overlong_url_is_a_414_problem(server_port: int) -> None:
    target = b"/v1/users/me/memories?category=" + b"a" * (MAX_URL_BYTES + 35_000)
    status, headers, body = await _exchange(
        server_port, b"GET " + target + b" HTTP/1.1\r\nHost: mneme\r\n\r\n"
    )
    assert status.startswith("HTTP/1.1 414")
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["code"] == "URI_TOO_LONG" and problem["status"] == 414


async def test_a_malformed_request_line_is_a_400_problem(server_port: int) -> None:
    status, headers, body = await _exchange(server_port, b"GET / HTTP/1.1\r\nHost mneme\r\n\r\n")
    assert status.startswith("HTTP/1.1 400")
    assert headers["content-type"] == "application/problem+json"
    assert json.loads(body)["code"] == "BAD_REQUEST"


async def test_ordinary_requests_are_untouched(server_port: int) -> None:
    status, _, body = await _exchange(
        server_port, b"GET /?q=short HTTP/1.1\r\nHost: mneme\r\nConnection: close\r\n\r\n"
    )
    assert status.startswith("HTTP/1.1 200") and body == b"ok 0"


async def _open(port: int) -> socket.socket:
    raw = socket.socket()
    raw.setblocking(False)
    await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
    return raw


async def _received_until_closed(raw: socket.socket, within: float) -> bytes:
    """Everything the server sent before it closed the connection, read off the socket itself:
    a server that closes with some of the request unread resets the connection, and the kernel
    still hands over what arrived before the reset (asyncio's streams would drop it)."""
    loop = asyncio.get_running_loop()
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := await asyncio.wait_for(loop.sock_recv(raw, 65536), timeout=within):
            received += chunk
    return received


async def _send_an_endless_header(raw: socket.socket, before: bytes = b"") -> None:
    """`before`, then a head whose one header never ends, far longer than the bound; stops when
    the server hangs up."""
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(raw, before + b"GET /junk HTTP/1.1\r\nHost: mneme\r\nX-Junk: ")
    with contextlib.suppress(OSError):
        for _ in range(64):
            await loop.sock_sendall(raw, b"a" * (64 * 1024))


def _refused_head(answer: bytes) -> None:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b"content-type: application/problem+json" in head
    assert b"connection: close" in head
    problem = json.loads(body)
    assert problem["code"] == "REQUEST_HEADER_FIELDS_TOO_LARGE" and problem["status"] == 431


async def test_a_head_that_grows_past_the_bound_is_a_431_problem_at_once(server_port: int) -> None:
    raw = await _open(server_port)
    started = time.monotonic()
    sending = asyncio.create_task(_send_an_endless_header(raw))
    try:
        # Long before the read timeout (30 s) would end the head.
        answer = await _received_until_closed(raw, within=10)
    finally:
        sending.cancel()
        raw.close()
    assert time.monotonic() - started < 10
    _refused_head(answer)


async def test_a_head_too_large_behind_a_request_still_answered_is_refused_after_that_answer(
    server_port: int,
) -> None:
    raw = await _open(server_port)
    sending = asyncio.create_task(
        _send_an_endless_header(raw, before=b"GET /slow HTTP/1.1\r\nHost: mneme\r\n\r\n")
    )
    try:
        answer = await _received_until_closed(raw, within=10)
    finally:
        sending.cancel()
        raw.close()
    # The first answer whole, then the refusal: never one inside the other.
    first, _, rest = answer.partition(b"ok 0")
    assert first.startswith(b"HTTP/1.1 200") and b"431" not in first, answer[:400]
    _refused_head(rest)


async def test_a_head_just_under_the_bound_sent_in_small_writes_is_served(
    server_port: int,
) -> None:
    start = b"GET /large-head HTTP/1.1\r\nHost: mneme\r\nConnection: close\r\n"
    padding = MAX_HEAD_BYTES - len(start) - 200
    head = start + b"X-Token: " + b"t" * padding + b"\r\n\r\n"
    assert MAX_HEAD_BYTES - 200 < len(head) < MAX_HEAD_BYTES
    raw = await _open(server_port)
    loop = asyncio.get_running_loop()
    try:
        for offset in range(0, len(head), 1024):
            await loop.sock_sendall(raw, head[offset : offset + 1024])
            # Each write its own read on the server's side.
            await asyncio.sleep(0)
        answer = await _received_until_closed(raw, within=10)
    finally:
        raw.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert answer.endswith(b"ok 0")


async def test_a_large_body_does_not_count_against_the_heads_around_it(server_port: int) -> None:
    body = b"b" * (4 * MAX_HEAD_BYTES)
    tail = len(body) - 3 * MAX_HEAD_BYTES // 2
    parts = (
        b"POST /upload HTTP/1.1\r\n",
        # The POST's head ends in a read that holds much of its body too...
        b"Host: mneme\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:tail],
        # ... and the GET's head begins in a read that holds the end of that body.
        body[tail:] + b"GET /after HTTP/1.1\r\n",
        b"Host: mneme\r\nConnection: close\r\n\r\n",
    )
    raw = await _open(server_port)
    loop = asyncio.get_running_loop()
    try:
        for part in parts:
            await loop.sock_sendall(raw, part)
            await asyncio.sleep(0.1)
        answer = await _received_until_closed(raw, within=10)
    finally:
        raw.close()
    assert answer.count(b"HTTP/1.1 200") == 2, answer[:400]
    assert b"ok %d" % len(body) in answer and answer.endswith(b"ok 0")
