"""`mneme serve` interrupted twice (a second Ctrl-C while it waits for a request to finish):
uvicorn then leaves the application's shutdown out and the event loop cancels every task. The
service still closes what it opened, in order, and says so in one line: no traceback, the
embedded database stopped, and everything it had accepted there at the next start."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from service.config import Settings
from tests.conftest import TEST_SECRET, bearer, new_tenant
from tests.service_process import free_port

# Starts `mneme serve` twice on an embedded cluster of its own.
pytestmark = pytest.mark.slow

READY_SECONDS = 240
WAITING_FOR_REQUEST = "Waiting for connections to close"


def _environment(data_dir: Path) -> dict[str, str]:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MNEME_")
    }
    return environment | {
        "MNEME_DATA_DIR": str(data_dir),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_EMBEDDING_LOCAL_THREADS": "1",
        # uvicorn's own lines (it waits for a request) are logged at info.
        "MNEME_LOG_LEVEL": "info",
    }


def _serve(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        [sys.executable, "-m", "service", "serve", "--port", str(port)],
        env=_environment(data_dir),
        cwd=data_dir,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + READY_SECONDS
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)


def _wait_for_line(log: Path, line: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while line not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> int:
    try:
        return process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()


def test_a_second_interrupt_stops_the_service_at_once_and_cleanly(tmp_path: Path) -> None:
    port = free_port()
    headers = bearer(Settings(jwt_hs256_secret=TEST_SECRET), new_tenant(), "alice")
    first_log = tmp_path / "first.log"
    process = _serve(tmp_path, port, first_log)
    try:
        created = httpx.post(
            f"http://127.0.0.1:{port}/v1/users/me/memories",
            headers=headers,
            json={"text": "Keeps bees on the roof"},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        # A request whose body never ends keeps uvicorn waiting after the first interrupt:
        # the second one comes while it waits, as a user's second Ctrl-C does.
        with socket.create_connection(("127.0.0.1", port)) as unfinished:
            unfinished.sendall(
                b"POST /v1/users/me/memories HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                + f"Authorization: {headers['Authorization']}\r\n".encode()
                + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                + b'{"text": "Half a'
            )
            time.sleep(0.5)
            process.send_signal(signal.SIGINT)
            _wait_for_line(first_log, WAITING_FOR_REQUEST, process)
            process.send_signal(signal.SIGINT)
            returncode = _stop(process)
    finally:
        if process.poll() is None:
            process.kill()
    output = first_log.read_text()
    assert returncode == 0, output
    assert "mneme stopping at once" in output
    assert "mneme stopped" in output
    for failure in ("Traceback", "Task was destroyed", "Failed to restore"):
        assert failure not in output, output
    # The embedded database was stopped, not left running.
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()

    second_log = tmp_path / "second.log"
    process = _serve(tmp_path, port, second_log)
    try:
        listed = httpx.get(
            f"http://127.0.0.1:{port}/v1/users/me/memories", headers=headers, timeout=30
        )
        assert listed.status_code == 200, listed.text
        assert [item["text"] for item in listed.json()["items"]] == ["Keeps bees on the roof"]
    finally:
        process.send_signal(signal.SIGINT)
        returncode = _stop(process)
    output = second_log.read_text()
    assert returncode == 0, output
    # One interrupt is an ordinary shutdown.
    assert "mneme stopping at once" not in output
    assert "Traceback" not in output, output
