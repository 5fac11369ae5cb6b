"""Metrics: the Prometheus instruments `/metrics` renders.

Labels are route templates, modes, kinds, stages, models and outcome classes — values from
small fixed sets — never raw paths, user ids or text, so label cardinality stays bounded.
"""

from __future__ import annotations

import asyncio

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
    """What the service does, measured where it happens: the shared machinery's instruments
    here (embedders, jobs, LLM, database pool, event loop), and on the same `registry` the
    instruments each domain declares in its own telemetry module (a search's in
    `service.memories.telemetry`, a context block's in `service.context.telemetry`).

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
