"""One app for the telemetry tests: spans exported over OTLP/HTTP to a receiver on loopback,
JSON logs captured line by line, and a job worker that runs extraction against the local
OpenAI-compatible server."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from httpx import AsyncClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.logs import RequestContextFilter, json_formatter
from service.main import create_app
from tests.extraction.conftest import llm_settings, serve
from tests.fixtures.openai_server import FakeOpenAIServer
from tests.observability.otlp_receiver import OtlpReceiver


class CapturedLines(logging.Handler):
    """Every log record as the JSON line the service would print."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(json_formatter())
        self.addFilter(RequestContextFilter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(scope="package")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server


@pytest.fixture(scope="package")
def telemetry_llm() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="package")
def log_lines() -> Iterator[CapturedLines]:
    handler = CapturedLines()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)


def traced_settings(cluster: EmbeddedCluster, llm: FakeOpenAIServer, **overrides: Any) -> Settings:
    return llm_settings(
        cluster,
        llm,
        otel_exporter="otlp",
        log_format="json",
        extraction_strategy="every_turn",
        **overrides,
    )


@pytest.fixture(scope="package")
async def traced_client(
    cluster: EmbeddedCluster,
    settings: Settings,
    receiver: OtlpReceiver,
    telemetry_llm: FakeOpenAIServer,
    log_lines: CapturedLines,
) -> AsyncIterator[AsyncClient]:
    """(`settings` first: it migrates the database.)"""
    with pytest.MonkeyPatch.context() as env:
        # Read by the OTLP exporter itself, as in any deployment.
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        async for client in serve(create_app(traced_settings(cluster, telemetry_llm))):
            yield client


def flush_spans() -> None:
    """Export every finished span now (the batch processor would within its delay)."""
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    assert provider.force_flush()
