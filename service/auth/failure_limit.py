"""Failed authentications are limited per client address, before any database work.

Checking an API key costs a database lookup, and a JWT a signature check: a client sending made-up
credentials in a loop would otherwise get both for free, as fast as it can send. Once an address
has failed `limit` times in the moving window, every credential it sends is answered with 429
until the window frees up, without being looked at. The counters live where the request rate
limits live (MNEME_RATE_LIMIT_STORAGE_URI): in process by default, and shared by every replica
through Redis, so N replicas do not allow N times the failures. Like the request limits, they
fail open when the store is unreachable. Behind a proxy, the address is the client's only if
the proxy's forwarded headers are trusted (uvicorn `--forwarded-allow-ips`).
"""

from __future__ import annotations

import logging
import math
import time

from limits import parse
from limits.aio.storage import Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from service.errors import RateLimited

logger = logging.getLogger("mneme.auth")

_NAMESPACE = "auth-failures"


class TooManyFailedAuthentications(RateLimited):
    title = "Too many failed authentications"


class FailedAuthenticationLimit:
    def __init__(self, limit: str, counters: Storage) -> None:
        self._limit = parse(limit)
        self._limiter = MovingWindowRateLimiter(counters)

    async def check(self, address: str) -> None:
        """Raise 429 when `address` used up its failures."""
        try:
            if await self._limiter.test(self._limit, _NAMESPACE, address):
                return
            reset_at, _remaining = await self._limiter.get_window_stats(
                self._limit, _NAMESPACE, address
            )
        except StorageError as exc:
            logger.warning("failed-authentication counters unavailable, not limiting: %s", exc)
            return
        retry_after = max(1, math.ceil(reset_at - time.time()))
        raise TooManyFailedAuthentications(
            f"Too many failed authentications from this address; retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
            limit=str(self._limit),
        )

    async def record_failure(self, address: str) -> None:
        try:
            await self._limiter.hit(self._limit, _NAMESPACE, address)
        except StorageError as exc:
            logger.warning("failed-authentication counters unavailable, not counting: %s", exc)
