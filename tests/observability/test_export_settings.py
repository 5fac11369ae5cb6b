"""The exporter is configured by the standard OpenTelemetry variables alone: which exporter,
endpoint, headers, service name, resource attributes and sampler. Each case that exports runs in
a fresh process, because the tracer provider (and with it the resource and the sampler) is set
once per process; an exporter Mneme does not ship stops the start before any is set."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from service.config import Settings
from service.main import create_app
from service.observability import trace_exporters
from tests.observability.otlp_receiver import OtlpReceiver
from tests.test_refused_start import start_messages

# Spans made in a process of its own, exported as the environment says (as the service does).
PROBE = """
import os
from service.observability import trace_export, trace_exporters, tracer
with trace_export(trace_exporters(os.environ.get("MNEME_OTEL_EXPORTER")), None):
    with tracer.start_as_current_span("probe"):
        pass
"""


@pytest.fixture
def fresh_receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server


def run_probe(**env: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MNEME_"))}
    subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", PROBE],
        env={**clean, "OTEL_TRACES_EXPORTER": "otlp", **env},
        check=True,
        timeout=60,
    )


def test_endpoint_headers_service_name_and_resource_attributes_come_from_otel_variables(
    fresh_receiver: OtlpReceiver,
) -> None:
    base = fresh_receiver.endpoint.removesuffix("/v1/traces")
    run_probe(
        OTEL_EXPORTER_OTLP_ENDPOINT=base,
        OTEL_EXPORTER_OTLP_HEADERS="x-collector-token=abc123",
        OTEL_SERVICE_NAME="mneme-eu",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=staging",
    )
    (span,) = fresh_receiver.spans
    assert span.name == "probe"
    assert span.resource["service.name"] == "mneme-eu"
    assert span.resource["deployment.environment"] == "staging"
    assert span.resource["service.version"]
    assert fresh_receiver.headers[0]["x-collector-token"] == "abc123"


def test_the_service_name_defaults_to_mneme_and_the_sampler_is_honoured(
    fresh_receiver: OtlpReceiver,
) -> None:
    run_probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=fresh_receiver.endpoint)
    assert [span.resource["service.name"] for span in fresh_receiver.spans] == ["mneme"]
    run_probe(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=fresh_receiver.endpoint,
        OTEL_TRACES_SAMPLER="always_off",
    )
    assert len(fresh_receiver.spans) == 1


def test_an_unsupported_otlp_protocol_refuses_to_start_rather_than_export_nothing() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MNEME_"))}
    env = {**clean, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "OTLP protocol 'grpc' is not supported" in done.stderr


def test_the_sdk_switch_and_mnemes_own_setting_decide_over_the_exporter_list(
    fresh_receiver: OtlpReceiver,
) -> None:
    endpoint = fresh_receiver.endpoint
    run_probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint, OTEL_SDK_DISABLED="true")
    run_probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint, MNEME_OTEL_EXPORTER="none")
    run_probe(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint, OTEL_TRACES_EXPORTER="none")
    assert fresh_receiver.spans == []
    run_probe(
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=endpoint,
        OTEL_TRACES_EXPORTER="none",
        MNEME_OTEL_EXPORTER="otlp",
    )
    assert [span.name for span in fresh_receiver.spans] == ["probe"]


def test_the_exporter_list_follows_the_specification() -> None:
    assert trace_exporters(None, {}) == ()
    assert trace_exporters(None, {"OTEL_TRACES_EXPORTER": "otlp"}) == ("otlp",)
    assert trace_exporters(None, {"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}) == (
        "otlp",
        "console",
    )
    assert (
        trace_exporters(None, {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}) == ()
    )
    assert trace_exporters("console", {"OTEL_TRACES_EXPORTER": "otlp"}) == ("console",)
    with pytest.raises(ValueError, match="zipkin"):
        trace_exporters(None, {"OTEL_TRACES_EXPORTER": "otlp,zipkin"})


async def test_an_exporter_mneme_does_not_ship_stops_the_start_with_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp,zipkin")
    sent = await start_messages(create_app(settings))
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "mneme cannot start: OTEL_TRACES_EXPORTER names zipkin; Mneme ships "
            "none, console, otlp (send to anything else through a Collector)",
        }
    ]
