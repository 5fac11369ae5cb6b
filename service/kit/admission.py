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

A place is for work the process does. A request that waits on a remote model with no database
connection held (`outside_the_gate`: a question or a text sent to a hosted embedding model, a
chat model's call between two transactions) gives its place up meanwhile, for a round trip of
tenths of a second to seconds, and takes one again when the model has answered, ahead of every
request still waiting: it was let in already.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection
from contextvars import ContextVar
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
        return None if await self._wait_for(turn) else "waited_too_long"

    async def enter_again(self) -> bool:
        """Take a place again for a holder that gave its own up for a while (`Place.outside`):
        ahead of every request waiting, and never refused for a standing queue; False when
        none came free within `wait_seconds`."""
        if self.running < self.capacity and not self._waiting:
            self.running += 1
            self.on_change(self.running, 0)
            return True
        loop = asyncio.get_running_loop()
        if self._waited_since is None:
            self._waited_since = loop.time()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.appendleft(turn)
        return await self._wait_for(turn)

    async def _wait_for(self, turn: asyncio.Future[None]) -> bool:
        """Wait, queued as `turn`, for a place: whether one came within `wait_seconds`."""
        self.on_change(self.running, len(self._waiting))
        try:
            # Not `wait_for`: cancelled as the place arrives, it returns the place and drops the
            # cancellation; awaited as is, a cancelled request always sees its cancellation.
            async with asyncio.timeout(self.wait_seconds):
                await turn
        except TimeoutError:
            # Handed a place as the wait ran out: it is this request's.
            return turn.done() and not turn.cancelled()
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.leave()  # handed a place it will not use: the next in line takes it
            raise
        finally:
            self._forget(turn)
        return True

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


class Place:
    """One request's place in a gate, while it holds one."""

    def __init__(self, gate: AdmissionGate, on_refused: Callable[[Refusal], None]) -> None:
        self.gate = gate
        self.on_refused = on_refused
        self.held = False

    async def take(self) -> Refusal | None:
        refusal = await self.gate.enter()
        self.held = refusal is None
        return refusal

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.gate.leave()

    @contextlib.asynccontextmanager
    async def outside(self) -> AsyncIterator[None]:
        """The block runs without this place, which is taken again after it (ahead of the
        requests waiting: `AdmissionGate.enter_again`); if none comes free in time, the
        request is refused `SERVICE_BUSY` there. A block that raises (or a request cancelled
        in it) ends the request: nothing is taken again."""
        if not self.held:
            yield
            return
        self.give_back()
        yield
        if not await self.gate.enter_again():
            self.on_refused("waited_too_long")
            gate = self.gate
            raise ServiceBusy(
                f"no place among its {gate.capacity} came free within {gate.wait_seconds:g} s "
                "of a remote model's answer"
            )
        self.held = True


_current_place: ContextVar[Place | None] = ContextVar("mneme_admission_place", default=None)


@contextlib.asynccontextmanager
async def outside_the_gate() -> AsyncIterator[None]:
    """The block runs without the current request's place in the admission gate (see the
    module's docstring): for a wait on a remote model with no database connection held. Outside
    a request let in by a gate (a background job, a test's app), it just runs the block."""
    place = _current_place.get()
    if place is None:
        yield
        return
    async with place.outside():
        yield


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
        place = Place(self.gate, self.on_refused)
        refusal = await place.take()
        if refusal is not None:
            self.on_refused(refusal)
            await self._refuse(scope, receive, send, refusal)
            return
        # The request's own work runs in this task or tasks started from it, which see it.
        entered = _current_place.set(place)
        try:
            await self.app(scope, receive, send)
        finally:
            _current_place.reset(entered)
            place.give_back()

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
