"""`mneme serve` stopped while a request is still in flight (a client that never finishes its
body), and while a background job runs. Interrupted once, it waits for the request up to its
grace period, then abandons it and shuts down in order. Interrupted twice (a second Ctrl-C
while it waits), uvicorn leaves the application's shutdown out and the event loop cancels every
task: the service still closes what it opened, in order. Either way each abandoned request is
one warning line, no traceback, the embedded database is stopped, and everything it had
accepted is there at the next start: its memories, and a job that was running, which runs
again."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from service.config import Settings
from tests.conftest import TEST_SECRET, bearer, new_tenant
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, RecordedRequest
from tests.service_process import free_port

# Starts `mneme serve` twice on an embedded cluster of its own.
pytestmark = pytest.mark.slow

READY_SECONDS = 240
WAITING_FOR_REQUEST = "Waiting for connections to close"
ABANDONED = "request abandoned"
REMEMBERED = "Keeps bees on the roof"


def _environment(
    data_dir: Path, grace_seconds: float, extra: dict[str, str] | None = None
) -> dict[str, str]:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MNEME_")
    }
    return (
        environment
        | (extra or {})
        | {
            "MNEME_SHUTDOWN_GRACE_SECONDS": str(grace_seconds),
            "MNEME_DATA_DIR": str(data_dir),
            "MNEME_JWT_HS256_SECRET": TEST_SECRET,
            "MNEME_EMBEDDING_LOCAL_THREADS": "1",
            # uvicorn's own lines (it waits for a request) are logged at info.
            "MNEME_LOG_LEVEL": "info",
        }
    )


def _serve(
    data_dir: Path,
    port: int,
    log: Path,
    grace_seconds: float = 60,
    extra: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        [sys.executable, "-m", "service", "serve", "--port", str(port)],
        env=_environment(data_dir, grace_seconds, extra),
        cwd=data_dir,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    _until(ready, READY_SECONDS, log, process)
    return process


def _until(
    condition: Callable[[], bool],
    seconds: float,
    log: Path,
    process: subprocess.Popen[bytes],
) -> None:
    """Wait for `condition` while `process` runs, at most `seconds`; a failure shows its log."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def _interrupt_once(process: subprocess.Popen[bytes], _log: Path) -> None:
    process.send_signal(signal.SIGINT)


def _interrupt_twice(process: subprocess.Popen[bytes], log: Path) -> None:
    """The second interrupt while uvicorn waits for the request in flight (its grace period
    long enough), as a user's second Ctrl-C comes."""
    process.send_signal(signal.SIGINT)
    _until(lambda: WAITING_FOR_REQUEST in log.read_text(), 30, log, process)
    process.send_signal(signal.SIGINT)


def _stop(process: subprocess.Popen[bytes]) -> int:
    try:
        return process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()


def _unfinished_request(port: int, headers: dict[str, str]) -> socket.socket:
    """A request whose body never ends: it holds the stop until the stop gives up on it."""
    unfinished = socket.create_connection(("127.0.0.1", port))
    unfinished.sendall(
        b"POST /v1/users/me/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: {headers['Authorization']}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        + b'{"text": "Half a'
    )
    time.sleep(0.5)
    return unfinished


def _stopped_in_order(stopped: Stopped, data_dir: Path) -> None:
    output = stopped.output
    assert "mneme stopped" in output
    assert output.count(ABANDONED) == 1, output
    # The abandoned request got no answer (uvicorn's would be a plain-text 500), and it is
    # counted and logged as 444, not as a server error.
    assert stopped.answered == b""
    assert "POST /v1/users/{user_id}/memories 444" in output, output
    for failure in ("Traceback", "Task was destroyed", "Failed to restore"):
        assert failure not in output, output
    # The embedded database was stopped, not left running.
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()


def _kept(data_dir: Path, port: int, headers: dict[str, str], text: str) -> None:
    """The memory accepted before the stop is there after a start on the same data."""
    log = data_dir / "again.log"
    process = _serve(data_dir, port, log)
    try:
        listed = httpx.get(
            f"http://127.0.0.1:{port}/v1/users/me/memories", headers=headers, timeout=30
        )
        assert listed.status_code == 200, listed.text
        assert [item["text"] for item in listed.json()["items"]] == [text]
    finally:
        process.send_signal(signal.SIGINT)
        returncode = _stop(process)
    assert returncode == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def _remember(port: int, headers: dict[str, str], text: str) -> None:
    created = httpx.post(
        f"http://127.0.0.1:{port}/v1/users/me/memories",
        headers=headers,
        json={"text": text},
        timeout=30,
    )
    assert created.status_code == 201, created.text


@dataclass(frozen=True)
class Stopped:
    """How `mneme serve` stopped with a request in flight, and what to reach it again with."""

    returncode: int
    output: str
    port: int
    headers: dict[str, str]
    answered: bytes
    """What the client of the request in flight received."""


def _stopped_with_a_request_in_flight(
    data_dir: Path,
    interrupt: Callable[[subprocess.Popen[bytes], Path], None],
    grace_seconds: float = 60,
    extra: dict[str, str] | None = None,
    meanwhile: Callable[[int, dict[str, str], subprocess.Popen[bytes], Path], None] | None = None,
) -> Stopped:
    """Serve (with the `extra` settings), remember one memory, do what `meanwhile` does (given
    the port, the caller's headers, the process and its log), start a request that never ends,
    `interrupt` the service (given the process and its log) and wait for it to exit."""
    port = free_port()
    headers = bearer(Settings(jwt_hs256_secret=TEST_SECRET), new_tenant(), "alice")
    log = data_dir / "serve.log"
    process = _serve(data_dir, port, log, grace_seconds, extra)
    try:
        _remember(port, headers, REMEMBERED)
        if meanwhile is not None:
            meanwhile(port, headers, process, log)
        with _unfinished_request(port, headers) as unfinished:
            interrupt(process, log)
            returncode = _stop(process)
            unfinished.settimeout(10)
            answered = unfinished.recv(65536)
    finally:
        if process.poll() is None:
            process.kill()
    return Stopped(returncode, log.read_text(), port, headers, answered)


def test_a_stop_abandons_a_request_after_its_grace_period(tmp_path: Path) -> None:
    stopped = _stopped_with_a_request_in_flight(tmp_path, _interrupt_once, grace_seconds=1)
    assert stopped.returncode == 0, stopped.output
    # One interrupt: an ordinary shutdown, once the grace period is over.
    assert "mneme stopping at once" not in stopped.output
    _stopped_in_order(stopped, tmp_path)
    _kept(tmp_path, stopped.port, stopped.headers, REMEMBERED)


def test_a_second_interrupt_stops_the_service_at_once_and_cleanly(tmp_path: Path) -> None:
    stopped = _stopped_with_a_request_in_flight(tmp_path, _interrupt_twice)
    assert stopped.returncode == 0, stopped.output
    assert "mneme stopping at once" in stopped.output
    _stopped_in_order(stopped, tmp_path)
    _kept(tmp_path, stopped.port, stopped.headers, REMEMBERED)


def _extraction_of(text: str) -> Callable[[RecordedRequest], bool]:
    def asks(request: RecordedRequest) -> bool:
        return request.schema_name is not None and text in json.dumps(request.body)

    return asks


def test_a_job_running_when_the_service_stops_at_once_runs_again(tmp_path: Path) -> None:
    llm = FakeOpenAIServer()
    llm.start()
    try:
        with_model = {
            "MNEME_LLM_BASE_URL": llm.base_url,
            "MNEME_LLM_API_KEY": API_KEY,
            "MNEME_LLM_MODEL": MODEL,
            "MNEME_LLM_MAX_RETRIES": "0",
            "MNEME_LLM_TIMEOUT_SECONDS": "60",
            "MNEME_EXTRACTION_STRATEGY": "every_turn",
            "MNEME_JOB_POLL_INTERVAL_SECONDS": "0.1",
        }
        asked = _extraction_of("I moved to Lisbon in May")

        def extraction_running(
            port: int, headers: dict[str, str], process: subprocess.Popen[bytes], log: Path
        ) -> None:
            base = f"http://127.0.0.1:{port}/v1/users/me/threads"
            thread = httpx.post(base, headers=headers, json={"title": "Moving"}, timeout=30)
            assert thread.status_code == 201, thread.text
            turn = httpx.post(
                f"{base}/{thread.json()['id']}/turns",
                headers=headers,
                # A turn is read once it has its answer (`service.extraction.triggers`).
                json={
                    "messages": [
                        {"role": "user", "content": "I moved to Lisbon in May, for a new job."},
                        {"role": "assistant", "content": "Congratulations on the move!"},
                    ]
                },
                timeout=30,
            )
            assert turn.status_code in (200, 201), turn.text
            _until(lambda: any(map(asked, llm.requests)), 30, log, process)

        # The model answers nothing until released: the extraction job stays running.
        llm.hold_back()
        stopped = _stopped_with_a_request_in_flight(
            tmp_path, _interrupt_twice, extra=with_model, meanwhile=extraction_running
        )
        assert stopped.returncode == 0, stopped.output
        assert "mneme stopping at once" in stopped.output
        # Handed back as the stop cancelled it, not left for its heartbeat to lapse.
        assert "(memory_extraction) interrupted by shutdown; re-queued" in stopped.output
        assert stopped.answered == b""
        for failure in ("Traceback", "Task was destroyed"):
            assert failure not in stopped.output, stopped.output
        asked_before = sum(map(asked, llm.requests))

        # The next start runs the job again.
        llm.release()
        again_log = tmp_path / "again.log"
        process = _serve(tmp_path, stopped.port, again_log, extra=with_model)
        try:
            _until(lambda: sum(map(asked, llm.requests)) > asked_before, 90, again_log, process)
        finally:
            process.send_signal(signal.SIGINT)
            _stop(process)
    finally:
        llm.stop()
