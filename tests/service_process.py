"""The real service under uvicorn in a child process, on the tests' database."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from service.config import Settings
from tests.conftest import TEST_SECRET

STARTUP_DEADLINE_SECONDS = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def is_ready(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/readyz", timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass
class ServiceProcess:
    settings: Settings
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        settings = self.settings
        assert settings.database_url is not None and settings.migration_database_url is not None
        env = {
            **os.environ,
            "MNEME_DATABASE_URL": settings.database_url.get_secret_value(),
            "MNEME_MIGRATION_DATABASE_URL": settings.migration_database_url.get_secret_value(),
            "MNEME_MIGRATE_ON_START": "false",
            "MNEME_JOBS_ENABLED": "false",
            "MNEME_JWT_HS256_SECRET": TEST_SECRET,
            "MNEME_RATE_LIMIT_ENABLED": "false",
            "MNEME_AUTH_FAILURE_LIMIT": "1000000/minute",
            "MNEME_LOG_LEVEL": "warning",
        }
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "service", "serve", "--port", str(self.port)], env=env
        )
        deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
        while not is_ready(self.base_url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError("the service did not start")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as when a machine or container dies."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


@contextmanager
def running_service(settings: Settings) -> Iterator[ServiceProcess]:
    service = ServiceProcess(settings, free_port())
    service.start()
    try:
        yield service
    finally:
        service.stop()
