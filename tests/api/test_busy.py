"""A process with more requests than it can serve refuses the excess quickly and honestly:
503 `SERVICE_BUSY` with `Retry-After`, nothing done for the refused request, and the
operational endpoints still answering."""

from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI
from httpx import AsyncClient

from service.config import Settings
from service.kit.admission import AdmissionGate
from service.observability import DOMAIN_METRICS
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.apps import app_client, running_app
from tests.fixtures.loopback import served_in_loop


def _refusals(reason: str) -> float:
    counted = DOMAIN_METRICS.registry.get_sample_value(
        "mneme_busy_refusals_total", {"reason": reason}
    )
    return counted or 0.0


async def _operational_endpoints_answer(client: AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert "mneme_busy_refusals_total" in metrics.text


async def test_a_request_past_the_limit_is_refused_and_nothing_of_it_is_written(
    settings: Settings,
) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    async with (
        running_app(settings, max_requests_in_progress=1, request_queue_timeout_seconds=0.2) as app,
        app_client(app) as client,
    ):
        gate: AdmissionGate = app.state.admission_gate
        assert gate.capacity == 1
        refused_before = _refusals("waited_too_long")
        assert await gate.enter() is None  # the one place, held as a slow request would
        try:
            response = await client.post(
                "/v1/users/me/memories", json={"text": "User plays the cello"}, headers=headers
            )
            body = assert_problem(response, 503, "SERVICE_BUSY")
            assert response.headers["Retry-After"] == "2"
            assert body["retry_after_seconds"] == 2
            assert "0.2 s" in body["detail"]
            assert _refusals("waited_too_long") == refused_before + 1
            await _operational_endpoints_answer(client)
        finally:
            gate.leave()

        listed = await client.get("/v1/users/me/memories", headers=headers)
        assert listed.status_code == 200 and listed.json()["items"] == []
        written = await client.post(
            "/v1/users/me/memories", json={"text": "User plays the cello"}, headers=headers
        )
        assert written.status_code == 201, written.text
        assert gate.running == 0


async def test_a_request_that_finds_every_connection_busy_is_refused_as_busy(
    settings: Settings,
) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    async with (
        running_app(
            settings, db_pool_size=1, db_max_overflow=0, db_pool_timeout_seconds=0.2
        ) as app,
        app_client(app) as client,
    ):
        engine = app.state.mneme.engine
        refused_before = _refusals("pool_timeout")
        async with engine.connect():  # the pool's only connection, held by a long statement
            response = await client.post(
                "/v1/users/me/memories/search", json={"query": "cello"}, headers=headers
            )
            body = assert_problem(response, 503, "SERVICE_BUSY")
            assert response.headers["Retry-After"] == "2"
            assert "database connection" in body["detail"]
            assert _refusals("pool_timeout") == refused_before + 1
            # Readiness and the metrics' queue gauges use a connection of their own.
            await _operational_endpoints_answer(client)
        answered = await client.post(
            "/v1/users/me/memories/search", json={"query": "cello"}, headers=headers
        )
        assert answered.status_code == 200, answered.text


async def test_the_limit_defaults_to_twice_the_pools_connections(app: FastAPI) -> None:
    settings: Settings = app.state.mneme.settings
    gate: AdmissionGate = app.state.admission_gate
    assert gate.capacity == 2 * (settings.db_pool_size + settings.db_max_overflow)
    assert gate.wait_seconds == settings.request_queue_timeout_seconds


async def test_a_request_whose_body_is_still_arriving_holds_no_place(settings: Settings) -> None:
    headers = bearer(settings, new_tenant(), "ada")
    async with (
        running_app(settings, max_requests_in_progress=1, request_queue_timeout_seconds=0.2) as app,
        served_in_loop(app, lifespan="off", log_level="error", timeout_graceful_shutdown=2) as port,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"text": "User plays the viola"}).encode()
        head = (
            "POST /v1/users/me/memories HTTP/1.1\r\nHost: mneme\r\nConnection: close\r\n"
            f"Authorization: {headers['Authorization']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body[:10])  # the rest of the body comes later
        await writer.drain()
        async with AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            meanwhile = await client.post(
                "/v1/users/me/memories/search", json={"query": "viola"}, headers=headers
            )
            assert meanwhile.status_code == 200, meanwhile.text
            writer.write(body[10:])
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), timeout=10)
            assert answer.startswith(b"HTTP/1.1 201"), answer[:200]
            found = await client.post(
                "/v1/users/me/memories/search", json={"query": "viola"}, headers=headers
            )
            assert [hit["memory"]["text"] for hit in found.json()["hits"]] == [
                "User plays the viola"
            ]
        writer.close()
