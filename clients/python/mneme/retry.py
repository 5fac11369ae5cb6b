"""Retries with back-off for requests that are safe to send twice.

A request is retried only when repeating it cannot apply it twice: the idempotent methods (GET,
HEAD, OPTIONS, PUT, DELETE), any request carrying an `Idempotency-Key` (the service replays
the first answer to a repeat), and the POST operations that only read (a search, a context
block: `x-mneme-reads-only` in the OpenAPI document). It is retried on 429, 502, 503 and 504
and on connection failures, after the wait the service asked for (`Retry-After`, else the
`RateLimit` field's `t` of an exhausted policy), else after an exponential back-off with full
jitter. A wait longer than `max_delay` is not waited for: the answer goes back to the caller,
whose exception carries `retry_after`.

A DELETE is idempotent in what it leaves behind, not in its answer: repeated after the first
attempt's answer was lost, it finds nothing and answers 404. So a retried DELETE answered 404
after an attempt that may have been applied (it got no answer, or a gateway's 502 or 504) is
done: the caller gets a 204 No Content in place of the 404, the resource being gone either way.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})

READS_ONLY_POSTS = re.compile(r"/v1/users/[^/]+/(?:memories/search|context)$")
"""The paths of the POST operations the service marks `x-mneme-reads-only` (after any prefix
the base URL adds)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry; `RetryPolicy(attempts=1)` never retries."""

    attempts: int = 4
    backoff: float = 0.5
    max_delay: float = 30.0
    statuses: frozenset[int] = field(default=frozenset({429, 502, 503, 504}))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for, in seconds: `Retry-After` (seconds or an HTTP date), else
    the longest `t` among the `RateLimit` policies with nothing remaining."""
    headers = httpx.Headers(headers)
    value = headers.get("retry-after")
    if value is not None:
        value = value.strip()
        if value.isdigit():
            return float(value)
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    exhausted: list[float] = []
    for item in headers.get("ratelimit", "").split(","):
        parameters = dict(part.strip().split("=", 1) for part in item.split(";")[1:] if "=" in part)
        remaining, reset = parameters.get("r"), parameters.get("t")
        if remaining == "0" and reset is not None and reset.isdigit():
            exhausted.append(float(reset))
    return max(exhausted) if exhausted else None


def is_retryable(request: httpx.Request) -> bool:
    """Whether sending `request` again cannot apply it twice."""
    return (
        request.method in IDEMPOTENT_METHODS
        or "idempotency-key" in request.headers
        or (request.method == "POST" and READS_ONLY_POSTS.search(request.url.path) is not None)
    )


# The answers of a gateway whose upstream may have applied the request before failing.
_OUTCOME_UNKNOWN_STATUSES = frozenset({502, 504})


def _gone(request: httpx.Request, response: httpx.Response, may_have_applied: bool) -> bool:
    """Whether `response` is a retried DELETE's 404 whose resource an earlier attempt may have
    deleted (see the module docstring)."""
    return may_have_applied and request.method == "DELETE" and response.status_code == 404


def _deleted(request: httpx.Request) -> httpx.Response:
    return httpx.Response(204, request=request)


def _delay(policy: RetryPolicy, attempt: int, response: httpx.Response | None) -> float | None:
    """Seconds to wait before the next attempt, or None when not to retry."""
    if attempt >= policy.attempts:
        return None
    if response is not None:
        if response.status_code not in policy.statuses:
            return None
        asked = retry_after_seconds(response.headers)
        if asked is not None:
            return asked if asked <= policy.max_delay else None
    # Full jitter: callers that failed together do not come back together.
    return random.uniform(0, min(policy.max_delay, policy.backoff * 2 ** (attempt - 1)))  # noqa: S311


class RetryingTransport(httpx.BaseTransport):
    """An httpx transport that retries what is safe to retry (see the module docstring)."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._policy = policy or RetryPolicy()
        self._transport = transport or httpx.HTTPTransport()
        self._sleep = sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        retryable = is_retryable(request)
        may_have_applied = False
        attempt = 1
        while True:
            try:
                response = self._transport.handle_request(request)
            except httpx.TransportError:
                delay = _delay(self._policy, attempt, None) if retryable else None
                if delay is None:
                    raise
                may_have_applied = True
            else:
                if _gone(request, response, may_have_applied):
                    response.close()
                    return _deleted(request)
                delay = _delay(self._policy, attempt, response) if retryable else None
                if delay is None:
                    return response
                response.close()
                may_have_applied |= response.status_code in _OUTCOME_UNKNOWN_STATUSES
            self._sleep(delay)
            attempt += 1

    def close(self) -> None:
        self._transport.close()


class AsyncRetryingTransport(httpx.AsyncBaseTransport):
    """The asynchronous `RetryingTransport`."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._policy = policy or RetryPolicy()
        self._transport = transport or httpx.AsyncHTTPTransport()
        self._sleep = sleep

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        retryable = is_retryable(request)
        may_have_applied = False
        attempt = 1
        while True:
            try:
                response = await self._transport.handle_async_request(request)
            except httpx.TransportError:
                delay = _delay(self._policy, attempt, None) if retryable else None
                if delay is None:
                    raise
                may_have_applied = True
            else:
                if _gone(request, response, may_have_applied):
                    await response.aclose()
                    return _deleted(request)
                delay = _delay(self._policy, attempt, response) if retryable else None
                if delay is None:
                    return response
                await response.aclose()
                may_have_applied |= response.status_code in _OUTCOME_UNKNOWN_STATUSES
            await self._sleep(delay)
            attempt += 1

    async def aclose(self) -> None:
        await self._transport.aclose()
