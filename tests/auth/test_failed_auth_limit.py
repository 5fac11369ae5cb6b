"""Failed authentications are counted per client address (as seen through the trusted
proxies); past the limit they answer 429, and a valid credential is never refused."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import ValidationError

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings

FAILURES_ALLOWED = 5
PROXY = "10.9.0.7"
FORGED = {"Authorization": "Bearer mneme.YWNtZQ." + "0" * 32 + ".made-up"}


@pytest.fixture(scope="module")
async def strict_app(cluster: EmbeddedCluster, settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(
        make_settings(
            cluster,
            auth_failure_limit=f"{FAILURES_ALLOWED}/minute",
            trusted_proxies="10.9.0.0/16",
            migrate_on_start=False,
        )
    )
    async with LifespanManager(application):
        yield application


def _client(application: FastAPI, address: str) -> AsyncClient:
    transport = ASGITransport(app=application, client=(address, 40000))
    return AsyncClient(transport=transport, base_url="http://mneme.test")


async def _use_up_failures(client: AsyncClient, headers: dict[str, str] | None = None) -> None:
    for _ in range(FAILURES_ALLOWED):
        response = await client.get("/v1/users/me", headers={**FORGED, **(headers or {})})
        assert_problem(response, 401, "UNAUTHENTICATED")


async def _real_key(application: FastAPI, settings: Settings, tenant: str) -> dict[str, str]:
    admin = bearer(settings, tenant, "root", admin=True)
    async with _client(application, "10.1.0.1") as good:
        created = await good.post("/v1/admin/api-keys", json={"name": "agent"}, headers=admin)
    assert created.status_code == 201
    return {"Authorization": f"Bearer {created.json()['key']}"}


async def test_an_address_past_its_failures_gets_429_but_its_valid_credentials_are_served(
    strict_app: FastAPI, settings: Settings, tenant: str
) -> None:
    real_key = await _real_key(strict_app, settings, tenant)
    async with _client(strict_app, "10.1.0.2") as shared:
        await _use_up_failures(shared)
        limited = await shared.get("/v1/users/me", headers=FORGED)
        problem = assert_problem(limited, 429, "RATE_LIMITED")
        assert int(limited.headers["Retry-After"]) >= 1
        assert problem["title"] == "Too many failed authentications"
        assert_problem(await shared.get("/v1/users/me"), 429, "RATE_LIMITED")
        # Guessing from this address denies nobody who holds a real credential: an API key
        # and a token sent from the very same address are served.
        assert (await shared.get("/v1/users/svc/profile", headers=real_key)).status_code == 200
        user = await shared.get("/v1/users/me", headers=bearer(settings, tenant, "ada"))
        assert user.status_code == 200
        # ...and the guesser is still refused.
        assert_problem(await shared.get("/v1/users/me", headers=FORGED), 429, "RATE_LIMITED")


async def test_successful_authentications_do_not_count(
    strict_app: FastAPI, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    async with _client(strict_app, "10.1.0.4") as client:
        for _ in range(FAILURES_ALLOWED * 3):
            assert (await client.get("/v1/users/me", headers=headers)).status_code == 200
        assert_problem(await client.get("/v1/users/me", headers=FORGED), 401, "UNAUTHENTICATED")


async def test_behind_a_trusted_proxy_each_client_is_counted_apart(
    strict_app: FastAPI,
) -> None:
    async with _client(strict_app, PROXY) as proxy:
        await _use_up_failures(proxy, {"X-Forwarded-For": "198.51.100.1"})
        limited = await proxy.get(
            "/v1/users/me", headers={**FORGED, "X-Forwarded-For": "198.51.100.1"}
        )
        assert_problem(limited, 429, "RATE_LIMITED")
        # Another client through the same proxy has failures of its own to spend.
        other = await proxy.get(
            "/v1/users/me", headers={**FORGED, "X-Forwarded-For": "198.51.100.2"}
        )
        assert_problem(other, 401, "UNAUTHENTICATED")


async def test_a_client_cannot_escape_the_limit_by_rotating_x_forwarded_for(
    strict_app: FastAPI,
) -> None:
    # Through the trusted proxy: it appends the address it saw, and that last entry counts,
    # whatever the client wrote before it.
    async with _client(strict_app, PROXY) as proxy:
        for _ in range(FAILURES_ALLOWED):
            forged_chain = f"203.0.113.{uuid.uuid4().int % 250}, 198.51.100.9"
            response = await proxy.get(
                "/v1/users/me", headers={**FORGED, "X-Forwarded-For": forged_chain}
            )
            assert_problem(response, 401, "UNAUTHENTICATED")
        rotated = await proxy.get(
            "/v1/users/me", headers={**FORGED, "X-Forwarded-For": "192.0.2.1, 198.51.100.9"}
        )
        assert_problem(rotated, 429, "RATE_LIMITED")
    # Straight from a peer that is not a trusted proxy: its X-Forwarded-For is ignored.
    async with _client(strict_app, "10.1.0.9") as direct:
        for _ in range(FAILURES_ALLOWED):
            response = await direct.get(
                "/v1/users/me",
                headers={**FORGED, "X-Forwarded-For": f"192.0.2.{uuid.uuid4().int % 250}"},
            )
            assert_problem(response, 401, "UNAUTHENTICATED")
        rotated = await direct.get(
            "/v1/users/me", headers={**FORGED, "X-Forwarded-For": "192.0.2.251"}
        )
        assert_problem(rotated, 429, "RATE_LIMITED")


async def test_two_authorization_headers_are_a_400_and_neither_is_used(
    strict_app: FastAPI, settings: Settings, tenant: str
) -> None:
    good = bearer(settings, tenant, "ada")["Authorization"]
    async with _client(strict_app, "10.1.0.10") as client:
        for pair in ([good, FORGED["Authorization"]], [FORGED["Authorization"], good]):
            response = await client.get(
                "/v1/users/me", headers=[("Authorization", pair[0]), ("Authorization", pair[1])]
            )
            assert_problem(response, 400, "AMBIGUOUS_CREDENTIALS")
        written = await client.post(
            "/v1/users/me/memories",
            json={"text": "Ada prefers tea."},
            headers=[("Authorization", good), ("Authorization", good)],
        )
        assert_problem(written, 400, "AMBIGUOUS_CREDENTIALS")
        listing = await client.get("/v1/users/me/memories", headers={"Authorization": good})
        assert listing.json()["items"] == []


@pytest.mark.parametrize("proxies", ["*", "10.0.0.0/8, *", "ingress.local", "10.0.0.300"])
def test_trusted_proxies_must_be_addresses_or_networks(settings: Settings, proxies: str) -> None:
    with pytest.raises(ValidationError, match="trusted_proxies"):
        Settings.model_validate({**settings.model_dump(), "trusted_proxies": proxies})
