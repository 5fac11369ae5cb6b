"""Request rate limits per principal and per tenant, shared by every replica through Redis.

Limits are charged once the caller is authenticated, keyed by who it is (tenant + user, or
the API key's id) and never by the raw credential: the same token spelled `bearer` or with
an extra space, or a fresh JWT of the same user, draws on the same quota. A principal that
is over its own limit is refused before it can use up its tenant's ceiling, so one noisy
agent cannot starve its colleagues, and one tenant's traffic cannot starve another's.
Requests that fail authentication are charged to the client address, which bounds
credential guessing.

`limits` (the engine slowapi is built on) does the counting, with a sliding-window counter:
the current window's count plus the previous window's, weighted by how much of it still
overlaps the last `window` seconds. Two counters per key, where a moving window keeps one
timestamp per request: in process, the moving window's expiry pass hands every key's list to a
worker thread after each request, which cost four times the CPU per request with two thousand active
callers (docs/benchmarks.md). The counter assumes the previous window's requests
were spread evenly, so it can admit a request a little before an exact moving window would;
the failed-authentication limit, which guards credentials and sees few events, keeps the exact
moving window. Storage is in-process by default;
MNEME_RATE_LIMIT_STORAGE_URI=redis://host:6379/0 shares the counters across replicas (through
redis-py).

When the store is unreachable the limits fail open (logged): requests are served, unlimited.

Every response of an API route reports the caller's quotas in the IETF draft's structured
fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy` (quota `q`, window `w`
in seconds per policy) and `RateLimit` (remaining `r`, seconds `t` until the window frees a
request). A refusal is a 429 `RATE_LIMITED` problem with `Retry-After`.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from limits import RateLimitItem, parse
from limits.aio.storage import Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.types import Scope

from service.auth.principal import Principal
from service.config import Settings
from service.errors import RateLimited
from service.kit.response_headers import ResponseHeadersMiddleware

logger = logging.getLogger("mneme.rate_limits")

NAMESPACE = "mneme"
STATE_KEY = "rate_limit"


@dataclass(frozen=True)
class Policy:
    name: str
    item: RateLimitItem


@dataclass(frozen=True)
class PolicyState:
    policy: Policy
    remaining: int
    reset_seconds: int


class RateLimiter:
    """The two policies and the store their counters live in. Failed authentications are
    limited before any of this, per client address (`service.auth.failure_limit`)."""

    def __init__(self, settings: Settings, counters: Storage) -> None:
        self.principal = Policy("principal", parse(settings.rate_limit_default))
        self.tenant = Policy("tenant", parse(settings.rate_limit_tenant))
        self._strategy = SlidingWindowCounterRateLimiter(counters)

    async def charge_principal(self, request: Request, principal: Principal) -> None:
        """Count one request of `principal`; raise `RateLimited` when a quota is spent."""
        # Tenant and user ids never contain '/', so these keys cannot collide.
        who = f"{principal.tenant_id}/{principal.kind}/{principal.subject}"
        own = await self._charge(request, self.principal, who, ())
        if own is not None:
            await self._charge(request, self.tenant, principal.tenant_id, (own,))

    async def _charge(
        self,
        request: Request,
        policy: Policy,
        key: str,
        earlier: tuple[PolicyState, ...],
    ) -> PolicyState | None:
        try:
            allowed = await self._strategy.hit(policy.item, NAMESPACE, policy.name, key)
            reset_at, remaining = await self._strategy.get_window_stats(
                policy.item, NAMESPACE, policy.name, key
            )
        except StorageError as exc:
            # Fail open: an unreachable counter store must not turn every request into a 5xx.
            # The request goes unlimited (and without RateLimit headers) until it is back.
            logger.warning("rate-limit storage unavailable, not limiting: %s", exc)
            return None
        state = PolicyState(policy, remaining, max(0, math.ceil(reset_at - time.time())))
        states = (*earlier, state)
        request.state.rate_limit = states
        if not allowed:
            retry_after = max(1, state.reset_seconds)
            raise RateLimited(
                f"The {policy.name} limit of {policy.item} is spent; retry in {retry_after} s.",
                headers={"Retry-After": str(retry_after)},
                policy=policy.name,
                limit=str(policy.item),
            )
        return state


def policy_header(states: tuple[PolicyState, ...]) -> str:
    return ", ".join(
        f'"{s.policy.name}";q={s.policy.item.amount};w={s.policy.item.get_expiry()}' for s in states
    )


def state_header(states: tuple[PolicyState, ...]) -> str:
    return ", ".join(f'"{s.policy.name}";r={s.remaining};t={s.reset_seconds}' for s in states)


class RateLimitHeadersMiddleware(ResponseHeadersMiddleware):
    """Add `RateLimit-Policy` and `RateLimit` to every response whose request was charged,
    error responses included (the charge happens in the authentication dependency)."""

    def set_headers(self, scope: Scope, headers: MutableHeaders) -> None:
        states = scope.get("state", {}).get(STATE_KEY)
        if states:
            headers["RateLimit-Policy"] = policy_header(states)
            headers["RateLimit"] = state_header(states)
