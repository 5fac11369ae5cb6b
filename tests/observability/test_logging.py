"""Log lines: one JSON object per event with the request's ids, an outage as one line per
failed call naming the URL and the error class, and CLI start-up free of platform warnings."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import subprocess
import sys

import asyncpg
import httpx
import pytest
import uvicorn.server
from httpx import AsyncClient
from pydantic import BaseModel, ConfigDict, SecretStr

from service.config import Settings
from service.logs import (
    AbandonedRequestFilter,
    DatabaseOutageFilter,
    TextFormatter,
    json_formatter,
)
from service.providers.embedder import EmbedderConfig, EmbedderUnavailable
from service.providers.llm import LLMUnavailable, OpenAIChatModel
from service.providers.openai_embedder import OpenAIEmbedder
from service.providers.telemetry import InstrumentedEmbedder
from tests.conftest import bearer
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer
from tests.observability.conftest import CapturedLines


async def test_each_request_logs_one_json_access_line_with_its_ids_tenant_route_and_duration(
    traced_client: AsyncClient, settings: Settings, tenant: str, log_lines: CapturedLines
) -> None:
    response = await traced_client.get(
        "/v1/users/me/memories", headers=bearer(settings, tenant, "fay")
    )
    request_id = response.headers["x-request-id"]
    lines = [json.loads(line) for line in log_lines.lines if request_id in line]
    (access,) = [line for line in lines if line["logger"] == "mneme.access"]
    assert access["level"] == "INFO"
    assert access["tenant"] == tenant
    assert access["route"] == "/v1/users/{user_id}/memories"
    assert access["method"] == "GET"
    assert access["status"] == 200
    assert access["duration_ms"] > 0
    assert len(access["trace_id"]) == 32 and len(access["span_id"]) == 16
    assert "time" in access and access["message"] == "GET /v1/users/{user_id}/memories 200"


def test_the_text_format_appends_the_request_fields_for_a_terminal() -> None:
    record = logging.LogRecord("mneme.access", logging.INFO, __file__, 1, "GET / 200", None, None)
    record.request_id = "abc"
    record.status = 200
    line = TextFormatter().format(record)
    assert line.endswith("GET / 200  request_id=abc status=200")


def _uvicorn_error(error: BaseException) -> logging.LogRecord:
    """The record uvicorn logs for a request its application did not finish."""
    return logging.LogRecord(
        "uvicorn.error",
        logging.ERROR,
        __file__,
        1,
        "Exception in ASGI application\n",
        None,
        (type(error), error, None),
    )


def test_a_request_cancelled_by_a_forced_stop_is_one_warning_line() -> None:
    record = _uvicorn_error(asyncio.CancelledError())
    assert AbandonedRequestFilter().filter(record)
    assert record.levelno == logging.WARNING
    line = TextFormatter().format(record)
    assert line.endswith(f"WARNING uvicorn.error  {AbandonedRequestFilter.MESSAGE}")
    assert AbandonedRequestFilter.MESSAGE == (
        "request abandoned: the service stopped before it finished"
    )
    assert "Traceback" not in line


def test_the_end_of_the_stops_grace_period_is_a_warning() -> None:
    # uvicorn's own line, as it logs it when its grace period ends with requests running (the
    # installed uvicorn still writes it so).
    assert '"Cancel %s running task(s), timeout graceful shutdown exceeded"' in inspect.getsource(
        uvicorn.server
    )
    record = logging.LogRecord(
        "uvicorn.error",
        logging.ERROR,
        __file__,
        1,
        "Cancel %s running task(s), timeout graceful shutdown exceeded",
        (3,),
        None,
    )
    assert AbandonedRequestFilter().filter(record)
    assert record.levelno == logging.WARNING
    line = TextFormatter().format(record)
    assert line.endswith(
        "WARNING uvicorn.error  stopping: 3 request(s) still running past the grace period "
        "are cut off"
    )


def test_an_application_error_keeps_its_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError as error:
        record = _uvicorn_error(error)
        record.exc_info = sys.exc_info()
    assert AbandonedRequestFilter().filter(record)
    assert record.levelno == logging.ERROR
    line = TextFormatter().format(record)
    assert "Exception in ASGI application" in line
    assert "Traceback" in line and "RuntimeError: boom" in line


PASSWORD = "llmpass123"


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str


class BothFormats(logging.Handler):
    """Every record as the service would write it, in JSON and in text."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += [json_formatter().format(record), TextFormatter().format(record)]


def test_a_urls_user_info_is_hidden_in_every_part_of_a_line_in_both_formats() -> None:
    url = httpx.URL(f"http://llmuser:{PASSWORD}@127.0.0.1:8299/v1/chat/completions")
    try:
        raise httpx.ConnectError(f"cannot reach {url}")
    except httpx.ConnectError:
        failed = sys.exc_info()
    record = logging.LogRecord(
        "httpx2", logging.INFO, __file__, 1, "HTTP Request: %s", (url,), failed
    )
    record.endpoint = f"https://ghp_{PASSWORD}@git.example/repo"
    handler = BothFormats()
    handler.handle(record)
    for line in handler.lines:
        assert PASSWORD not in line
        # Where the URL went, and as whom, is still there to read.
        assert "http://llmuser:***@127.0.0.1:8299/v1/chat/completions" in line
        assert "Traceback" in line and "cannot reach http://llmuser:***@" in line
    assert "https://***@git.example/repo" in handler.lines[0]


async def test_a_password_in_the_models_url_reaches_no_log_line_at_any_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = BothFormats()
    logging.getLogger().addHandler(handler)
    with FakeOpenAIServer() as server:
        with_password = server.base_url.replace("http://", f"http://llmuser:{PASSWORD}@")
        model = OpenAIChatModel(
            model=MODEL, base_url=with_password, api_key=API_KEY, timeout_seconds=10, max_retries=0
        )
        try:
            # The OpenAI client's own HTTP client logs every call's URL (at INFO), and the
            # client the URL it sends to (at DEBUG).
            with (
                caplog.at_level(logging.DEBUG, "httpx2"),
                caplog.at_level(logging.DEBUG, "openai"),
                contextlib.suppress(LLMUnavailable),
            ):
                await model.complete_json(system="s", user="u", output=Reply, schema_name="reply")
        finally:
            await model.aclose()
            logging.getLogger().removeHandler(handler)
    assert server.requests, "the model was not called"
    called = [line for line in handler.lines if "/v1/chat/completions" in line]
    assert any("HTTP Request" in line for line in called)
    assert all("llmuser:***@" in line for line in called)
    assert not [line for line in handler.lines if PASSWORD in line]


async def _refused_connection() -> BaseException:
    """What asyncpg raises connecting to a database that is not there (as while it restarts)."""
    try:
        await asyncpg.connect(host="127.0.0.1", port=9, timeout=10)
    except OSError as error:
        return error
    raise AssertionError("something answers on port 9")


def _pool_warning(error: BaseException) -> logging.LogRecord:
    """The line asyncpg's pool writes each time it fails to reconnect."""
    return logging.LogRecord(
        "asyncpg.pool",
        logging.WARNING,
        __file__,
        1,
        "Failed to restore the pool connection floor; retrying",
        None,
        (type(error), error, error.__traceback__),
    )


async def test_a_database_outage_is_one_line_naming_its_error_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = _pool_warning(await _refused_connection())
    with caplog.at_level(logging.INFO):
        assert DatabaseOutageFilter().filter(record)
    line = TextFormatter().format(record)
    assert "\n" not in line
    assert line.endswith(
        "Failed to restore the pool connection floor; retrying "
        "(database unavailable: ConnectionRefusedError)"
    )


async def test_a_database_outage_keeps_its_traceback_at_debug_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = _pool_warning(await _refused_connection())
    with caplog.at_level(logging.DEBUG):
        assert DatabaseOutageFilter().filter(record)
    assert "Traceback" in TextFormatter().format(record)


def test_an_error_that_is_no_outage_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    try:
        raise asyncpg.exceptions.UniqueViolationError("duplicate key value")
    except asyncpg.PostgresError as error:
        record = _pool_warning(error)
    with caplog.at_level(logging.INFO):
        assert DatabaseOutageFilter().filter(record)
    assert "Traceback" in TextFormatter().format(record)


def unreachable_embedder() -> InstrumentedEmbedder:
    # Port 9 (discard) is closed on loopback: the connection is refused at once.
    config = EmbedderConfig(
        provider="openai",
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key=SecretStr("sk-test-not-logged"),
        openai_max_retries=0,
    )
    return InstrumentedEmbedder(OpenAIEmbedder(config))


async def test_an_embedder_outage_is_one_line_per_call_with_url_and_error_class(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder = unreachable_embedder()
    caplog.set_level(logging.INFO)
    for _ in range(2):
        with pytest.raises(EmbedderUnavailable):
            await embedder.embed_query("what the user typed")
    await embedder.aclose()
    lines = [r for r in caplog.records if r.name == "mneme.embedder"]
    assert len(lines) == 2
    for record in lines:
        message = record.getMessage()
        assert record.levelno == logging.WARNING
        assert "calling http://127.0.0.1:9/v1/embeddings" in message
        assert "EmbedderUnavailable <- APIConnectionError <- ConnectError" in message
        assert record.exc_info is None
        assert "what the user typed" not in message and "sk-test" not in message


async def test_the_outage_traceback_is_logged_at_debug_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    embedder = unreachable_embedder()
    caplog.set_level(logging.DEBUG, logger="mneme.embedder")
    with pytest.raises(EmbedderUnavailable):
        await embedder.embed(["a", "b"])
    await embedder.aclose()
    (record,) = [r for r in caplog.records if r.name == "mneme.embedder"]
    assert record.exc_info is not None


def test_importing_the_embedded_database_prints_no_runtime_dir_warning() -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    probe = "from service.embedded_postgres import _import_pgserver; _import_pgserver()"
    done = subprocess.run(  # noqa: S603 - a fixed command line
        [sys.executable, "-W", "default", "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "RuntimeDirWarning" not in done.stderr
    assert done.stderr == ""
