"""Operational endpoints and the OpenAPI document SDKs are generated from."""

from __future__ import annotations

import logging
import re

import pytest
from alembic.runtime.migration import MigrationContext
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import assert_problem, bearer


async def test_health_and_readiness(client: AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["schema_revision"]


async def test_liveness_fails_with_retry_after_once_the_embedded_database_is_unsupervised(
    app: FastAPI, client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    class StoppedSupervisor:
        running = False

    monkeypatch.setattr(app.state, "embedded_supervisor", StoppedSupervisor(), raising=False)
    answer = await client.get("/healthz")
    assert_problem(answer, 503, "SERVICE_UNAVAILABLE")
    # As every 503 of the service: whoever polls it knows when to ask again.
    assert int(answer.headers["Retry-After"]) >= 1
    assert answer.json()["retry_after_seconds"] >= 1


async def test_readiness_writes_no_migration_log_lines(
    client: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="alembic"):
        for _ in range(3):
            assert (await client.get("/readyz")).status_code == 200
    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []


async def test_alembic_warnings_pass_where_its_set_up_lines_do_not(
    owner_engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    # Its set-up line at every connection that reads the revision is dropped; a warning of its
    # own (a failing step's, say) is what an operator needs to see.
    def configure(connection: Connection) -> None:
        MigrationContext.configure(connection)
        logging.getLogger("alembic.runtime.migration").warning("a step looks wrong")

    with caplog.at_level(logging.INFO, logger="alembic"):
        async with owner_engine.connect() as connection:
            await connection.run_sync(configure)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == [
        "a step looks wrong"
    ]


async def test_readiness_fails_when_schema_is_behind_the_code(
    app: FastAPI, client: AsyncClient
) -> None:
    state = app.state.mneme
    real_head = state.schema_head
    state.schema_head = "a-newer-revision"
    try:
        response = await client.get("/readyz")
        body = assert_problem(response, 503, "SERVICE_UNAVAILABLE")
        assert "mneme migrate" in body["detail"]
        # Like every 503 of the API.
        assert int(response.headers["Retry-After"]) == body["retry_after_seconds"] >= 1
    finally:
        state.schema_head = real_head


async def test_metrics_count_requests_by_route_template(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    await client.get("/v1/users/me", headers=bearer(settings, tenant, "metric-user"))
    exposition = (await client.get("/metrics")).text
    assert re.search(
        r'mneme_http_requests_total\{method="GET",route="/v1/users/\{user_id\}",status="200"\} '
        r"[1-9]",
        exposition,
    )
    assert "metric-user" not in exposition


def _counted(exposition: str, method: str, route: str, status: int) -> float:
    label = f'mneme_http_requests_total{{method="{method}",route="{route}",status="{status}"}} '
    lines = [line for line in exposition.splitlines() if line.startswith(label)]
    return float(lines[0].rsplit(" ", 1)[1]) if lines else 0.0


async def test_requests_refused_before_routing_count_under_their_route(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    route = "/v1/users/{user_id}/memories"
    before = (await client.get("/metrics")).text
    too_large = await client.post(
        "/v1/users/me/memories",
        content=b'{"text": "' + b"a" * settings.max_request_bytes + b'"}',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert_problem(too_large, 413, "PAYLOAD_TOO_LARGE")
    with_nul = await client.post(
        "/v1/users/me/memories", json={"text": "a\u0000b"}, headers=headers
    )
    assert_problem(with_nul, 422, "VALIDATION_FAILED")
    unknown = await client.post("/v1/no-such-route", json={}, headers=headers)
    assert unknown.status_code == 404
    after = (await client.get("/metrics")).text
    assert _counted(after, "POST", route, 413) == _counted(before, "POST", route, 413) + 1
    assert _counted(after, "POST", route, 422) == _counted(before, "POST", route, 422) + 1
    assert _counted(after, "POST", "<unmatched>", 404) == (
        _counted(before, "POST", "<unmatched>", 404) + 1
    )


async def test_request_id_is_echoed_or_generated(client: AsyncClient) -> None:
    echoed = await client.get("/healthz", headers={"X-Request-ID": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    generated = await client.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
    assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["x-request-id"])


async def test_openapi_operation_ids_are_stable_verb_noun_names(client: AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = [op for path in document["paths"].values() for op in path.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids))
    assert {
        "get_user",
        "create_api_key",
        "list_api_keys",
        "revoke_api_key",
        "get_health",
        "get_readiness",
        "get_metrics",
    } <= set(ids)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)+", op_id) for op_id in ids)
    assert all(op.get("tags") for op in operations)


async def test_openapi_declares_problem_responses(client: AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    get_user = document["paths"]["/v1/users/{user_id}"]["get"]
    for status in ("401", "404", "422"):
        assert "application/problem+json" in get_user["responses"][status]["content"]
    assert "Problem" in document["components"]["schemas"]
    assert any(
        scheme.get("scheme") == "bearer"
        for scheme in document["components"]["securitySchemes"].values()
    )


async def test_docs_page_is_served(client: AsyncClient) -> None:
    response = await client.get("/docs")
    assert response.status_code == 200 and "swagger" in response.text.lower()
