"""A database that stops answering (its host frozen, a partition that drops packets without
resetting connections) refuses nothing and never enforces its own statement limit: only the
client's limits end the wait. `/readyz` answers 503 within `MNEME_READINESS_TIMEOUT_SECONDS`,
a request `503 DATABASE_UNAVAILABLE` once its command has waited past the statement limit and
its margin (or its connection past `MNEME_DB_CONNECT_TIMEOUT_SECONDS`), both with
`Retry-After`, and both are back by themselves once the database answers again."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from httpx import AsyncClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import async_sessionmaker

from service.admin.retention import RetentionScheduler, RetentionSweeper
from service.config import Settings
from service.db import CLIENT_WAIT_MARGIN_SECONDS, client_command_timeout, create_engine
from service.embedded_postgres import EmbeddedCluster
from tests.conftest import TEST_DATABASE, assert_problem, bearer, new_tenant
from tests.fixtures.apps import app_client, running_app
from tests.fixtures.partition import Partition

STATEMENT_LIMIT_MS = 200

ANSWERED_WITHIN_SECONDS = 60
"""Far more than the client's limits here (about 7 s), far less than forever: without them,
every answer below waits for the partition, which lasts until the test ends it."""


@pytest.fixture
async def partition(cluster: EmbeddedCluster, tmp_path: Path) -> AsyncIterator[Partition]:
    proxy = Partition(cluster.socket_dir, tmp_path)
    await proxy.start()
    try:
        yield proxy
    finally:
        proxy.release()
        await proxy.close()


async def _ready_again(client: AsyncClient) -> None:
    async with asyncio.timeout(ANSWERED_WITHIN_SECONDS):
        # Polled as a load balancer would: readiness is the only sign of the recovery.
        while (await client.get("/readyz")).status_code != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.1)


async def test_a_database_that_stops_answering_is_answered_503_not_waited_for(
    settings: Settings, partition: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    behind_partition = SecretStr(partition.url(settings.db_runtime_role, TEST_DATABASE))
    async with (
        running_app(
            settings,
            database_url=behind_partition,
            db_statement_timeout_ms=STATEMENT_LIMIT_MS,
            db_connect_timeout_seconds=1,
            readiness_timeout_seconds=0.5,
        ) as app,
        app_client(app) as client,
    ):
        headers = bearer(settings, new_tenant(), "ada")
        assert (await client.get("/v1/users/me/memories", headers=headers)).status_code == 200
        assert (await client.get("/readyz")).status_code == 200

        partition.hold()
        try:
            async with asyncio.timeout(ANSWERED_WITHIN_SECONDS):
                ready, listed, written = await asyncio.gather(
                    client.get("/readyz"),
                    client.get("/v1/users/me/memories", headers=headers),
                    client.post(
                        "/v1/users/me/memories", json={"text": "Owns a kayak"}, headers=headers
                    ),
                )
                # A connection opened while the database answers nothing fails as well.
                again = await client.get("/v1/users/me/memories", headers=headers)
                assert (await client.get("/healthz")).status_code == 200
        finally:
            partition.release()
        assert_problem(ready, 503, "SERVICE_UNAVAILABLE")
        for refused in (listed, written, again):
            assert_problem(refused, 503, "DATABASE_UNAVAILABLE")
        for answer in (ready, listed, written, again):
            assert int(answer.headers["Retry-After"]) >= 1
        await _ready_again(client)
        listed = await client.get("/v1/users/me/memories", headers=headers)
        assert listed.status_code == 200, listed.text
    # The readiness reads the probe stopped waiting for ended by themselves, their errors
    # dropped (asyncio would log each as an error never retrieved once it is collected).
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_the_client_waits_past_the_statement_limit_or_not_at_all(settings: Settings) -> None:
    # The server's cancellation (503 DATABASE_TIMEOUT, `test_statement_limit_at_start`) comes
    # first: the client gives up only on a server that does not answer.
    limited = settings.model_copy(update={"db_statement_timeout_ms": 15_000})
    assert client_command_timeout(limited) == 15 + CLIENT_WAIT_MARGIN_SECONDS
    unlimited = settings.model_copy(update={"db_statement_timeout_ms": 0})
    assert client_command_timeout(unlimited) is None


async def test_the_retention_schedulers_own_pool_gives_up_on_a_database_that_does_not_answer(
    settings: Settings, partition: Partition
) -> None:
    # The sweep's scheduler opens a pool of its own beside the engine's: without the client's
    # limits its connection waits for the partition (and the service's start with it).
    limited = settings.model_copy(update={"db_connect_timeout_seconds": 1, "jobs_enabled": True})
    engine = create_engine(partition.url(settings.db_runtime_role, TEST_DATABASE), limited)
    scheduler = RetentionScheduler(
        limited, engine, RetentionSweeper(async_sessionmaker(engine), None)
    )
    partition.hold()
    try:
        async with asyncio.timeout(ANSWERED_WITHIN_SECONDS):
            with pytest.raises((TimeoutError, OSError)):
                await scheduler.start()
    finally:
        partition.release()
        await scheduler.stop()
        await engine.dispose()
