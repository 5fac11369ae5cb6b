"""Failed authentications are limited per client address, in process, before any database work.

Checking an API key costs a database lookup, and a JWT a signature check: a client sending made-up
credentials in a loop would otherwise get both for free, as fast as it can send. Once an address
has failed `limit` times in the moving window, every credential it sends is answered with 429
until the window frees up, without being looked at. Counters live in this process only (a flood
is stopped by whichever replica it reaches); behind a proxy, the address is the client's only if
the proxy's forwarded headers are trusted (uvicorn `--forwarded-allow-ips`).
"""

from __future__ import annotations

import math
import time

from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from service.errors import RateLimited

_NAMESPACE = "auth-failures"


class TooManyFailedAuthentications(RateLimited):
    title = "Too many failed authentications"


class FailedAuthenticationLimit:
    def __init__(self, limit: str) -> None:
        self._limit = parse(limit)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())

    def check(self, address: str) -> None:
        """Raise 429 when `address` used up its failures; costs no I/O."""
        if self._limiter.test(self._limit, _NAMESPACE, address):
            return
        reset_at, _remaining = self._limiter.get_window_stats(self._limit, _NAMESPACE, address)
        retry_after = max(1, math.ceil(reset_at - time.time()))
        raise TooManyFailedAuthentications(
            f"Too many failed authentications from this address; retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
            limit=str(self._limit),
        )

    def record_failure(self, address: str) -> None:
        self._limiter.hit(self._limit, _NAMESPACE, address)
