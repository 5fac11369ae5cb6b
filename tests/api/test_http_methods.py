"""HTTP's method rules on every route: a resource served by GET answers HEAD with the same
status and headers and no body, and a 405 names in `Allow` every method its path serves, not
only those of the one route the router matched first."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from httpx import AsyncClient

from benchmarks.server import RunningServer
from service.config import Settings
from service.kit.routing import ApiRoute
from tests.conftest import assert_problem, bearer

PROBED_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods a path is tried with when its document does not list them."""

EXAMPLE_VALUES = {
    "user_id": "me",
    "memory_id": "00000000-0000-4000-8000-000000000000",
    "thread_id": "00000000-0000-4000-8000-000000000000",
}


def _example_path(template: str) -> str:
    for name, value in EXAMPLE_VALUES.items():
        template = template.replace("{" + name + "}", value)
    return template.replace("{", "x").replace("}", "x")


def test_every_api_route_of_the_app_answers_head_where_it_answers_get(app: FastAPI) -> None:
    # A router declared without `route_class=ApiRoute` would serve its GETs without HEAD.
    api_routes = [
        route.original_route
        for route in iter_route_contexts(app.router.routes)
        if isinstance(route.original_route, APIRoute)
    ]
    assert api_routes
    assert [route.path for route in api_routes if not isinstance(route, ApiRoute)] == []


async def test_head_answers_what_get_does_without_the_body(
    live_server: RunningServer, settings: Settings, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    async with AsyncClient(base_url=live_server.base_url) as http:
        for path, headers in (
            ("/healthz", {}),
            ("/v1/users/me/profile", ada),
            ("/v1/users/me/memories", ada),
        ):
            got = await http.get(path, headers=headers)
            head = await http.head(path, headers=headers)
            assert got.status_code == head.status_code == 200, path
            assert head.content == b""
            assert head.headers["content-length"] == str(len(got.content))
            assert head.headers["content-type"] == got.headers["content-type"]
            assert head.headers.get("etag") == got.headers.get("etag")
        # A conditional HEAD is answered as the conditional GET is.
        tag = (await http.get("/v1/users/me/profile", headers=ada)).headers["etag"]
        unchanged = await http.head("/v1/users/me/profile", headers={**ada, "If-None-Match": tag})
        assert unchanged.status_code == 304
        # HEAD is refused where GET is: it is not a way around a route's methods.
        refused = await http.head("/v1/users/me/memories/search", headers=ada)
        assert refused.status_code == 405 and refused.content == b""
        assert refused.headers["allow"] == "POST"


async def test_a_405_names_every_method_the_path_serves(client: AsyncClient) -> None:
    response = await client.put("/v1/users/me/memories")
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "GET, HEAD, POST, DELETE"
    response = await client.post("/healthz")
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == "GET, HEAD"


async def test_every_documented_path_names_its_documented_methods_in_a_405(
    client: AsyncClient,
) -> None:
    document: dict[str, Any] = (await client.get("/openapi.json")).json()
    checked = 0
    for template, operations in document["paths"].items():
        documented = {method.upper() for method in operations if method != "parameters"}
        expected = documented | ({"HEAD"} if "GET" in documented else set())
        refused = [method for method in PROBED_METHODS if method not in documented]
        if not refused:
            continue
        response = await client.request(refused[0], _example_path(template))
        assert response.status_code == 405, (template, refused[0], response.text)
        assert set(response.headers["allow"].split(", ")) == expected, template
        checked += 1
    assert checked > 30
