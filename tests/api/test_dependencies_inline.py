"""How a route's dependencies are declared, for the request's own time: every function a route
depends on is `async def` (FastAPI runs a plain `def` dependency in a worker thread, and those
hops were a measurable share of a search's time on two cores), and a route's graph is not walked
over and over (FastAPI walks a dependency's own dependencies again at each place it meets it,
before it finds the value cached)."""

from __future__ import annotations

import inspect

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant

from service.main import create_app
from tests.fixtures.apps import api_routes


def _dependencies(dependant: Dependant) -> list[Dependant]:
    found = []
    for child in dependant.dependencies:
        found.append(child)
        found.extend(_dependencies(child))
    return found


def test_no_route_dependency_runs_in_a_thread() -> None:
    app: FastAPI = create_app()
    routes = api_routes(app.routes)
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


def _walked(dependant: Dependant) -> int:
    """How many dependencies FastAPI visits to solve `dependant`: each place it is met, with
    everything below it."""
    return sum(1 + _walked(child) for child in dependant.dependencies)


def test_no_route_walks_its_dependencies_more_than_twice_over() -> None:
    """The caller is met by nearly every dependency, so what it depends on is kept shallow
    (its bearer scheme alone), and the unit of work opens the transaction itself rather than
    depending on a session, the caller and the process state that each depend on the caller
    again: a search's graph is 16 visits of 8 dependencies (28 of 10 before)."""
    app: FastAPI = create_app()
    routes = api_routes(app.routes)
    walked = {}
    for route in routes:
        distinct = {dependency.call for dependency in _dependencies(route.dependant)}
        walked[f"{sorted(route.methods or ())[0]} {route.path}"] = (
            _walked(route.dependant),
            len(distinct),
        )
    assert walked["POST /v1/users/{user_id}/memories/search"] == (16, 8)
    over = {route: counts for route, counts in walked.items() if counts[0] > 2 * counts[1]}
    assert over == {}
