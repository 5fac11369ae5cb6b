"""HTTP's method rules for every route: HEAD wherever GET is served, and a 405 that names every
method the path serves (`service.errors.allowed_methods`).

RFC 9110 asks two things of an origin server that FastAPI's routes do not give. A server that
answers GET on a resource answers HEAD on it too, with the same status and headers and no body
(§ 9.3.2): FastAPI's routes serve only the methods they declare, so `curl -I` on any GET route
was a 405. And a 405 carries an `Allow` header listing the methods the target resource supports
(§ 15.5.6): the router answers it from the first route whose path matched, and a path served by
several routes (GET, POST and DELETE of `…/memories`, each its own route) named only one of
them.
"""

from __future__ import annotations

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Receive, Scope, Send


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
