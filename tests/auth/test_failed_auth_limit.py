"""Failed authentications are limited per client address before any credential is checked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings

FAILURES_ALLOWED = 5


@pytest.fixture(scope="module")
async def strict_app(cluster: EmbeddedCluster, settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(
        make_settings(
            cluster, auth_failure_limit=f"{FAILURES_ALLOWED}/minute", migrate_on_start=False
        )
    )
    async with LifespanManager(application):
        yield application


def _client(application: FastAPI, address: str) -> AsyncClient:
    transport = ASGITransport(app=application, client=(address, 40000))
    return AsyncClient(transport=transport, base_url="http://mneme.test")


async def test_an_address_that_keeps_failing_is_refused_with_429_even_with_a_good_key(
    strict_app: FastAPI, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    async with _client(strict_app, "10.1.0.1") as good:
        created = await good.post("/v1/admin/api-keys", json={"name": "agent"}, headers=admin)
        assert created.status_code == 201
        real_key = {"Authorization": f"Bearer {created.json()['key']}"}

    async with _client(strict_app, "10.1.0.2") as flooder:
        forged = {"Authorization": "Bearer mneme.YWNtZQ." + "0" * 32 + ".made-up"}
        for _ in range(FAILURES_ALLOWED):
            assert_problem(
                await flooder.get("/v1/users/me", headers=forged), 401, "UNAUTHENTICATED"
            )
        limited = await flooder.get("/v1/users/me", headers=forged)
        problem = assert_problem(limited, 429, "RATE_LIMITED")
        assert int(limited.headers["Retry-After"]) >= 1
        assert problem["title"] == "Too many failed authentications"
        # Not even a genuine key is looked at from this address until the window frees up.
        assert_problem(
            await flooder.get("/v1/users/svc/profile", headers=real_key), 429, "RATE_LIMITED"
        )

    async with _client(strict_app, "10.1.0.3") as bystander:
        assert (await bystander.get("/v1/users/svc/profile", headers=real_key)).status_code == 200


async def test_successful_authentications_do_not_count(
    strict_app: FastAPI, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    async with _client(strict_app, "10.1.0.4") as client:
        for _ in range(FAILURES_ALLOWED * 3):
            assert (await client.get("/v1/users/me", headers=headers)).status_code == 200
