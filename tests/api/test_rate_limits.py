"""Rate limits: keyed by principal (not by the credential's spelling), capped per tenant,
reported on every API response, refused as a 429 problem with Retry-After."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient
from pydantic import ValidationError

from service.auth.tokens import mint_dev_token
from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import assert_problem, bearer, make_settings, new_tenant

PRINCIPAL_QUOTA = 3
TENANT_QUOTA = 5
SECONDS_A_TEST_TAKES = 5


@pytest.fixture(scope="module")
async def limited_client(
    cluster: EmbeddedCluster, settings: Settings
) -> AsyncIterator[AsyncClient]:
    limited = make_settings(
        cluster,
        rate_limit_default=f"{PRINCIPAL_QUOTA}/minute",
        rate_limit_tenant=f"{TENANT_QUOTA}/minute",
        migrate_on_start=False,
    )
    application = create_app(limited)
    async with (
        LifespanManager(application),
        AsyncClient(transport=ASGITransport(app=application), base_url="http://mneme.test") as c,
    ):
        yield c


@pytest.fixture(autouse=True)
async def a_minute_with_time_left() -> None:
    """Start a test where the clock's minute has time left. The counters' windows are the
    clock's minutes, and the sliding window weighs the last minute's count by what is left of
    it, rounded down: right after a minute turns, a key that spent its quota in the last one
    gets one request more (limits' `SlidingWindowCounterRateLimiter`), and a test that counts
    a quota spent would see it."""
    left = 60 - time.time() % 60
    if left < SECONDS_A_TEST_TAKES:
        await asyncio.sleep(left + 0.1)


def _token(settings: Settings, tenant: str, user: str, **claims: str) -> str:
    return mint_dev_token(settings, tenant_id=tenant, user_id=user, extra_claims=claims or None)


async def test_every_spelling_and_fresh_token_of_one_user_shares_one_quota(
    limited_client: AsyncClient, settings: Settings
) -> None:
    tenant = new_tenant()
    spellings = [
        f"Bearer {_token(settings, tenant, 'ada')}",
        f"bearer {_token(settings, tenant, 'ada', name='Ada')}",
        f"BEARER   {_token(settings, tenant, 'ada', name='Ada L.')}",
    ]
    for authorization in spellings:
        headers = {"Authorization": authorization}
        response = await limited_client.get("/v1/users/me", headers=headers)
        assert response.status_code == 200, response.text
    fresh = {"Authorization": f"Bearer {_token(settings, tenant, 'ada', name='Ada Lovelace')}"}
    limited = await limited_client.get("/v1/users/me", headers=fresh)
    body = assert_problem(limited, 429, "RATE_LIMITED")
    assert body["policy"] == "principal"
    assert int(limited.headers["Retry-After"]) >= 1


async def test_responses_carry_the_quota_and_what_is_left_of_it(
    limited_client: AsyncClient, settings: Settings
) -> None:
    headers = bearer(settings, new_tenant(), "grace")
    first = await limited_client.get("/v1/users/me", headers=headers)
    second = await limited_client.get("/v1/users/me/memories?limit=0", headers=headers)
    assert first.status_code == 200 and second.status_code == 422
    for response in (first, second):
        assert response.headers["RateLimit-Policy"] == (
            f'"principal";q={PRINCIPAL_QUOTA};w=60, "tenant";q={TENANT_QUOTA};w=60'
        )
    assert first.headers["RateLimit"].startswith(f'"principal";r={PRINCIPAL_QUOTA - 1};t=')
    assert f'"tenant";r={TENANT_QUOTA - 1};t=' in first.headers["RateLimit"]
    # The error response is counted and reported too.
    assert second.headers["RateLimit"].startswith(f'"principal";r={PRINCIPAL_QUOTA - 2};t=')


async def test_the_tenant_ceiling_caps_all_its_principals_and_no_other_tenant(
    limited_client: AsyncClient, settings: Settings
) -> None:
    tenant = new_tenant()
    statuses = []
    for user in ("u1", "u1", "u2", "u2", "u3"):
        response = await limited_client.get("/v1/users/me", headers=bearer(settings, tenant, user))
        statuses.append(response.status_code)
    assert statuses == [200] * TENANT_QUOTA
    refused = await limited_client.get("/v1/users/me", headers=bearer(settings, tenant, "u4"))
    body = assert_problem(refused, 429, "RATE_LIMITED")
    assert body["policy"] == "tenant"
    assert '"tenant";r=0;' in refused.headers["RateLimit"]
    other = await limited_client.get("/v1/users/me", headers=bearer(settings, new_tenant(), "u4"))
    assert other.status_code == 200


async def test_a_principal_over_its_limit_does_not_spend_its_tenants_ceiling(
    limited_client: AsyncClient, settings: Settings
) -> None:
    tenant = new_tenant()
    noisy = bearer(settings, tenant, "noisy")
    statuses = [
        (await limited_client.get("/v1/users/me", headers=noisy)).status_code for _ in range(6)
    ]
    assert statuses == [200] * PRINCIPAL_QUOTA + [429] * 3
    for user in ("quiet1", "quiet2"):
        response = await limited_client.get("/v1/users/me", headers=bearer(settings, tenant, user))
        assert response.status_code == 200


async def test_an_unreachable_counter_store_fails_open(
    cluster: EmbeddedCluster, settings: Settings
) -> None:
    # Port 1 on loopback: nothing listens there, every Redis call fails at once.
    broken = make_settings(
        cluster, rate_limit_storage_uri="redis://127.0.0.1:1/0", migrate_on_start=False
    )
    application = create_app(broken)
    async with (
        LifespanManager(application),
        AsyncClient(transport=ASGITransport(app=application), base_url="http://mneme.test") as c,
    ):
        response = await c.get("/v1/users/me", headers=bearer(settings, new_tenant(), "ada"))
        # The failed-authentication counters live in the same store and fail open too: a bad
        # credential is still a 401, never a 500.
        forged = await c.get("/v1/users/me", headers={"Authorization": "Bearer not-a-token"})
    assert response.status_code == 200, response.text
    assert "RateLimit" not in response.headers
    assert_problem(forged, 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("field", ["rate_limit_default", "rate_limit_tenant", "auth_failure_limit"])
def test_a_limit_that_does_not_parse_is_refused_at_start_up(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: "lots per fortnight"})  # type: ignore[arg-type]
