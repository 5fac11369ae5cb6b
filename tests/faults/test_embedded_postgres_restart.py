"""`mneme serve` on the embedded database, SIGKILLed and started again: the postmaster it left
running is taken over, and the next SIGTERM stops it too (the dead service's entry among the
cluster's handles must not keep it running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import TEST_SECRET
from tests.service_process import free_port

pytestmark = pytest.mark.slow

READY_SECONDS = 240
STOP_SECONDS = 60


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _serve(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("MNEME_")
    }
    environment |= {
        "MNEME_DATA_DIR": str(data_dir),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_JOBS_ENABLED": "false",
        "MNEME_EMBEDDING_LOCAL_THREADS": "1",
        "MNEME_LOG_LEVEL": "warning",
    }
    log = (data_dir / "serve.log").open("ab")
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
        [sys.executable, "-m", "service", "serve", "--port", str(port)],
        env=environment,
        cwd=data_dir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + READY_SECONDS
    while True:
        assert process.poll() is None, (data_dir / "serve.log").read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, (data_dir / "serve.log").read_text()
        time.sleep(0.5)


def test_sigterm_after_a_killed_run_stops_the_embedded_postmaster(tmp_path: Path) -> None:
    port = free_port()
    first = _serve(tmp_path, port)
    postmaster = _postmaster_pid(tmp_path)
    second: subprocess.Popen[bytes] | None = None
    try:
        assert postmaster is not None and _running(postmaster)
        first.kill()
        first.wait(timeout=30)
        # No shutdown code ran: the postmaster outlives the service, as after an OOM kill.
        assert _running(postmaster)

        second = _serve(tmp_path, port)
        assert _postmaster_pid(tmp_path) == postmaster
        second.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then re-raises the signal it caught.
        exit_code = second.wait(timeout=STOP_SECONDS)
        assert exit_code in (0, -signal.SIGTERM), (tmp_path / "serve.log").read_text()

        deadline = time.monotonic() + STOP_SECONDS
        while _running(postmaster) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(postmaster), "SIGTERM left the embedded postmaster running"
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        if postmaster is not None and _running(postmaster):
            os.kill(postmaster, signal.SIGQUIT)
