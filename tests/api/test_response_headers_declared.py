"""The OpenAPI document declares every header an answer can carry: the request id, the caller's
quotas, when to retry, whether an answer is a replay, and the resource's address and version.

Two checks: real answers (each header the service sent is declared for that operation and
status), and the whole document (every operation declares them wherever they can occur).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings, new_tenant
from tests.fixtures.factories import sign_in

TRACKED = (
    "X-Request-Id",
    "RateLimit",
    "RateLimit-Policy",
    "Retry-After",
    "Idempotent-Replayed",
    "ETag",
    "Location",
)


@pytest.fixture(scope="module")
async def limited_client(
    cluster: EmbeddedCluster, settings: Settings
) -> AsyncIterator[AsyncClient]:
    """A service whose callers may send one request a minute."""
    application = create_app(
        make_settings(cluster, rate_limit_default="1/minute", migrate_on_start=False)
    )
    async with (
        LifespanManager(application),
        AsyncClient(transport=ASGITransport(app=application), base_url="http://mneme.test") as c,
    ):
        yield c


def undeclared(
    document: dict[str, Any], template: str, response: httpx.Response
) -> tuple[str, list[str]]:
    """The tracked headers `response` carries that its operation does not declare for its
    status (or the status itself, when undeclared)."""
    method = response.request.method.lower()
    where = f"{method.upper()} {template} -> {response.status_code}"
    responses = document["paths"][template][method]["responses"]
    declared = responses.get(str(response.status_code))
    if declared is None:
        return where, ["<status>"]
    headers = declared.get("headers", {})
    return where, [name for name in TRACKED if name in response.headers and name not in headers]


async def test_every_header_an_answer_carries_is_declared(
    client: AsyncClient, limited_client: AsyncClient, settings: Settings
) -> None:
    document = (await client.get("/openapi.json")).json()
    headers = await sign_in(client, settings, new_tenant(), "ada")
    memory_body = {"text": "Prefers the aisle on short flights.", "kind": "semantic"}
    keyed = {**headers, "Idempotency-Key": "header-check-1"}
    sent: list[tuple[str, httpx.Response]] = [("/healthz", await client.get("/healthz"))]

    created = await client.post("/v1/users/me/memories", headers=keyed, json=memory_body)
    replayed = await client.post("/v1/users/me/memories", headers=keyed, json=memory_body)
    reused = await client.post(
        "/v1/users/me/memories", headers=keyed, json={**memory_body, "text": "Another text."}
    )
    assert created.status_code == replayed.status_code == 201
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert_problem(reused, 409, "IDEMPOTENCY_KEY_REUSED")
    sent += [("/v1/users/{user_id}/memories", r) for r in (created, replayed, reused)]

    one = f"/v1/users/me/memories/{created.json()['id']}"
    read = await client.get(one, headers=headers)
    unchanged = await client.get(one, headers={**headers, "If-None-Match": read.headers["ETag"]})
    stale = await client.patch(
        one, headers={**headers, "If-Match": '"stale"'}, json={"text": "Prefers the window."}
    )
    assert (read.status_code, unchanged.status_code) == (200, 304)
    assert_problem(stale, 412, "PRECONDITION_FAILED")
    template = "/v1/users/{user_id}/memories/{memory_id}"
    sent += [(template, r) for r in (read, unchanged, stale)]
    unauthenticated = await client.get("/v1/users/me")
    assert_problem(unauthenticated, 401, "UNAUTHENTICATED")
    sent.append(("/v1/users/{user_id}", unauthenticated))

    limited = bearer(settings, new_tenant(), "grace")
    allowed = await limited_client.get("/v1/users/me", headers=limited)
    refused = await limited_client.get("/v1/users/me", headers=limited)
    assert allowed.status_code == 200
    assert_problem(refused, 429, "RATE_LIMITED")
    sent += [("/v1/users/{user_id}", allowed), ("/v1/users/{user_id}", refused)]

    seen = {name for _, response in sent for name in TRACKED if name in response.headers}
    assert seen == set(TRACKED), f"the answers above should carry {set(TRACKED) - seen}"
    missing = [undeclared(document, template, response) for template, response in sent]
    assert not [(where, names) for where, names in missing if names], missing


async def test_every_operation_declares_the_headers_its_answers_can_carry(
    client: AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    gaps = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            idempotent = any(
                parameter["name"] == "Idempotency-Key"
                for parameter in operation.get("parameters", [])
            )
            for status, response in operation["responses"].items():
                expected = {"X-Request-Id"}
                if path.startswith("/v1/") and status != "401":
                    expected |= {"RateLimit", "RateLimit-Policy"}
                if status in {"429", "503"} or (status == "409" and idempotent):
                    expected.add("Retry-After")
                if status.startswith("2") and idempotent:
                    expected.add("Idempotent-Replayed")
                if status in {"201"}:
                    expected.add("Location")
                if status in {"304", "412"}:
                    expected.add("ETag")
                lacking = expected - set(response.get("headers", {}))
                if lacking:
                    gaps.append(f"{method.upper()} {path} {status}: {sorted(lacking)}")
            if idempotent:
                assert "409" in operation["responses"], f"{method.upper()} {path}"
    assert not gaps, "\n".join(gaps)
    shared = document["components"]["headers"]
    assert set(shared) == set(TRACKED) - {"ETag", "Location"}
