"""Telemetry wiring: OpenTelemetry tracing, Prometheus metrics and request ids.

Every request runs inside a server span; its trace id is echoed in problem responses so a
client can quote it. Metrics are labelled by route template, never by raw path, so user ids
cannot explode label cardinality.
"""

from __future__ import annotations

import re
import time
import uuid
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

tracer = trace.get_tracer("mneme")

_REQUEST_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_request_id: ContextVar[str | None] = ContextVar("mneme_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being served (its `X-Request-ID`); None outside a request."""
    return _request_id.get()


_provider_installed = False


def configure_tracing(service_name: str, exporter: str) -> None:
    """Install the SDK tracer provider once per process (OTel refuses to replace it)."""
    global _provider_installed
    if _provider_installed:
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    _provider_installed = True


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")


class Metrics:
    """The service's Prometheus instruments, on a registry of their own (one per app)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "mneme_http_requests_total",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "mneme_http_request_duration_seconds",
            "HTTP request latency by method and route template.",
            ["method", "route"],
            buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.auth_failures = Counter(
            "mneme_auth_failures_total",
            "Refused credentials by reason.",
            ["reason"],
            registry=self.registry,
        )


class TelemetryMiddleware:
    """Pure-ASGI middleware: request id, server span, latency and status metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        status_holder: dict[str, int] = {"status": 500}
        started = time.perf_counter()
        method: str = scope["method"]

        async def send_with_request_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        with tracer.start_as_current_span(f"{method} request", kind=trace.SpanKind.SERVER) as span:
            state: dict[str, Any] = scope.setdefault("state", {})
            state["request_id"] = request_id
            state["trace_id"] = current_trace_id()
            span.set_attribute("http.request.method", method)
            span.set_attribute("mneme.request_id", request_id)
            token = _request_id.set(request_id)
            try:
                await self.app(scope, receive, send_with_request_id)
            finally:
                _request_id.reset(token)
                route = _route_template(scope)
                status = status_holder["status"]
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", status)
                elapsed = time.perf_counter() - started
                self.metrics.http_requests.labels(method, route, str(status)).inc()
                self.metrics.http_latency.labels(method, route).observe(elapsed)


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            return candidate if _REQUEST_ID_PATTERN.match(candidate) else None
    return None


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "<unmatched>"
