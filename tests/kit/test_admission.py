"""The admission gate: at most its capacity in, the rest in arrival order, a wait that ends, a
standing queue that refuses newcomers at once, no place lost to a request that goes, and a
place given up while a request waits on a remote model, taken again ahead of the queue."""

from __future__ import annotations

import asyncio

import pytest

from service.errors import ServiceBusy
from service.kit.admission import AdmissionGate, Place, outside_the_gate


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


async def test_a_request_waiting_outside_lets_the_next_in_and_comes_back_first() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=5)
    refused: list[str] = []
    first, second, third = (Place(gate, refused.append) for _ in range(3))
    assert await first.take() is None
    second_taking = asyncio.create_task(second.take())
    await _waiting(gate, 1)
    answered = asyncio.Event()

    async def round_trip() -> None:
        async with first.outside():
            await answered.wait()

    waiting_on_the_model = asyncio.create_task(round_trip())
    assert await second_taking is None  # the place the first gave up
    assert not first.held and second.held
    third_taking = asyncio.create_task(third.take())
    await _waiting(gate, 1)

    answered.set()
    await _waiting(gate, 2)  # the first, back from the model, waits ahead of the third
    second.give_back()
    await waiting_on_the_model
    assert first.held and not third_taking.done()
    first.give_back()
    assert await third_taking is None
    third.give_back()
    assert gate.running == 0 and gate.waiting == 0 and refused == []


async def test_a_request_back_from_the_model_to_no_free_place_is_refused() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=0.05)
    refused: list[str] = []
    back, newcomer = Place(gate, refused.append), Place(gate, refused.append)
    assert await back.take() is None
    with pytest.raises(ServiceBusy, match="remote model"):
        async with back.outside():
            assert await newcomer.take() is None
    assert refused == ["waited_too_long"]
    assert not back.held and gate.running == 1
    back.give_back()  # nothing to give: the place is the newcomer's
    assert gate.running == 1


async def test_a_block_that_fails_outside_takes_no_place_again() -> None:
    gate = AdmissionGate(capacity=1, wait_seconds=5)
    place = Place(gate, lambda _reason: None)
    assert await place.take() is None
    with pytest.raises(RuntimeError):
        async with place.outside():
            raise RuntimeError("the model failed")
    assert not place.held and gate.running == 0
    place.give_back()
    assert gate.running == 0


async def test_outside_a_request_the_gate_is_not_touched() -> None:
    ran = False
    async with outside_the_gate():
        ran = True
    assert ran
