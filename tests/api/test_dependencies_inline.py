"""Every function a route depends on is `async def`: FastAPI runs a plain `def` dependency in
a worker thread, and those hops were a measurable share of a search's time on two cores."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from service.main import create_app


def _dependencies(dependant: Dependant) -> list[Dependant]:
    found = []
    for child in dependant.dependencies:
        found.append(child)
        found.extend(_dependencies(child))
    return found


def _api_routes(routes: Sequence[BaseRoute]) -> list[APIRoute]:
    """The app's routes, through included routers (kept as wrappers that hold the original)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        included = getattr(route, "original_router", None)
        if included is not None:
            found.extend(_api_routes(included.routes))
    return found


def test_no_route_dependency_runs_in_a_thread() -> None:
    app: FastAPI = create_app()
    routes = _api_routes(app.routes)
    assert any(route.path.endswith("/memories/search") for route in routes)
    threaded = set()
    for route in routes:
        for dependency in _dependencies(route.dependant):
            call = dependency.call
            # Query-parameter models (`Depends()` on a class) only build a value object.
            if call is None or inspect.isclass(call):
                continue
            is_async = (
                inspect.iscoroutinefunction(call)
                or inspect.isasyncgenfunction(call)
                # An instance with an async __call__ (HTTPBearer).
                or inspect.iscoroutinefunction(type(call).__call__)
            )
            if not is_async:
                threaded.add(getattr(call, "__qualname__", repr(call)))
    assert threaded == set()
