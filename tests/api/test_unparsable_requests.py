"""Requests the HTTP server cannot parse are answered with a problem document, not plain text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from starlette.types import Receive, Scope, Send

from service.http_protocol import MAX_URL_BYTES, ProblemHttpToolsProtocol
from tests.fixtures.loopback import served_in_loop


async def _ok(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


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
    assert status.startswith("HTTP/1.1 200") and b"ok" in body
