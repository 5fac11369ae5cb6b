"""The service process is SIGKILLed mid-write: every write it acknowledged is there after a
restart, and a client that retries its unacknowledged writes with their Idempotency-Key gets
each stored exactly once."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from service.config import Settings
from tests.conftest import bearer, new_tenant
from tests.service_process import ServiceProcess, free_port

# Starts, kills and restarts `mneme serve` processes.
pytestmark = pytest.mark.slow

WRITERS = 4
ACKS_BEFORE_KILL = 20


async def test_acknowledged_writes_survive_a_killed_service_and_retries_do_not_duplicate(
    settings: Settings,
) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    service = ServiceProcess(settings, free_port())
    await asyncio.to_thread(service.start)
    acknowledged: dict[str, str] = {}  # idempotency key -> memory id
    unanswered: dict[str, str] = {}  # idempotency key -> text
    enough = asyncio.Event()

    async def writer(client: httpx.AsyncClient, number: int) -> None:
        index = 0
        while True:
            key = f"w{number}-{index}-{uuid.uuid4().hex[:8]}"
            text = f"writer {number} fact {index}"
            try:
                response = await client.post(
                    "/v1/users/me/memories",
                    json={"text": text},
                    headers={**headers, "Idempotency-Key": key},
                )
            except httpx.TransportError:
                unanswered[key] = text
                return
            assert response.status_code == 201, response.text
            acknowledged[key] = response.json()["id"]
            if len(acknowledged) >= ACKS_BEFORE_KILL:
                enough.set()
            index += 1

    try:
        async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
            writing = [asyncio.create_task(writer(client, n)) for n in range(WRITERS)]
            await enough.wait()
            await asyncio.to_thread(service.kill)
            await asyncio.gather(*writing)
        assert len(unanswered) == WRITERS

        await asyncio.to_thread(service.start)
        async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
            for memory_id in acknowledged.values():
                got = await client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
                assert got.status_code == 200, f"acknowledged write {memory_id} was lost"
            for key, text in unanswered.items():
                retried = await client.post(
                    "/v1/users/me/memories",
                    json={"text": text},
                    headers={**headers, "Idempotency-Key": key},
                )
                assert retried.status_code == 201, retried.text
            listing = await client.get(
                "/v1/users/me/memories", params={"limit": 200}, headers=headers
            )
        texts = [m["text"] for m in listing.json()["items"]]
        assert len(texts) == len(set(texts)) == len(acknowledged) + len(unanswered)
    finally:
        await asyncio.to_thread(service.stop)
