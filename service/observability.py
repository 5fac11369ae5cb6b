"""Telemetry wiring: OpenTelemetry tracing, Prometheus metrics and request context.

Traces. FastAPI's own telemetry makes the one server span of each request (HTTP semantic
conventions, incoming `traceparent` honoured, renamed to the route template); it turns itself on
as soon as an SDK tracer provider is installed, so Mneme never makes a second one. Mneme's spans
(auth, query embedding, the fusion statement, MMR, context assembly, jobs, LLM calls) nest under
it. Export is chosen as the OpenTelemetry environment specification says, by `OTEL_TRACES_EXPORTER`
(a comma-separated list of `otlp`, `console`, `none`; `OTEL_SDK_DISABLED=true` turns it off), so an
operator's auto-configuration reaches Mneme; `MNEME_OTEL_EXPORTER` wins over both, and with
neither set nothing is exported. Everything else is the standard `OTEL_*` variables (endpoint,
headers, protocol, service name, resource attributes, sampler), read by the OpenTelemetry SDK and
exporters themselves. With `none`, spans are not
recorded at all, but keep their ids, which logs and problem responses carry.

Span attributes and events carry ids, counts, model names and scores, never what a user wrote
(message or memory text, profile values, query strings, credentials).

Metrics. Labels are route templates, modes, kinds, stages, models and outcome classes — values
from small fixed sets — never raw paths, user ids or text, so label cardinality stays bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import os
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from functools import wraps
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
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
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from service.context.schemas import ContextSection
    from service.memories.schemas import SearchHit

tracer = trace.get_tracer("mneme")

# Matched with `fullmatch`: a `$` would also admit a trailing newline.
_REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")

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
            raise ValueError(
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


def trace_exporters(
    setting: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """The span exporters to run: `MNEME_OTEL_EXPORTER` (`setting`) when set, else the
    specification's `OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER`; none by default. Raises
    ValueError for an exporter Mneme does not ship (a typo must not silently drop traces)."""
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
        raise ValueError(
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


# --- search and context: component scores as span events ---------------------------------------


def record_search_hits(span: Span, hits: Sequence[SearchHit], *, mode: str) -> None:
    """One `mneme.search.hit` event per returned hit with every component score, in rank order.

    Absent components (no lexical match, no vector, no MMR pass) are left out of the event
    rather than written as zeros, so a reader can tell "not a candidate" from "scored 0".
    """
    DOMAIN_METRICS.search_hits.labels(mode).observe(len(hits))
    if not span.is_recording():
        return
    span.set_attribute("mneme.search.mode", mode)
    span.set_attribute("mneme.search.hits", len(hits))
    for position, hit in enumerate(hits, start=1):
        scores = hit.scores
        optional = {
            "mneme.score.lexical_rank": scores.lexical_rank,
            "mneme.score.lexical": scores.lexical_score,
            "mneme.score.vector_rank": scores.vector_rank,
            "mneme.score.vector_cosine": scores.vector_cosine,
            "mneme.score.mmr": scores.mmr_score,
            "mneme.score.neighbour": scores.neighbour_score,
            "mneme.score.thread": scores.thread_score,
            "mneme.score.speaker": scores.speaker_score,
            "mneme.score.date": scores.date_score,
            "mneme.score.rerank": scores.rerank_score,
        }
        attributes: dict[str, str | int | float] = {
            "mneme.memory.id": str(hit.memory.id),
            "mneme.hit.position": position,
            "mneme.score.fused": scores.fused_score,
            "mneme.score.recency": scores.recency_factor,
            "mneme.score.confidence": scores.confidence_factor,
            "mneme.score.final": scores.final_score,
        }
        attributes.update({key: value for key, value in optional.items() if value is not None})
        span.add_event("mneme.search.hit", attributes)


def record_context_sections(
    span: Span,
    sections: Sequence[ContextSection],
    omitted: Mapping[str, int],
    *,
    token_count: int,
    budget: int,
) -> None:
    """The context block's shape on its span: one event per section (tokens used, items,
    items omitted for budget) and one per chosen item (section, id, kind, tokens)."""
    DOMAIN_METRICS.context_tokens.labels("used").observe(token_count)
    DOMAIN_METRICS.context_tokens.labels("budget").observe(budget)
    if not span.is_recording():
        return
    span.set_attribute("mneme.context.tokens", token_count)
    span.set_attribute("mneme.context.budget", budget)
    for section in sections:
        span.add_event(
            "mneme.context.section",
            {
                "mneme.context.section": section.name,
                "mneme.context.section.tokens": sum(item.tokens for item in section.items),
                "mneme.context.section.items": len(section.items),
                "mneme.context.section.omitted": section.omitted,
            },
        )
        for item in section.items:
            attributes: dict[str, str | int] = {
                "mneme.context.section": section.name,
                "mneme.context.item.kind": item.kind.partition(":")[0],
                "mneme.context.item.tokens": item.tokens,
            }
            # Profile lines have no id; summary and message ids are Mneme's, not user text.
            if item.id is not None:
                attributes["mneme.context.item.id"] = item.id
            span.add_event("mneme.context.item", attributes)
    listed = {section.name for section in sections}
    for name, count in omitted.items():
        if name not in listed:
            span.add_event(
                "mneme.context.section",
                {
                    "mneme.context.section": name,
                    "mneme.context.section.tokens": 0,
                    "mneme.context.section.items": 0,
                    "mneme.context.section.omitted": count,
                },
            )


@contextlib.contextmanager
def search_stage(stage: str, mode: str) -> Iterator[Span]:
    """A span for one stage of a search (`memories.<stage>`), timed into the stage histogram."""
    started = time.perf_counter()
    with tracer.start_as_current_span(f"memories.{stage}") as span:
        span.set_attribute("mneme.search.mode", mode)
        try:
            yield span
        finally:
            DOMAIN_METRICS.search_stage_latency.labels(stage, mode).observe(
                time.perf_counter() - started
            )


@contextlib.contextmanager
def fusion_statement(mode: str, statement: str = "HYBRID_SEARCH_SQL") -> Iterator[StatementSpan]:
    """The span of the one fusion statement (database client conventions) and its metrics."""
    with search_stage("fusion_query", mode) as span:
        span.set_attribute("db.system.name", "postgresql")
        # The name before semantic conventions 1.26; some backends still key on it.
        span.set_attribute("db.system", "postgresql")
        span.set_attribute("db.query.summary", statement)
        span.set_attribute("db.operation.name", "SELECT")
        yield StatementSpan(span, mode)


@dataclasses.dataclass(frozen=True)
class StatementSpan:
    span: Span
    mode: str

    def rows(self, count: int) -> None:
        """Record how many rows (fused candidates) the statement returned."""
        self.span.set_attribute("db.response.returned_rows", count)
        DOMAIN_METRICS.search_candidates.labels(self.mode).observe(count)


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


# --- metrics -----------------------------------------------------------------------------------

# `_created` series repeat every counter and histogram with its creation time; Prometheus never
# needs them (it detects resets itself) and they double the series count.
disable_created_metrics()  # type: ignore[no-untyped-call]

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500)
TOKEN_BUCKETS = (0, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


class Metrics:
    """The HTTP instruments of one app, on a registry of their own (one per app)."""

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
        # No route label: the limiter refuses before routing, so there is no template yet.
        self.rate_limited = Counter(
            "mneme_rate_limited_total",
            "Requests refused with 429 Too Many Requests.",
            registry=self.registry,
        )


class DomainMetrics:
    """What the service does, measured where it happens (embedders, search, context, jobs,
    LLM, database pool).

    Process-wide, on a registry of their own that `/metrics` renders next to the app's: these
    are recorded deep inside services and providers, which should not carry an app object
    around just to count. (Several apps in one process — tests, `mneme bench` — share them.)
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.embedding_latency = Histogram(
            "mneme_embedding_duration_seconds",
            "Embedding calls by purpose (query or document) and model.",
            ["purpose", "model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.embedding_batch = Histogram(
            "mneme_embedding_batch_size",
            "Texts per embedding call by purpose.",
            ["purpose"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.embedding_failures = Counter(
            "mneme_embedding_failures_total",
            "Embedding calls that failed, by model and error class.",
            ["model", "error_type"],
            registry=r,
        )
        self.search_stage_latency = Histogram(
            "mneme_search_stage_duration_seconds",
            "Search stages (fusion_query, mmr, rerank) by search mode.",
            ["stage", "mode"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.search_candidates = Histogram(
            "mneme_search_candidates",
            "Fused candidates the search statement returned, by mode.",
            ["mode"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.rerank_failures = Counter(
            "mneme_rerank_failures_total",
            "Searches whose reranker gave no usable scores (they kept the fused order), by "
            "reason (timeout, unreachable, error_status, bad_answer).",
            ["reason"],
            registry=r,
        )
        self.search_hits = Histogram(
            "mneme_search_hits",
            "Hits a search returned, by mode.",
            ["mode"],
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.context_tokens = Histogram(
            "mneme_context_tokens",
            "Context blocks: tokens used and the budget they had (measure=used|budget).",
            ["measure"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.job_runs = Counter(
            "mneme_job_runs_total",
            "Job runs by kind and outcome (ok, retry, failed).",
            ["kind", "outcome"],
            registry=r,
        )
        self.job_duration = Histogram(
            "mneme_job_duration_seconds",
            "Job run time by kind.",
            ["kind"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.job_queue_depth = Gauge(
            "mneme_job_queue_depth",
            "Jobs in the queue by kind and state (queued, picked), read at scrape time.",
            ["kind", "state"],
            registry=r,
        )
        self.job_oldest_age = Gauge(
            "mneme_job_oldest_queued_age_seconds",
            "Age of the oldest queued job by kind, read at scrape time (0 when none).",
            ["kind"],
            registry=r,
        )
        self.llm_calls = Counter(
            "mneme_llm_calls_total",
            "Chat model calls by model and outcome (ok, error).",
            ["model", "outcome"],
            registry=r,
        )
        self.llm_errors = Counter(
            "mneme_llm_errors_total",
            "Chat model calls that failed, by model and error class.",
            ["model", "error_type"],
            registry=r,
        )
        self.llm_tokens = Counter(
            "mneme_llm_tokens_total",
            "Tokens the chat model reported, by model and direction (input, output).",
            ["model", "direction"],
            registry=r,
        )
        self.llm_latency = Histogram(
            "mneme_llm_call_duration_seconds",
            "Chat model call latency by model.",
            ["model"],
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=r,
        )
        self.db_pool = Gauge(
            "mneme_db_pool_connections",
            "Runtime pool connections by state (in_use, idle, overflow), read at scrape time.",
            ["state"],
            registry=r,
        )
        self.event_loop_lag = Histogram(
            "mneme_event_loop_lag_seconds",
            "How late the event loop ran a callback it had scheduled (work that blocks it).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )


DOMAIN_METRICS = DomainMetrics()

RUNTIME_METRICS = CollectorRegistry()
"""The process and the interpreter as Prometheus' own collectors describe them: CPU seconds,
resident memory, open and maximum file descriptors, start time (`process_*`), the Python
version (`python_info`) and the garbage collector's work (`python_gc_*`)."""
ProcessCollector(registry=RUNTIME_METRICS)
PlatformCollector(registry=RUNTIME_METRICS)
GCCollector(registry=RUNTIME_METRICS)

EVENT_LOOP_PROBE_SECONDS = 0.5


async def watch_event_loop_lag(interval: float = EVENT_LOOP_PROBE_SECONDS) -> None:
    """Until cancelled, measure how late the event loop wakes a sleep of `interval`: anything
    that holds the loop (CPU work in a coroutine, a blocking call) delays every request by as
    much, and shows here before it shows as latency."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval
        await asyncio.sleep(interval)
        DOMAIN_METRICS.event_loop_lag.observe(max(loop.time() - due, 0.0))


# --- the request middleware --------------------------------------------------------------------


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
        try:
            await self.app(scope, receive, send_with_request_id)
        finally:
            context.route = _route_template(scope)
            status = context.status or 500
            elapsed = time.perf_counter() - started
            self.metrics.http_requests.labels(context.method, context.route, str(status)).inc()
            self.metrics.http_latency.labels(context.method, context.route).observe(elapsed)
            if status == 429:
                self.metrics.rate_limited.inc()
            self.on_complete(context, status, elapsed)
            request_context.reset(token)


RequestLogger = Callable[[RequestContext, int, float], None]
"""Writes the one access-log line of a finished request."""


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            return candidate if _REQUEST_ID_PATTERN.fullmatch(candidate) else None
    return None


def _route_template(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "<unmatched>"
