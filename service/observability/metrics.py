"""Metrics: the Prometheus instruments `/metrics` renders.

Labels are route templates, modes, kinds, stages, models and outcome classes — values from
small fixed sets — never raw paths, user ids or text, so label cardinality stays bounded.

Under `mneme serve --workers N` the workers share one port, so one scrape reaches one of them:
their values are then kept in files of a directory they share (prometheus_client's
multiprocess mode, chosen when it is imported, by `PROMETHEUS_MULTIPROC_DIR`, which the serve
command sets for its workers), and every scrape renders all workers' together.
"""

from __future__ import annotations

import asyncio
import os

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    values,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from sqlalchemy import event
from sqlalchemy.pool import Pool, QueuePool

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""Where the workers of one `mneme serve` keep their metrics (prometheus_client reads it)."""

SHARED_BETWEEN_WORKERS = values.ValueClass is not values.MutexValue
"""Whether this process keeps its metrics in the workers' shared directory: prometheus_client's
own choice, made from the environment when it was imported."""

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
        # The queue is the database's, the same whichever worker reads it: with several
        # workers, the value read last.
        self.job_queue_depth = Gauge(
            "mneme_job_queue_depth",
            "Jobs in the queue by kind and state (queued, picked), read at scrape time.",
            ["kind", "state"],
            registry=r,
            multiprocess_mode="mostrecent",
        )
        self.job_oldest_age = Gauge(
            "mneme_job_oldest_queued_age_seconds",
            "Age of the oldest queued job by kind, read at scrape time (0 when none).",
            ["kind"],
            registry=r,
            multiprocess_mode="mostrecent",
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
        # Each worker has a pool of its own: with several, the sum over the running ones.
        self.db_pool = Gauge(
            "mneme_db_pool_connections",
            "Runtime pool connections by state (in_use, idle, overflow).",
            ["state"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.busy_refusals = Counter(
            "mneme_busy_refusals_total",
            "Requests answered 503 SERVICE_BUSY, by reason (standing_queue, waited_too_long: "
            "refused a place among MNEME_MAX_REQUESTS_IN_PROGRESS; pool_timeout: no runtime "
            "pool connection free within MNEME_DB_POOL_TIMEOUT_SECONDS).",
            ["reason"],
            registry=r,
        )
        self.requests_admitted = Gauge(
            "mneme_requests_in_progress",
            "Requests holding one of MNEME_MAX_REQUESTS_IN_PROGRESS places (operational "
            "endpoints not counted).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.requests_waiting = Gauge(
            "mneme_requests_waiting",
            "Requests waiting for a place among MNEME_MAX_REQUESTS_IN_PROGRESS.",
            registry=r,
            multiprocess_mode="livesum",
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

PLATFORM_METRICS = CollectorRegistry()
"""The interpreter's version alone (`python_info`): the same in every worker. The process and
garbage collector series describe the one process a scrape reaches, so with several workers
they are left out rather than shown for whichever answered."""
PlatformCollector(registry=PLATFORM_METRICS)


def render_metrics(app_registry: CollectorRegistry) -> bytes:
    """The text exposition `/metrics` answers: this app's and the process-wide instruments, or
    with several workers every worker's, from the files they share."""
    if SHARED_BETWEEN_WORKERS:
        workers = CollectorRegistry()
        MultiProcessCollector(workers)  # type: ignore[no-untyped-call]
        return generate_latest(workers) + generate_latest(PLATFORM_METRICS)
    return b"".join(
        generate_latest(registry)
        for registry in (app_registry, DOMAIN_METRICS.registry, RUNTIME_METRICS)
    )


def record_pool_state(pool: Pool) -> None:
    """Set the pool gauges from `pool` as it is now."""
    if isinstance(pool, QueuePool):
        DOMAIN_METRICS.db_pool.labels("in_use").set(pool.checkedout())
        DOMAIN_METRICS.db_pool.labels("idle").set(pool.checkedin())
        DOMAIN_METRICS.db_pool.labels("overflow").set(max(pool.overflow(), 0))


def record_admission(running: int, waiting: int) -> None:
    """Set the admission gauges (`service.kit.admission`): at scrape time, and with several
    workers on every change, as a scrape reaches one worker and the others' must be counted as
    they are (`watch_pool`'s rule for the pool's)."""
    DOMAIN_METRICS.requests_admitted.set(running)
    DOMAIN_METRICS.requests_waiting.set(waiting)


def count_busy_refusal(reason: str) -> None:
    DOMAIN_METRICS.busy_refusals.labels(reason).inc()


def watch_pool(pool: Pool) -> None:
    """Keep the pool gauges current as connections are taken and given back: a scrape reaches
    one worker, and the others' pools must be counted as they are, not as they were when each
    last answered one."""

    def changed(*_: object) -> None:
        record_pool_state(pool)

    event.listen(pool, "checkout", changed)
    event.listen(pool, "checkin", changed)


def leave_shared_metrics() -> None:
    """A worker that stops takes its pool out of the workers' sum (its counters stay counted:
    what it did happened)."""
    if SHARED_BETWEEN_WORKERS:
        mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


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
