"""A bound on the requests one process works on at once, and on how long the rest wait.

A process has a fixed number of database connections and one event loop. Past what they can
serve, every request it accepts waits for the ones before it: under a load above its capacity
the wait grows for as long as the load lasts, every client gets its answer late, and the
answers of clients that gave up in the meantime are computed all the same. The gate lets at
most `capacity` requests in; the next ones wait, first come first in, for one to finish.

- A burst (a wait that clears) is absorbed: a request waits up to `wait_seconds` for a place.
- A standing queue (requests have been waiting without a break for longer than
  `STANDING_AFTER_SECONDS`) is the sign of a load above capacity, not of a burst: a request
  arriving then is refused at once rather than added to the back of it. Those already waiting
  keep their place, so the queue drains, and admits again once it has been empty.

A refused request is answered `503 SERVICE_BUSY` with `Retry-After` (`AdmissionMiddleware`,
`service.errors.ServiceBusy`): clients back off and the requests let in are answered in the
time they take to serve. This is the controlled-delay rule of network queues (CoDel) applied
to requests: a queue should absorb a burst and never stand.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Collection
from typing import Literal

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import ServiceBusy, handle_domain_error

# How long requests may have been waiting without a break before the queue counts as standing:
# well above a burst's wait (a burst of a few hundred small requests clears in a fraction of a
# second) and well below a client's patience.
STANDING_AFTER_SECONDS = 1.0

Refusal = Literal["standing_queue", "waited_too_long"]


def _unobserved(running: int, waiting: int) -> None:
    return None


class AdmissionGate:
    """At most `capacity` holders at once; the others wait, first come first in."""

    def __init__(
        self,
        capacity: int,
        wait_seconds: float,
        on_change: Callable[[int, int], None] | None = None,
        standing_after_seconds: float = STANDING_AFTER_SECONDS,
    ) -> None:
        self.capacity = capacity
        self.wait_seconds = wait_seconds
        self.standing_after_seconds = standing_after_seconds
        # Told the places taken and the requests waiting whenever either changes.
        self.on_change = on_change or _unobserved
        self.running = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        # When the queue last went from empty to waited in (None: it is empty).
        self._waited_since: float | None = None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def enter(self) -> Refusal | None:
        """Take a place (None), or say why not; a place taken is given back with `leave`."""
        if self.running < self.capacity and not self._waiting:
            self.running += 1
            self.on_change(self.running, 0)
            return None
        loop = asyncio.get_running_loop()
        now = loop.time()
        if (
            self._waited_since is not None
            and now - self._waited_since > self.standing_after_seconds
        ):
            return "standing_queue"
        if self._waited_since is None:
            self._waited_since = now
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.append(turn)
        self.on_change(self.running, len(self._waiting))
        try:
            # Not `wait_for`: cancelled as the place arrives, it returns the place and drops the
            # cancellation; awaited as is, a cancelled request always sees its cancellation.
            async with asyncio.timeout(self.wait_seconds):
                await turn
        except TimeoutError:
            if turn.done() and not turn.cancelled():
                return None  # handed a place as the wait ran out: it is this request's
            return "waited_too_long"
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.leave()  # handed a place it will not use: the next in line takes it
            raise
        finally:
            self._forget(turn)
        return None

    def leave(self) -> None:
        """Give a place back: to the first request still waiting, else to the count."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the place passes on; `running` stays as it is
                self._changed()
                return
        self.running -= 1
        self._changed()

    def _forget(self, turn: asyncio.Future[None]) -> None:
        if not turn.done():
            turn.cancel()
        with contextlib.suppress(ValueError):  # taken off the queue by `leave` already
            self._waiting.remove(turn)
        self._changed()

    def _changed(self) -> None:
        """After a place or a waiter came or went: an emptied queue no longer stands."""
        if not self._waiting:
            self._waited_since = None
        self.on_change(self.running, len(self._waiting))


class AdmissionMiddleware:
    """Every request but the operational ones (`exempt_paths`: liveness, readiness, metrics,
    which must answer however busy the process is) goes through `gate`; a refused one is
    answered 503 `SERVICE_BUSY` before anything inside this middleware runs for it. Installed
    once a request's body is in, so that a client sending its body slowly holds no place."""

    def __init__(
        self,
        app: ASGIApp,
        gate: AdmissionGate,
        exempt_paths: Collection[str],
        on_refused: Callable[[Refusal], None],
    ) -> None:
        self.app = app
        self.gate = gate
        self.exempt_paths = frozenset(exempt_paths)
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt_paths:
            await self.app(scope, receive, send)
            return
        refusal = await self.gate.enter()
        if refusal is not None:
            self.on_refused(refusal)
            await self._refuse(scope, receive, send, refusal)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.leave()

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
        gate = self.gate
        if refusal == "standing_queue":
            why = (
                f"requests have been waiting for one of its {gate.capacity} places for over "
                f"{gate.standing_after_seconds:g} s"
            )
        else:
            why = f"no place among its {gate.capacity} came free within {gate.wait_seconds:g} s"
        response = await handle_domain_error(Request(scope), ServiceBusy(why))
        await response(scope, receive, send)
