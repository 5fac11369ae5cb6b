"""A live `mneme serve` on a loopback port, for the generated clients to talk to over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from service.config import Settings
from tests.conftest import TEST_SECRET, bearer, new_tenant

# Starting includes migrating (already done, so quick) and loading the local embedding model.
STARTUP_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class LiveServer:
    base_url: str
    settings: Settings

    def token_for(self, tenant_id: str, user_id: str) -> str:
        header = bearer(self.settings, tenant_id, user_id)["Authorization"]
        return header.removeprefix("Bearer ")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def live_server(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    assert settings.database_url is not None and settings.migration_database_url is not None
    port = _free_port()
    env = {
        **os.environ,
        "MNEME_DATABASE_URL": settings.database_url.get_secret_value(),
        "MNEME_MIGRATION_DATABASE_URL": settings.migration_database_url.get_secret_value(),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_JOBS_ENABLED": "false",
        "MNEME_RATE_LIMIT_DEFAULT": "10000/minute",
    }
    log = tmp_path_factory.mktemp("live_server") / "serve.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(f"mneme serve exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("mneme serve did not become ready")
            time.sleep(0.25)
        yield LiveServer(base_url, settings)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def live_user() -> tuple[str, str]:
    """A fresh (tenant, user) pair."""
    return new_tenant(), "u-" + new_tenant()
