"""HTTP's method rules for every route: HEAD wherever GET is served, and a 405 that names every
method the path serves.

RFC 9110 asks two things of an origin server that FastAPI's routes do not give. A server that
answers GET on a resource answers HEAD on it too, with the same status and headers and no body
(§ 9.3.2): FastAPI's routes serve only the methods they declare, so `curl -I` on any GET route
was a 405. And a 405 carries an `Allow` header listing the methods the target resource supports
(§ 15.5.6): the router answers it from the first route whose path matched, and a path served by
several routes (GET, POST and DELETE of `…/memories`, each its own route) named only one of
them.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Any

from fastapi.routing import APIRoute, iter_route_contexts
from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, compile_path
from starlette.types import Receive, Scope, Send

METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
"""The order `Allow` lists methods in (any other after these, alphabetically)."""


def _head_as_get(scope: Scope) -> Scope:
    """The scope a HEAD request is routed and handled with: its GET's. Only the route sees the
    copy; the server and the middlewares keep the request's own scope, so the server sends no
    body (uvicorn leaves it out of the answer to a HEAD) and the request is logged and counted
    as the HEAD it is. The request's state dict is the same object in both."""
    return {**scope, "method": "GET"}


class ApiRoute(APIRoute):
    """A FastAPI route that also answers HEAD where it answers GET, by running its GET. HEAD is
    not added to its `methods`: the OpenAPI document lists one operation per declared method,
    and a HEAD twin of every GET would repeat each operation id."""

    def _serves_head(self, scope: Scope) -> bool:
        return (
            scope["type"] == "http" and scope["method"] == "HEAD" and "GET" in (self.methods or ())
        )

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        return super().matches(_head_as_get(scope) if self._serves_head(scope) else scope)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().handle(
            _head_as_get(scope) if self._serves_head(scope) else scope, receive, send
        )


def _route_methods(routes: Sequence[BaseRoute]) -> list[tuple[re.Pattern[str], set[str]]]:
    """Each route's full path (an included router's prefix with it), compiled, and the methods
    it answers (HEAD with GET); routes that declare no methods (mounts) are left out."""
    served = []
    for route in iter_route_contexts(routes):
        methods = set(route.methods or ())
        if not methods or route.path is None:
            continue
        if "GET" in methods:
            methods.add("HEAD")
        served.append((compile_path(route.path)[0], methods))
    return served


_methods_of_apps: weakref.WeakKeyDictionary[Any, list[tuple[re.Pattern[str], set[str]]]]
_methods_of_apps = weakref.WeakKeyDictionary()


def allowed_methods(app: Any, scope: Scope) -> str:
    """The `Allow` header of a 405 for the request `scope` to `app`: every method of every
    route whose path is the request's."""
    path = get_route_path(scope)
    served = _methods_of_apps.get(app)
    if served is None:
        served = _methods_of_apps[app] = _route_methods(app.router.routes)
    methods = set().union(*(methods for regex, methods in served if regex.match(path)))
    ordered = [method for method in METHOD_ORDER if method in methods]
    return ", ".join(ordered + sorted(methods.difference(METHOD_ORDER)))
