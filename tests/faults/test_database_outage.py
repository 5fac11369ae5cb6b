"""The embedded Postgres dies mid-write (SIGKILL of the postmaster): clients get 503s, the
service restarts its database by itself, and every acknowledged write is still there.

This module runs an app on its own embedded cluster (not the session's shared one), because
killing the shared cluster would fail every other test.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from httpx import ASGITransport, AsyncClient, Response
from pydantic import SecretStr

from service.config import Settings
from service.db_outage import is_database_unavailable
from service.main import create_app
from tests.conftest import TEST_SECRET, assert_problem, bearer, new_tenant

# A postmaster killed and restarted on a cluster of its own: with the process-level tests.
pytestmark = pytest.mark.slow

RECOVERY_DEADLINE_SECONDS = 90


@pytest.fixture(scope="module")
async def own_cluster_app() -> AsyncIterator[Any]:
    # Not under pytest's temporary directory: a concurrent pytest run prunes old run
    # directories there, which would pull the data directory from under the restarted cluster.
    data_dir = Path(tempfile.mkdtemp(prefix="mneme-outage-"))
    settings = Settings(
        _env_file=None,
        data_dir=data_dir,
        jwt_hs256_secret=SecretStr(TEST_SECRET),
        rate_limit_default="100000/minute",
        auth_failure_limit="100000/minute",
        jobs_enabled=False,
    )
    application = create_app(settings)
    try:
        async with LifespanManager(application, startup_timeout=180, shutdown_timeout=60):
            yield application
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
async def outage_client(own_cluster_app: Any) -> AsyncIterator[AsyncClient]:
    # raise_app_exceptions stays on: an exception the app re-raises after answering (which makes
    # a real server drop the keep-alive connection) fails the test.
    transport = ASGITransport(app=own_cluster_app)
    async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
        yield client


def _postmaster_pid(application: Any) -> int:
    pid_file = Path(application.state.embedded_supervisor.cluster.handle.pgdata) / "postmaster.pid"
    return int(pid_file.read_text().splitlines()[0])


async def _wait_ready(client: AsyncClient) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECOVERY_DEADLINE_SECONDS
    while loop.time() < deadline:
        if (await client.get("/readyz")).status_code == 200:
            return
        await asyncio.sleep(0.25)
    pytest.fail("the service did not become ready again")


def _assert_unavailable(response: Response) -> None:
    assert_problem(response, 503, "DATABASE_UNAVAILABLE")
    assert int(response.headers["Retry-After"]) >= 1


async def test_killed_postmaster_gives_503s_then_heals_without_losing_acknowledged_writes(
    own_cluster_app: Any, outage_client: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    settings: Settings = own_cluster_app.state.mneme.settings
    headers = bearer(settings, new_tenant(), "ada")
    acknowledged: list[str] = []
    statuses: list[int] = []
    killed = asyncio.Event()

    async def write(index: int) -> None:
        response = await outage_client.post(
            "/v1/users/me/memories", json={"text": f"fact number {index}"}, headers=headers
        )
        statuses.append(response.status_code)
        if response.status_code == 201:
            acknowledged.append(response.json()["id"])
        else:
            _assert_unavailable(response)

    async def writer() -> None:
        index = 0
        while not killed.is_set() or len(statuses) < index + 1:
            await asyncio.gather(*(write(index + k) for k in range(4)))
            index += 4
            if killed.is_set():
                return

    for index in range(5):
        await write(index)
    assert statuses == [201] * 5

    writing = asyncio.create_task(writer())
    await asyncio.sleep(0.3)
    os.kill(_postmaster_pid(own_cluster_app), signal.SIGKILL)
    killed.set()
    await writing

    # While the database is down (the supervisor looks once a second), requests are 503s.
    _assert_unavailable(await outage_client.get("/v1/users/me/memories", headers=headers))
    assert (await outage_client.get("/healthz")).status_code == 200

    await _wait_ready(outage_client)
    # The pool may reconnect a moment before the supervisor logs the restart it just made.
    for _ in range(100):
        if any("running again" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.1)
    assert any("running again" in r.getMessage() for r in caplog.records)

    after = await outage_client.post(
        "/v1/users/me/memories", json={"text": "written after recovery"}, headers=headers
    )
    assert after.status_code == 201, after.text
    acknowledged.append(after.json()["id"])
    for memory_id in acknowledged:
        got = await outage_client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
        assert got.status_code == 200, f"acknowledged write {memory_id} was lost"
    assert set(statuses) <= {201, 503}
    # What logged the outage (the background refresh of the vector columns, the pools) wrote
    # one line each time, naming the error, not a traceback (`service.logs`).
    outage_lines = [r for r in caplog.records if "database unavailable" in r.getMessage()]
    assert outage_lines
    tracebacks = [
        r.getMessage()
        for r in caplog.records
        if r.exc_info and r.exc_info[1] and is_database_unavailable(r.exc_info[1])
    ]
    assert tracebacks == []
