"""Spans are recorded only while an exporter is attached; unrecorded ones keep their ids."""

from __future__ import annotations

from httpx import AsyncClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from service.config import Settings
from service.observability.tracing import _RecordedWhileExported, _SpanProcessorSet
from tests.conftest import bearer


def _provider() -> tuple[TracerProvider, _SpanProcessorSet]:
    """A tracer provider of its own, sampled as the service's is: the process-wide one may
    have exporters attached by other tests' apps."""
    exporters = _SpanProcessorSet()
    provider = TracerProvider()
    provider.sampler = _RecordedWhileExported(provider.sampler, exporters)
    provider.add_span_processor(exporters)
    return provider, exporters


def test_without_an_exporter_spans_are_not_recorded_but_keep_their_ids() -> None:
    provider, _ = _provider()
    with provider.get_tracer("test").start_as_current_span("unexported") as span:
        assert not span.is_recording()
        assert span.get_span_context().is_valid


def test_an_attached_exporter_gets_recorded_spans() -> None:
    provider, exporters = _provider()
    tracer = provider.get_tracer("test")
    exported = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exported)
    exporters.add(processor)
    with tracer.start_as_current_span("exported") as span:
        assert span.is_recording()
        span.set_attribute("mneme.test", 1)
    exporters.remove(processor)
    with tracer.start_as_current_span("after") as after:
        assert not after.is_recording()
    assert [(each.name, dict(each.attributes or {})) for each in exported.get_finished_spans()] == [
        ("exported", {"mneme.test": 1})
    ]


async def test_a_request_without_an_exporter_still_continues_the_callers_trace(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    incoming = "4bf92f3577b34da6a3ce929d0e0e4736"
    response = await client.get(
        "/v1/users/me/memories/00000000-0000-0000-0000-000000000000",
        headers={
            **bearer(settings, tenant, "trace-probe"),
            "traceparent": f"00-{incoming}-00f067aa0ba902b7-01",
        },
    )
    assert response.status_code == 404
    assert response.json()["trace_id"] == incoming
