"""A pure-ASGI middleware that sets headers on a response as it starts.

Starlette's `BaseHTTPMiddleware` would buffer every response and run the app in another task;
headers only need the `http.response.start` message, so the middlewares that add them wrap
`send` and change that message's headers in place.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ResponseHeadersMiddleware(ABC):
    """Calls `set_headers` with the request's scope and the headers of each HTTP response,
    before the response starts; error responses included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.set_headers(scope, MutableHeaders(scope=message))
            await send(message)

        await self.app(scope, receive, send_with_headers)

    @abstractmethod
    def set_headers(self, scope: Scope, headers: MutableHeaders) -> None:
        """Change `headers` of the response to the request `scope` describes."""
