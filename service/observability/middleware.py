"""The request middleware and the request context it sets: request id, what log lines of
the request add about it, latency and status metrics."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import re
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from starlette.routing import Match, Route, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.observability.metrics import Metrics
from service.observability.tracing import current_trace_id

# Matched with `fullmatch`: a `$` would also admit a trailing newline.
_REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# --- request context for logs ------------------------------------------------------------------


@dataclasses.dataclass
class RequestContext:
    """What log lines of one request add about it; filled in as the request is handled."""

    request_id: str
    method: str
    route: str | None = None
    tenant: str | None = None
    status: int | None = None


request_context: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "mneme_request_context", default=None
)


def current_request_id() -> str | None:
    """The id of the request being served (its `X-Request-ID`); None outside a request."""
    context = request_context.get()
    return None if context is None else context.request_id


def bind_tenant(tenant_id: str) -> None:
    """Tell the current request's log lines (and its span) which tenant it acts for."""
    context = request_context.get()
    if context is not None:
        context.tenant = tenant_id


# --- the request middleware --------------------------------------------------------------------

CLIENT_CLOSED_REQUEST = 499
"""The status counted and logged for a request whose client went before it was answered (as
nginx logs it): not a server error, and nothing was sent."""

ABANDONED_AT_STOP = 444
"""The status counted and logged for a request the service's stop cut short before its answer
began (as nginx logs a connection it closed without an answer): no answer was sent, and
nothing went wrong that a client or an operator must look into (`service.http_protocol`)."""

ANSWERED_BY_SERVER = "mneme.answered_by_server"
"""The key, in a request's scope state, of the status the HTTP server itself answered the
request with when its application could not (`service.http_protocol`: a body that stopped
arriving, answered 408); the application then sees its client gone."""


class TelemetryMiddleware:
    """Pure-ASGI middleware: request id, request context for logs, latency and status metrics.

    It runs inside FastAPI's server span and annotates it; it makes no span of its own.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, on_complete: RequestLogger) -> None:
        self.app = app
        self.metrics = metrics
        self.on_complete = on_complete

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        context = RequestContext(request_id=request_id, method=scope["method"])
        token = request_context.set(context)
        started = time.perf_counter()

        async def send_with_request_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                context.status = message["status"]
                # FastAPI ends its span with the last body chunk, before this middleware's
                # own epilogue: annotate it now.
                if context.tenant is not None:
                    span.set_attribute("mneme.tenant_id", context.tenant)
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        span = trace.get_current_span()
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["trace_id"] = current_trace_id()
        span.set_attribute("mneme.request_id", request_id)
        client_gone = False

        async def receive_noting_departure() -> Message:
            nonlocal client_gone
            message = await receive()
            if message["type"] == "http.disconnect":
                client_gone = True
            return message

        try:
            await self.app(scope, receive_noting_departure, send_with_request_id)
        finally:
            context.route = _route_template(scope)
            status = (
                context.status
                or state.get(ANSWERED_BY_SERVER)
                or (CLIENT_CLOSED_REQUEST if client_gone else None)
                or (ABANDONED_AT_STOP if _cancelled() else 500)
            )
            elapsed = time.perf_counter() - started
            self.metrics.http_requests.labels(context.method, context.route, str(status)).inc()
            self.metrics.http_latency.labels(context.method, context.route).observe(elapsed)
            if status == 429:
                self.metrics.rate_limited.inc()
            self.on_complete(context, status, elapsed)
            request_context.reset(token)


def _cancelled() -> bool:
    """Whether the current task is being cancelled: uvicorn cancels a request's task only when
    its stop abandons the request."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


RequestLogger = Callable[[RequestContext, int, float], None]
"""Writes the one access-log line of a finished request."""


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            return candidate if _REQUEST_ID_PATTERN.fullmatch(candidate) else None
    return None


class LabelledRoute(Route):
    """A plain Starlette route (an ASGI app served beside the API, such as `/mcp`) that puts
    itself in the request's scope as FastAPI's own routes do, so its requests are counted and
    logged under its path rather than as `<unmatched>`."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match != Match.NONE:
            child_scope["route"] = self
        return match, child_scope


def _route_template(scope: Scope) -> str:
    # The template as documented: `path_format` leaves out a parameter's convertor
    # (`{memory_id:uuid}` is `{memory_id}`).
    path = getattr(scope.get("route"), "path_format", None)
    if isinstance(path, str):
        return path
    return _documented_route(scope) or "<unmatched>"


_documented_routes: weakref.WeakKeyDictionary[Any, list[tuple[re.Pattern[str], str, set[str]]]]
_documented_routes = weakref.WeakKeyDictionary()


def _documented_route(scope: Scope) -> str | None:
    """The documented route (its OpenAPI path) a request was addressed to when a middleware
    answered it before routing (a body too large, input no field can hold, a read timeout),
    so that it is counted and logged under its route like every other answer of that route;
    None for a path the API does not serve. A route whose methods include the request's is
    preferred, as routing would choose it."""
    app = scope.get("app")
    openapi = getattr(app, "openapi", None)
    if openapi is None:
        return None
    routes = _documented_routes.get(app)
    if routes is None:
        routes = [
            (compile_path(template)[0], template, {method.upper() for method in operations})
            for template, operations in openapi()["paths"].items()
        ]
        _documented_routes[app] = routes
    path, method = scope.get("path", ""), scope.get("method", "")
    matching = [(template, methods) for regex, template, methods in routes if regex.match(path)]
    for template, methods in matching:
        if method in methods:
            return template
    return matching[0][0] if matching else None
