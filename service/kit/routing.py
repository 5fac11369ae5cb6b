"""HTTP's method rules for every route: HEAD wherever GET is served, and a 405 that names every
method the path serves (`service.errors.allowed_methods`).

RFC 9110 asks two things of an origin server that FastAPI's routes do not give. A server that
answers GET on a resource answers HEAD on it too, with the same status and headers and no body
(§ 9.3.2): FastAPI's routes serve only the methods they declare, so `curl -I` on any GET route
was a 405. And a 405 carries an `Allow` header listing the methods the target resource supports
(§ 15.5.6): the router answers it from the first route whose path matched, and a path served by
several routes (GET, POST and DELETE of `…/memories`, each its own route) named only one of
them.

A query parameter the route reads one value of is given at most once: of `?confirm=a&confirm=b`
FastAPI keeps the last value and drops the other, so which one the client meant is unknown,
and the order of the two would settle what a destructive call does (a tenant purge's
`confirm`, a bulk delete's `dry_run`). Such a request is a 422 naming the parameter, before
anything else of the route runs. A parameter annotated as a sequence (`list[...]`, such as a
listing's `kind`) is read whole by FastAPI and may be repeated; the route's own dependencies
tell which is which, by the rule FastAPI reads them with.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi._compat import field_annotation_is_sequence
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

HEAD_SCOPE_KEY = "mneme.head"
"""Set in the scope a HEAD request is handled with (see `is_head`)."""


def _head_as_get(scope: Scope) -> Scope:
    """The scope a HEAD request is routed and handled with: its GET's. Only the route sees the
    copy; the server and the middlewares keep the request's own scope, so the server sends no
    body (uvicorn leaves it out of the answer to a HEAD) and the request is logged and counted
    as the HEAD it is. The request's state dict is the same object in both."""
    return {**scope, "method": "GET", HEAD_SCOPE_KEY: True}


def is_head(request: Request) -> bool:
    """Whether a GET handler is answering a HEAD. The server drops the body of a HEAD's answer
    but still runs whatever produces it, so a GET whose body has effects of its own (an
    export's snapshot and audit entry) answers a HEAD without producing it."""
    return bool(request.scope.get(HEAD_SCOPE_KEY))


def single_valued_query_parameters(dependant: Dependant) -> frozenset[str]:
    """The query parameters of which a route (its dependencies included) reads one value:
    FastAPI reads every value of a parameter annotated as a sequence, and the last value of
    any other."""
    names: set[str] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        pending.extend(current.dependencies)
        names.update(
            param.alias
            for param in current.query_params
            if not field_annotation_is_sequence(param.field_info.annotation)
        )
    return frozenset(names)


def _refuse_repeated(scope: Scope, single_valued: frozenset[str]) -> None:
    """Raise the framework's validation error for each single-valued parameter given twice."""
    query = scope.get("query_string", b"")
    if not query:
        return
    given = Counter(name for name, _ in QueryParams(query).multi_items())
    errors: list[dict[str, Any]] = [
        {
            "loc": ("query", name),
            "msg": f"The parameter takes one value; it is given {count} times.",
            "type": "repeated_parameter",
        }
        for name, count in given.items()
        if count > 1 and name in single_valued
    ]
    if errors:
        raise RequestValidationError(errors)


class ApiRoute(APIRoute):
    """A FastAPI route that also answers HEAD where it answers GET, by running its GET, and
    refuses a single-valued query parameter given more than once. HEAD is not added to its
    `methods`: the OpenAPI document lists one operation per declared method, and a HEAD twin
    of every GET would repeat each operation id."""

    def __init__(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.single_valued_query = single_valued_query_parameters(self.dependant)

    def _serves_head(self, scope: Scope) -> bool:
        return (
            scope["type"] == "http" and scope["method"] == "HEAD" and "GET" in (self.methods or ())
        )

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        return super().matches(_head_as_get(scope) if self._serves_head(scope) else scope)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.single_valued_query:
            _refuse_repeated(scope, self.single_valued_query)
        await super().handle(
            _head_as_get(scope) if self._serves_head(scope) else scope, receive, send
        )
