"""Refuse request bodies over a size limit with a 413 problem, before anything parses them.

A declared Content-Length is checked up front. A streamed body (no Content-Length) is read
here, up to the limit, and replayed to the app: the framework turns errors raised while it
reads a body into a generic 400, so the limit has to be enforced before the app reads.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import problem_response


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None:
            if declared > self.max_bytes:
                await self._refuse(scope, receive, send, declared)
                return
            await self.app(scope, receive, send)
            return

        buffered: list[Message] = []
        received = 0
        while True:
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                await self._refuse(scope, receive, send, received)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, attempted: int) -> None:
        response = problem_response(
            Request(scope),
            status=413,
            code="PAYLOAD_TOO_LARGE",
            title="Request body too large",
            detail=f"The request body exceeds {self.max_bytes} bytes.",
            attempted_bytes=attempted,
            max_bytes=self.max_bytes,
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
