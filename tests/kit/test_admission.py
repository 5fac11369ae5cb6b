"""The admission gate: at most its capacity in, the rest in arrival order, a wait that ends, a
standing queue that refuses newcomers at once, and no place lost to a request that goes."""

from __future__ import annotations

import asyncio

from service.kit.admission import AdmissionGate


async def _waiting(gate: AdmissionGate, count: int) -> None:
    """Let the requests just sent run until they wait for a place: `count` of them wait."""
    await asyncio.sleep(0)
    assert gate.waiting == count


async def test_the_capacity_is_let_in_and_the_rest_in_the_order_they_came() -> None:
    gate = AdmissionGate(capacity=2, wait_seconds=5)
    assert await gate.enter() is None
    assert await gate.enter() is None
    admitted: list[str] = []

    async def arrive(name: str) -> None:
        assert await gate.enter() is None
        admitted.append(name)

    first = asyncio.create_task(arrive("first"))
    await _waiting(gate, 1)
    second = asyncio.create_task(arrive("second"))
    await _waiting(gate, 2)
    assert admitted == [] and gate.running == 2

    gate.leave()
    await first
    assert admitted == ["first"] and gate.waiting == 1
    gate.leave()
    await second
    assert admitted == ["first", "second"]
    assert gate.running == 2 and gate.waiting == 0
    gate.leave()
    gate.leave()
    assert gate.running == 0


async def test_a_request_that_finds_no_place_in_time_is_refused() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=0.05)
    assert await gate.enter() is None
    assert await gate.enter() == "waited_too_long"
    assert gate.running == 1 and gate.waiting == 0
    gate.leave()
    assert await gate.enter() is None


async def test_a_standing_queue_refuses_newcomers_at_once_and_admits_again_once_drained() -> None:
    changes: list[tuple[int, int]] = []
    gate = AdmissionGate(
        capacity=1,
        wait_seconds=5,
        standing_after_seconds=0.05,
        on_change=lambda running, waiting: changes.append((running, waiting)),
    )
    assert await gate.enter() is None
    early = asyncio.create_task(gate.enter())
    await _waiting(gate, 1)
    await asyncio.sleep(0.1)  # the queue has stood for longer than the gate allows

    loop = asyncio.get_running_loop()
    asked_at = loop.time()
    assert await gate.enter() == "standing_queue"
    assert loop.time() - asked_at < 0.05  # at once, not after a wait
    assert gate.waiting == 1  # the one already waiting keeps its place

    gate.leave()
    assert await early is None
    gate.leave()
    assert gate.running == 0
    assert await gate.enter() is None  # the queue drained: no longer standing
    assert (1, 1) in changes and changes[-1] == (1, 0)


async def test_a_place_handed_to_a_request_that_went_passes_to_the_next() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=5)
    assert await gate.enter() is None
    gone = asyncio.create_task(gate.enter())
    await _waiting(gate, 1)
    next_in_line = asyncio.create_task(gate.enter())
    await _waiting(gate, 2)

    gate.leave()  # the place goes to `gone`, which is cancelled before it runs again
    gone.cancel()
    assert await next_in_line is None
    assert gone.cancelled()
    assert gate.running == 1 and gate.waiting == 0
    gate.leave()
    assert gate.running == 0


async def test_a_request_that_goes_while_waiting_leaves_no_trace() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=5)
    assert await gate.enter() is None
    gone = asyncio.create_task(gate.enter())
    await _waiting(gate, 1)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    assert gate.waiting == 0
    gate.leave()
    assert gate.running == 0
    assert await gate.enter() is None
