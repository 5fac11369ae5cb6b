"""Tracing: the tracer provider, trace export, and the spans Mneme makes itself.

FastAPI's own telemetry makes the one server span of each request (HTTP semantic
conventions, incoming `traceparent` honoured, renamed to the route template); it turns itself on
as soon as an SDK tracer provider is installed, so Mneme never makes a second one. Mneme's spans
(auth, query embedding, the fusion statement, MMR, context assembly, jobs, LLM calls) nest under
it. Export is chosen as the OpenTelemetry environment specification says, by `OTEL_TRACES_EXPORTER`
(a comma-separated list of `otlp`, `console`, `none`; `OTEL_SDK_DISABLED=true` turns it off), so an
operator's auto-configuration reaches Mneme; `MNEME_OTEL_EXPORTER` wins over both, and with
neither set nothing is exported. Everything else is the standard `OTEL_*` variables (endpoint,
headers, protocol, service name, resource attributes, sampler), read by the OpenTelemetry SDK and
exporters themselves. With `none`, spans are not recorded at all, but keep their ids, which logs
and problem responses carry.

Span attributes and events carry ids, counts, model names and scores, never what a user wrote
(message or memory text, profile values, query strings, credentials).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import wraps
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ParamSpec, TypeVar
from urllib.parse import parse_qsl, urlencode

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
)
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, Span
from opentelemetry.util.types import Attributes

from service.observability.metrics import DOMAIN_METRICS
from service.refused_start import StartRefused

tracer = trace.get_tracer("mneme")


P = ParamSpec("P")
R = TypeVar("R")


# --- trace export ------------------------------------------------------------------------------


class _SpanProcessorSet(SpanProcessor):
    """The provider's exporting processor: a set that apps join at start-up and leave at
    shutdown. While it is empty, spans are not recorded (`_RecordedWhileExported`).

    OpenTelemetry allows one tracer provider per process and no way to remove a processor from
    it, yet one process may run several apps in turn (tests, `mneme bench`), each with its own
    exporter. Each app adds its processor here and removes it, flushed, when it stops.
    """

    def __init__(self) -> None:
        self._members: tuple[SpanProcessor, ...] = ()
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._members)

    def add(self, processor: SpanProcessor) -> None:
        with self._lock:
            self._members = (*self._members, processor)

    def remove(self, processor: SpanProcessor) -> None:
        with self._lock:
            self._members = tuple(p for p in self._members if p is not processor)

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        for member in self._members:
            member.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for member in self._members:
            member.on_end(span)

    def shutdown(self) -> None:
        for member in self._members:
            member.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(member.force_flush(timeout_millis) for member in self._members)


class _QueryStringRedaction(SpanProcessor):
    """Keeps the names of query parameters on server spans and drops their values.

    FastAPI records `url.query` as sent; a listing filter such as `?category=…` carries words
    a user chose, which must not leave the process.
    """

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        query = (span.attributes or {}).get("url.query")
        if isinstance(query, str) and query:
            pairs = parse_qsl(query, keep_blank_values=True)
            span.set_attribute("url.query", urlencode([(name, "REDACTED") for name, _ in pairs]))


class _RecordedWhileExported(Sampler):
    """Records spans only while something exports them.

    With `MNEME_OTEL_EXPORTER=none` nothing reads a span's attributes and events, yet making
    them cost about a twentieth of a search's CPU (docs/benchmarks.md, tracing overhead). An
    unrecorded span still has its trace and span ids, so logs and problem responses keep
    carrying them, and an incoming `traceparent` is still continued. While an exporter is
    attached, the configured sampler (`OTEL_TRACES_SAMPLER`) decides as usual.
    """

    def __init__(self, configured: Sampler, exporters: _SpanProcessorSet) -> None:
        self._configured = configured
        self._exporters = exporters

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: trace.SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: trace.TraceState | None = None,
    ) -> SamplingResult:
        if not self._exporters:
            parent = trace.get_current_span(parent_context).get_span_context()
            return SamplingResult(Decision.DROP, trace_state=parent.trace_state)
        return self._configured.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return f"RecordedWhileExported{{{self._configured.get_description()}}}"


_processors = _SpanProcessorSet()
_provider_lock = threading.Lock()
_provider_installed = False


def _service_version() -> str:
    try:
        return version("mneme")
    except PackageNotFoundError:
        return "unknown"


def _install_provider(service_name: str | None) -> None:
    """Install the SDK tracer provider once per process (OpenTelemetry refuses to replace it).

    The sampler comes from `OTEL_TRACES_SAMPLER`/`OTEL_TRACES_SAMPLER_ARG` and the resource
    from `OTEL_RESOURCE_ATTRIBUTES`/`OTEL_SERVICE_NAME`, both read by the SDK; an explicit
    `MNEME_OTEL_SERVICE_NAME` wins over the latter.
    """
    global _provider_installed
    with _provider_lock:
        if _provider_installed:
            return
        attributes: dict[str, str] = {"service.version": _service_version()}
        if service_name or not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = service_name or "mneme"
        provider = TracerProvider(resource=Resource.create(attributes))
        provider.sampler = _RecordedWhileExported(provider.sampler, _processors)
        provider.add_span_processor(_QueryStringRedaction())
        provider.add_span_processor(_processors)
        trace.set_tracer_provider(provider)
        _provider_installed = True


def _exporting_processor(exporter: str) -> SpanProcessor | None:
    if exporter == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter())
    if exporter == "otlp":
        protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        if protocol != "http/protobuf":
            # Sending protobuf over HTTP to a gRPC port would fail on every export, quietly.
            raise UnsupportedTraceExport(
                f"OTLP protocol {protocol!r} is not supported: Mneme exports http/protobuf "
                "(port 4318); to reach a gRPC-only backend, put an OpenTelemetry Collector "
                "in between"
            )
        # Endpoint, headers, timeout, compression and TLS come from OTEL_EXPORTER_OTLP_*;
        # batching from OTEL_BSP_*.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return BatchSpanProcessor(OTLPSpanExporter())
    return None


TRACE_EXPORTERS = ("none", "console", "otlp")


class UnsupportedTraceExport(StartRefused, ValueError):
    """An exporter or an OTLP protocol Mneme does not ship: the start is refused (in one line)
    rather than every span dropped quietly."""


def trace_exporters(
    setting: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """The span exporters to run: `MNEME_OTEL_EXPORTER` (`setting`) when set, else the
    specification's `OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER`; none by default. Raises
    `UnsupportedTraceExport` for an exporter Mneme does not ship (a typo must not silently drop
    traces)."""
    if setting is not None:
        chosen = [setting]
    elif environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        chosen = []
    else:
        chosen = [
            name.strip().lower()
            for name in environ.get("OTEL_TRACES_EXPORTER", "none").split(",")
            if name.strip()
        ]
    unknown = sorted(set(chosen) - set(TRACE_EXPORTERS))
    if unknown:
        raise UnsupportedTraceExport(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}; Mneme ships "
            f"{', '.join(TRACE_EXPORTERS)} (send to anything else through a Collector)"
        )
    return tuple(dict.fromkeys(name for name in chosen if name != "none"))


@contextlib.contextmanager
def trace_export(exporters: Sequence[str], service_name: str | None) -> Iterator[None]:
    """Record spans while the block runs and export them with each of `exporters`.

    With none, spans are not recorded, but they still have their ids (which reach problem
    responses and logs). Leaving the block flushes what is still queued.
    """
    _install_provider(service_name)
    processors = [
        processor
        for processor in (_exporting_processor(exporter) for exporter in exporters)
        if processor is not None
    ]
    for processor in processors:
        _processors.add(processor)
    try:
        yield
    finally:
        for processor in processors:
            _processors.remove(processor)
            processor.shutdown()


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")


def traced(name: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Run the decorated coroutine function inside a span called `name`."""

    def decorate(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @wraps(function)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with tracer.start_as_current_span(name):
                return await function(*args, **kwargs)

        return run

    return decorate


# --- background jobs: trace context through the queue ------------------------------------------


def trace_headers() -> dict[str, str]:
    """The current trace context as W3C `traceparent`/`tracestate` headers (empty outside one)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


@contextlib.contextmanager
def enqueue_span(kind: str) -> Iterator[Span]:
    """The producer span of enqueueing one job of `kind` (messaging conventions)."""
    with tracer.start_as_current_span(f"send {kind}", kind=trace.SpanKind.PRODUCER) as span:
        span.set_attribute("messaging.system", "pgqueuer")
        span.set_attribute("messaging.destination.name", kind)
        span.set_attribute("messaging.operation.type", "send")
        yield span


@contextlib.contextmanager
def job_span(
    kind: str, job_id: int, attempt: int, headers: Mapping[str, Any] | None
) -> Iterator[Span]:
    """The consumer span of one job run: the root of a trace of its own, linked to the span
    that enqueued it (a job may run long after, several times, or for several requests)."""
    started = time.perf_counter()
    with tracer.start_as_current_span(
        f"process {kind}",
        context=otel_context.Context(),
        kind=trace.SpanKind.CONSUMER,
        links=links_from(headers),
        attributes={
            "messaging.system": "pgqueuer",
            "messaging.destination.name": kind,
            "messaging.operation.type": "process",
            "messaging.message.id": str(job_id),
            "mneme.job.attempt": attempt,
        },
    ) as span:
        try:
            yield span
        finally:
            DOMAIN_METRICS.job_duration.labels(kind).observe(time.perf_counter() - started)


def describe_failure(exc: BaseException) -> tuple[str, str | None]:
    """`exc`'s class chain (`LLMUnavailable <- APIConnectionError <- ConnectError`) and the URL
    the failed call went to, if any: what an operator needs about an outage, with no message
    text (which can quote a model's reply or a tenant's data)."""
    names: list[str] = []
    url: str | None = None
    current: BaseException | None = exc
    while current is not None and len(names) < 6:
        names.append(type(current).__name__)
        request = getattr(current, "request", None)
        target = getattr(request, "url", None)
        if url is None and target is not None:
            url = _without_credentials(target)
        current = current.__cause__ or current.__context__
    return " <- ".join(names), url


def _without_credentials(url: Any) -> str:
    scheme, host, port, path = (
        getattr(url, part, "") for part in ("scheme", "host", "port", "path")
    )
    return f"{scheme}://{host}{f':{port}' if port else ''}{path}"


def links_from(headers: Mapping[str, Any] | None) -> list[Link]:
    """A link to the span whose context `headers` carry (the request that enqueued a job)."""
    if not headers:
        return []
    carrier = {key: value for key, value in headers.items() if isinstance(value, str)}
    parent = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    return [Link(parent)] if parent.is_valid else []
