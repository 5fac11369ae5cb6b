"""Telemetry wiring: OpenTelemetry tracing (`tracing`), Prometheus metrics (`metrics`) and the
request middleware with the request context of logs (`middleware`).

This package knows no domain: what a search or a context block records about itself lives
with it (`service.memories.telemetry`, `service.context.telemetry`). Its public names are
importable from here.
"""

from service.observability.metrics import (
    COUNT_BUCKETS,
    DOMAIN_METRICS,
    EVENT_LOOP_PROBE_SECONDS,
    LATENCY_BUCKETS,
    RUNTIME_METRICS,
    SHARED_BETWEEN_WORKERS,
    TOKEN_BUCKETS,
    DomainMetrics,
    Metrics,
    count_busy_refusal,
    leave_shared_metrics,
    record_admission,
    record_pool_state,
    render_metrics,
    watch_event_loop_lag,
    watch_pool,
)
from service.observability.middleware import (
    LabelledRoute,
    RequestContext,
    RequestLogger,
    TelemetryMiddleware,
    bind_tenant,
    current_request_id,
    request_context,
)
from service.observability.tracing import (
    TRACE_EXPORTERS,
    current_trace_id,
    describe_failure,
    enqueue_span,
    job_span,
    links_from,
    trace_export,
    trace_exporters,
    trace_headers,
    traced,
    tracer,
)

__all__ = [
    "COUNT_BUCKETS",
    "DOMAIN_METRICS",
    "EVENT_LOOP_PROBE_SECONDS",
    "LATENCY_BUCKETS",
    "RUNTIME_METRICS",
    "SHARED_BETWEEN_WORKERS",
    "TOKEN_BUCKETS",
    "TRACE_EXPORTERS",
    "DomainMetrics",
    "LabelledRoute",
    "Metrics",
    "RequestContext",
    "RequestLogger",
    "TelemetryMiddleware",
    "bind_tenant",
    "count_busy_refusal",
    "current_request_id",
    "current_trace_id",
    "describe_failure",
    "enqueue_span",
    "job_span",
    "leave_shared_metrics",
    "links_from",
    "record_admission",
    "record_pool_state",
    "render_metrics",
    "request_context",
    "trace_export",
    "trace_exporters",
    "trace_headers",
    "traced",
    "tracer",
    "watch_event_loop_lag",
    "watch_pool",
]
