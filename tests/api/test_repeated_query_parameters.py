"""A query parameter the route reads one value of, given twice, is a 422 naming it on every
route: the framework would keep the last value, so the order of the two would decide what the
request does. A parameter that takes a list may be repeated."""

from __future__ import annotations

import re
import uuid

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.kit.routing import ApiRoute
from tests.admin.conftest import tenant_rows
from tests.conftest import assert_problem, bearer, new_tenant
from tests.fixtures.apps import api_routes
from tests.fixtures.factories import remember


def _repeated(name: str, first: str, second: str) -> str:
    return f"{name}={first}&{name}={second}"


async def test_a_repeated_confirm_purges_nothing_whichever_value_comes_last(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    await remember(client, admin, text="Ada takes the early train.")
    before = await tenant_rows(owner_engine, tenant)
    other = new_tenant()
    for first, second in ((other, tenant), (tenant, other), (tenant, tenant)):
        response = await client.delete(
            f"/v1/admin/tenant?{_repeated('confirm', first, second)}", headers=admin
        )
        problem = assert_problem(response, 422, "VALIDATION_FAILED")
        assert [error["loc"] for error in problem["errors"]] == [["query", "confirm"]]
        assert await tenant_rows(owner_engine, tenant) == before

    purged = await client.delete("/v1/admin/tenant", params={"confirm": tenant}, headers=admin)
    assert purged.status_code == 200, purged.text


async def test_a_repeated_dry_run_forgets_nothing(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    await remember(client, headers, text="Ada takes the early train.")
    before = await tenant_rows(owner_engine, tenant)
    response = await client.delete(
        f"/v1/users/me/memories?kind=semantic&{_repeated('dry_run', 'true', 'false')}",
        headers=headers,
    )
    problem = assert_problem(response, 422, "VALIDATION_FAILED")
    assert [error["loc"] for error in problem["errors"]] == [["query", "dry_run"]]
    assert await tenant_rows(owner_engine, tenant) == before


async def test_every_single_valued_query_parameter_given_twice_is_refused(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    checked: set[tuple[str, str]] = set()
    for route in api_routes(app.routes):
        assert isinstance(route, ApiRoute)
        # Any text matches a path parameter: the refusal comes before the route reads any.
        path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), route.path)
        method = sorted(route.methods or ())[0]
        for name in sorted(route.single_valued_query):
            response = await client.request(
                method, f"{path}?{_repeated(name, '1', '2')}", headers=admin
            )
            problem = assert_problem(response, 422, "VALIDATION_FAILED")
            assert [error["loc"] for error in problem["errors"]] == [["query", name]]
            checked.add((route.path, name))
    assert {
        ("/v1/admin/tenant", "confirm"),
        ("/v1/users/{user_id}/memories", "dry_run"),
        ("/v1/users/{user_id}/memories", "all"),
        ("/v1/users/{user_id}/memories", "cursor"),
        ("/v1/users/{user_id}/keyed-memories", "key"),
        ("/v1/admin/audit", "since"),
    } <= checked


async def test_a_parameter_that_takes_a_list_may_be_repeated(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada")
    await remember(client, headers, text="Ada takes the early train.")
    await remember(client, headers, text="Ada visited Porto.", kind="episodic")
    listed = await client.get(
        "/v1/users/me/memories?kind=semantic&kind=episodic&lifecycle=confirmed&lifecycle=proposed",
        headers=headers,
    )
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["items"]) == 2
