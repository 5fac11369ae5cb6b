"""Per-caller request rate limits (slowapi over the `limits` library).

The key is a hash of the caller's credential, falling back to the client address, so one
tenant's busy agent cannot starve another's. Storage is in-process by default; set
MNEME_RATE_LIMIT_STORAGE_URI (e.g. redis://…) to share limits across replicas.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from slowapi import Limiter
from slowapi.errors import RateLimitExceeded
from slowapi.middleware import SlowAPIASGIMiddleware

from service.config import Settings
from service.errors import problem_response


def caller_key(request: Request) -> str:
    authorization = request.headers.get("authorization")
    if authorization:
        return "cred:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
    client = request.client.host if request.client else "unknown"
    return "addr:" + client


async def _handle_rate_limited(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RateLimitExceeded)
    limiter: Limiter = request.app.state.limiter
    response = problem_response(
        request,
        status=429,
        code="RATE_LIMITED",
        title="Too many requests",
        detail=f"Rate limit exceeded: {exc.detail}.",
        limit=str(exc.detail),
    )
    limiter._inject_headers(response, request.state.view_rate_limit)  # sets headers in place
    return response


def install_rate_limits(app: FastAPI, settings: Settings, exempt: list[Callable[..., Any]]) -> None:
    limiter = Limiter(
        key_func=caller_key,
        application_limits=[settings.rate_limit_default],
        headers_enabled=True,
        storage_uri=settings.rate_limit_storage_uri,
        enabled=settings.rate_limit_enabled,
    )
    for endpoint in exempt:
        limiter.exempt(endpoint)  # type: ignore[no-untyped-call]
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _handle_rate_limited)
    app.add_middleware(SlowAPIASGIMiddleware)
