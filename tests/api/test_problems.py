"""Every error is an RFC 9457 problem with a stable code; 500s leak nothing; a failed commit
is never reported as a success."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text

from service.config import Settings
from service.dependencies import Session
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings
from tests.fixtures.loopback import served_in_loop

SECRET_DETAIL = "database password is hunter2"


def add_probe_routes(app: FastAPI) -> None:
    async def explode() -> None:
        raise RuntimeError(SECRET_DETAIL)

    async def commit_fails_after_the_handler(session: Session) -> dict[str, bool]:
        # A deferred unique constraint is only checked at COMMIT, after this handler returns.
        await session.execute(
            text(
                "CREATE TEMP TABLE boom (x int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP"
            )
        )
        await session.execute(text("INSERT INTO boom VALUES (1), (1)"))
        return {"ok": True}

    app.add_api_route("/probe/explode", explode, methods=["GET"])
    app.add_api_route("/probe/commit-fails", commit_fails_after_the_handler, methods=["POST"])


@pytest.fixture(scope="module")
async def probe_client(cluster: EmbeddedCluster, settings: Settings) -> AsyncIterator[AsyncClient]:
    probe_settings = make_settings(cluster, rate_limit_default="3/minute", migrate_on_start=False)
    application = create_app(probe_settings)
    add_probe_routes(application)
    async with (
        LifespanManager(application),
        AsyncClient(
            transport=ASGITransport(app=application, raise_app_exceptions=False),
            base_url="http://mneme.test",
        ) as client,
    ):
        yield client


async def test_unknown_route_is_a_404_problem(client: AsyncClient) -> None:
    body = assert_problem(await client.get("/v1/nothing-here"), 404, "NOT_FOUND")
    assert body["instance"] == "/v1/nothing-here"


async def test_wrong_method_is_a_405_problem(client: AsyncClient) -> None:
    assert_problem(await client.put("/healthz"), 405, "METHOD_NOT_ALLOWED")


async def test_invalid_body_is_a_422_problem_listing_each_error(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.post(
        "/v1/admin/api-keys",
        json={"name": "", "roles": ["root"], "surprise": 1},
        headers=bearer(settings, tenant, "root", admin=True),
    )
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    locations = {tuple(error["loc"]) for error in body["errors"]}
    assert {("body", "name"), ("body", "roles", 0), ("body", "surprise")} <= locations


@pytest.mark.parametrize(
    ("path", "body", "location"),
    [
        ("/v1/users/me/context", {"query": "x", "budget_tokens": 10}, ["body", "budget_tokens"]),
        ("/v1/users/me/memories/search", {"query": "x", "limit": 0}, ["body", "limit"]),
    ],
)
async def test_a_body_read_by_a_dependency_too_lists_each_error_once(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    path: str,
    body: dict[str, object],
    location: list[str],
) -> None:
    # These routes also read the body in a dependency, so the framework validates it twice.
    response = await client.post(path, json=body, headers=bearer(settings, tenant, "alice"))
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in problem["errors"]] == [location]
    assert problem["detail"].startswith("1 invalid input(s)")


async def test_malformed_json_is_a_422_problem(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await client.post(
        "/v1/admin/api-keys",
        content=b"{not json",
        headers={
            **bearer(settings, tenant, "root", admin=True),
            "content-type": "application/json",
        },
    )
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_unexpected_error_is_a_500_without_the_exception_text(
    probe_client: AsyncClient,
) -> None:
    response = await probe_client.get("/probe/explode")
    body = assert_problem(response, 500, "INTERNAL_ERROR")
    assert SECRET_DETAIL not in response.text and "RuntimeError" not in response.text
    assert len(body["trace_id"]) == 32


async def test_failed_commit_is_a_5xx_not_a_2xx(
    probe_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    response = await probe_client.post(
        "/probe/commit-fails", headers=bearer(settings, tenant, "alice")
    )
    assert_problem(response, 500, "INTERNAL_ERROR")


async def test_too_many_requests_is_a_429_problem(
    probe_client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "chatty")
    statuses = [
        (await probe_client.get("/v1/users/me", headers=headers)).status_code for _ in range(4)
    ]
    assert statuses[:3] == [200, 200, 200]
    limited = await probe_client.get("/v1/users/me", headers=headers)
    assert_problem(limited, 429, "RATE_LIMITED")
    assert int(limited.headers["retry-after"]) > 0
    # Limits are per credential: another caller is unaffected, and probes are exempt.
    other = await probe_client.get("/v1/users/me", headers=bearer(settings, tenant, "quiet"))
    assert other.status_code == 200
    assert (await probe_client.get("/healthz")).status_code == 200


async def test_problem_carries_the_request_trace_id(client: AsyncClient) -> None:
    response = await client.get("/v1/users/me")
    body = assert_problem(response, 401, "UNAUTHENTICATED")
    assert body["trace_id"] and len(body["trace_id"]) == 32
    assert response.headers["x-request-id"]


async def test_oversized_body_is_a_413_problem_and_changes_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    huge = b'{"name": "' + b"x" * (settings.max_request_bytes + 10) + b'"}'
    declared = await client.post(
        "/v1/admin/api-keys", content=huge, headers={**admin, "content-type": "application/json"}
    )
    body = assert_problem(declared, 413, "PAYLOAD_TOO_LARGE")
    assert body["max_bytes"] == settings.max_request_bytes

    async def streamed() -> AsyncIterator[bytes]:
        for start in range(0, len(huge), 65536):
            yield huge[start : start + 65536]

    chunked = await client.post(
        "/v1/admin/api-keys",
        content=streamed(),
        headers={**admin, "content-type": "application/json"},
    )
    assert_problem(chunked, 413, "PAYLOAD_TOO_LARGE")
    listing = await client.get("/v1/admin/api-keys", headers=admin)
    assert listing.json()["items"] == []


@pytest.fixture(scope="module")
async def served_probe_port(cluster: EmbeddedCluster, settings: Settings) -> AsyncIterator[int]:
    """The probe app behind a real uvicorn, as `mneme serve` runs it (keep-alive included)."""
    application = create_app(make_settings(cluster, migrate_on_start=False))
    add_probe_routes(application)
    async with served_in_loop(application, log_config=None, log_level="critical") as port:
        yield port


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    body = await reader.readexactly(int(headers["content-length"]))
    return int(status_line.split(" ")[1]), headers, body


async def test_a_500_leaves_the_keep_alive_connection_usable(served_probe_port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served_probe_port)
    try:
        writer.write(b"GET /probe/explode HTTP/1.1\r\nHost: mneme\r\n\r\n")
        status, headers, body = await _read_response(reader)
        assert status == 500 and json.loads(body)["code"] == "INTERNAL_ERROR"
        assert headers.get("connection", "keep-alive").lower() != "close"
        # The same connection serves the next request.
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: mneme\r\n\r\n")
        next_status, _, _ = await _read_response(reader)
        assert next_status == 200
        # Answered where every response is: with a request id and the security headers.
        assert headers["x-request-id"] and headers["x-content-type-options"] == "nosniff"
    finally:
        writer.close()
