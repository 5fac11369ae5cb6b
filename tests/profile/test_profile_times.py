"""A change of a profile is timed when it is made, after the profile's lock, not when its
transaction began: a change whose transaction began first but waited while another changed the
profile comes after that change, and the profile's `updated_at` never goes back."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.auth.principal import Principal
from service.config import Settings
from service.profile.dependencies import profile_service
from service.profile.schemas import ProfilePatch
from service.services import unit_of_work
from tests.conftest import bearer
from tests.fixtures.locks import transaction_start, waiting_locks

PROFILE = "/v1/users/me/profile"


def setting(key: str, value: str) -> ProfilePatch:
    return ProfilePatch.model_validate([{"op": "add", "path": f"/{key}", "value": value}])


async def profile_as_read(client: AsyncClient, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.get(PROFILE, headers=headers)
    assert response.status_code == 200, response.text
    profile: dict[str, Any] = response.json()
    return profile


def updated_at(profile: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(profile["updated_at"])


async def test_a_patch_that_began_first_but_waited_for_the_profile_comes_after_the_one_holding_it(
    app: FastAPI, client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    created = await client.patch(
        PROFILE,
        headers={**ada, "Content-Type": "application/json-patch+json"},
        json=[{"op": "add", "path": "/city", "value": "Porto"}],
    )
    assert created.status_code == 200, created.text
    principal = Principal(tenant_id=tenant, subject="ada", kind="user", credential="jwt")
    state = app.state.mneme
    owner = Owner.user("ada")

    async with unit_of_work(state, principal) as first:
        first_began = await transaction_start(first.session)
        async with unit_of_work(state, principal) as second:
            assert await transaction_start(second.session) > first_began
            # The second patch holds the profile until it commits; the first waits for it.
            await second.get(profile_service).patch(owner, setting("city", "Lisbon").root, None)
            patching = asyncio.create_task(
                first.get(profile_service).patch(owner, setting("pet", "Comet").root, None)
            )
            assert await waiting_locks(owner_engine, 1) == 1
            assert not patching.done()
        held = await profile_as_read(client, ada)
        await patching
    patched = await profile_as_read(client, ada)

    assert patched["profile"] == {"city": "Lisbon", "pet": "Comet"}
    assert patched["version"] == held["version"] + 1
    assert updated_at(patched) > updated_at(held)
