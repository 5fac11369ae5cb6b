"""Failed authentications are counted per client address; past the limit they answer 429.

A credential is always checked, whatever its address did before: a client that keeps sending
made-up credentials must not lock out the valid ones that share its address (users behind one
NAT or proxy, a service whose neighbour misbehaves). Once an address has failed `limit` times
in the moving window, each further failure from it is answered 429 with `Retry-After` instead
of 401, until the window frees up; a valid credential from it is served as any other. A
guess costs one signature check or one primary-key lookup either way, as every request's
authentication does; a flood of requests as such is for the ingress to limit.

The counters live where the request rate limits live (MNEME_RATE_LIMIT_STORAGE_URI): in
process by default, and shared by every replica through Redis, so N replicas do not allow N
times the failures. Like the request limits, they fail open when the store is unreachable.
The address is the peer's, or behind a proxy in MNEME_TRUSTED_PROXIES the client's from
X-Forwarded-For (the last entry that proxy did not add itself, which the client cannot forge).
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

    async def record_failure(self, address: str) -> None:
        """Count a failed authentication from `address`; raise 429 once it is past its limit."""
        try:
            if await self._limiter.hit(self._limit, _NAMESPACE, address):
                return
            reset_at, _remaining = await self._limiter.get_window_stats(
                self._limit, _NAMESPACE, address
            )
        except StorageError as exc:
            logger.warning("failed-authentication counters unavailable, not counting: %s", exc)
            return
        retry_after = max(1, math.ceil(reset_at - time.time()))
        raise TooManyFailedAuthentications(
            f"Too many failed authentications from this address; retry in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
            limit=str(self._limit),
        )
