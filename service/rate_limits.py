"""Per-caller request rate limits, enforced by a pure-ASGI middleware over `limits`.

`limits` is the engine slowapi is built on. slowapi's own middleware finds the endpoint by
scanning `app.routes` for an `endpoint` attribute; FastAPI ≥0.16x nests included routers
(`_IncludedRouter`), so that scan finds nothing and silently exempts every API route. We
therefore drive `limits` directly, keyed per credential, which is all we need.

The key is a hash of the caller's credential, falling back to the client address, so one
tenant's busy agent cannot starve another's. Storage is in-process by default; set
MNEME_RATE_LIMIT_STORAGE_URI (e.g. async+redis://…) to share limits across replicas.
"""

from __future__ import annotations

import hashlib
import math
import time

from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import problem_response

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def caller_key(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return "cred:" + hashlib.sha256(value).hexdigest()[:32]
    client = scope.get("client")
    return "addr:" + (client[0] if client else "unknown")


class RateLimitMiddleware:
    def __init__(self, app: ASGIApp, limit: str, storage_uri: str) -> None:
        self.app = app
        self.limit = parse(limit)
        uri = storage_uri if storage_uri.startswith("async+") else "async+" + storage_uri
        self.strategy = MovingWindowRateLimiter(storage_from_string(uri))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)
        if await self.strategy.hit(self.limit, "mneme", key):
            await self.app(scope, receive, send)
            return
        reset_at, _remaining = await self.strategy.get_window_stats(self.limit, "mneme", key)
        retry_after = max(1, math.ceil(reset_at - time.time()))
        response = problem_response(
            Request(scope),
            status=429,
            code="RATE_LIMITED",
            title="Too many requests",
            detail=f"Rate limit of {self.limit} per caller exceeded; retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
            limit=str(self.limit),
        )
        await response(scope, receive, send)
