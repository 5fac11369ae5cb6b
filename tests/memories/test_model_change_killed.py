"""`mneme reembed run` killed in the middle and run again: every memory ends with one vector of
the new model, and every search in the meantime compared its question with one model only."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.embedded_postgres import EmbeddedCluster
from service.memories import reembed
from service.memories.vector_columns import VectorColumns
from service.providers import Embedder
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all
from tests.fixtures.openai_server import (
    EMBEDDING_MODEL,
    EMBEDDINGS_PATH,
    FakeOpenAIServer,
    RecordedRequest,
    Reply,
)
from tests.memories.model_change import (
    NEW_DIMS,
    REFRESH_SECONDS,
    ServerVectors,
    assert_one_model,
    own_database,
    owner_engine_for,
    running_app,
    second_model,
)

pytestmark = pytest.mark.slow

BATCH = 2
PER_TENANT = 40
WORKTREE = Path(__file__).resolve().parents[2]


class SlowEmbeddings(FakeOpenAIServer):
    """Embeddings take a while, so the command is still filling when it is killed."""

    def respond(self, request: RecordedRequest) -> Reply:
        if request.path == EMBEDDINGS_PATH:
            time.sleep(0.03)
        return super().respond(request)


@pytest.fixture
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    with SlowEmbeddings(native_dims=NEW_DIMS) as server:
        yield server


def _command(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "service", "reembed", "run", "--batch-size", str(BATCH)],
        cwd=WORKTREE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _embedded(owner: AsyncEngine, model: str) -> int:
    async with owner.connect() as connection:
        return int(
            (
                await connection.execute(
                    text("SELECT count(*) FROM memory WHERE embedding_alt_model = :m"),
                    {"m": model},
                )
            ).scalar_one()
        )


async def _search_throughout(
    client: AsyncClient,
    tenants: dict[str, dict[str, str]],
    embedders: dict[str, Embedder],
    seen: dict[str, Counter[str]],
    stop: asyncio.Event,
) -> None:
    """Search every tenant again and again until `stop`, checking each answer."""
    query = "Which hobby does the user have?"
    while not stop.is_set():
        for tenant, headers in tenants.items():
            response = await client.post(
                "/v1/users/me/memories/search",
                headers=headers,
                json={"query": query, "limit": 5},
            )
            assert response.status_code == 200, response.text
            answered: dict[str, Any] = response.json()
            seen[tenant][await assert_one_model(answered, query, embedders)] += 1
        await asyncio.sleep(0.02)


async def test_a_killed_run_resumes_and_searches_answer_from_one_model_throughout(
    cluster: EmbeddedCluster, embeddings_server: FakeOpenAIServer
) -> None:
    settings = await own_database(cluster, embeddings_server.base_url)
    assert settings.database_url is not None and settings.migration_database_url is not None
    env = {
        **os.environ,
        "PYTHONPATH": str(WORKTREE),
        "MNEME_DATABASE_URL": settings.database_url.get_secret_value(),
        "MNEME_MIGRATION_DATABASE_URL": settings.migration_database_url.get_secret_value(),
        "MNEME_EMBEDDING_SECOND": json.dumps(second_model(embeddings_server.base_url)),
        "MNEME_EMBEDDING_COLUMNS_REFRESH_SECONDS": str(REFRESH_SECONDS),
        "MNEME_LOG_LEVEL": "warning",
    }
    async with running_app(settings) as (app, client), owner_engine_for(settings) as owner:
        columns: VectorColumns = app.state.mneme.vector_columns
        old = columns.configured
        new = ServerVectors(EMBEDDING_MODEL)
        embedders: dict[str, Embedder] = {old.model_name: old, new.model_name: new}
        tenants: dict[str, dict[str, str]] = {new_tenant(): {} for _ in range(3)}
        texts: list[str] = []
        for index, tenant in enumerate(tenants):
            tenants[tenant] = bearer(settings, tenant, "sam")
            own = [f"Sam's hobby number {n} of team {index} is climbing" for n in range(PER_TENANT)]
            texts += own
            await remember_all(client, tenants[tenant], *({"text": t} for t in own))
        await reembed.start(owner, old, new)
        await columns.refresh(app.state.mneme.engine)

        seen: dict[str, Counter[str]] = {tenant: Counter() for tenant in tenants}
        stop = asyncio.Event()
        searching = asyncio.create_task(_search_throughout(client, tenants, embedders, seen, stop))
        try:
            first = _command(env)
            while await _embedded(owner, new.model_name) < 10:
                assert first.poll() is None, first.communicate()
                await asyncio.sleep(0.02)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
            halfway = await _embedded(owner, new.model_name)
            assert 10 <= halfway < len(texts)
            assert (await reembed.status(owner)).tenants_switched == 0

            second = _command(env)
            out, err = await asyncio.to_thread(second.communicate, timeout=180)
            assert second.returncode == 0, err.decode()
            assert "3 of 3 read the new column" in out.decode()
            await columns.refresh(app.state.mneme.engine)
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await searching

    # Every memory carries the new model's vector of its own text, stored once.
    async with owner_engine_for(settings) as owner:
        async with owner.connect() as connection:
            rows = (
                await connection.execute(
                    text("SELECT text, embedding_alt::real[] AS v, embedding_alt_model FROM memory")
                )
            ).all()
        stored_by_job = Counter(
            each
            for request in embeddings_server.requests
            if request.path == EMBEDDINGS_PATH and len(request.body["input"]) <= BATCH
            for each in request.body["input"]
            if each in texts
        )
    assert sorted(row.text for row in rows) == sorted(texts)
    assert {row.embedding_alt_model for row in rows} == {new.model_name}
    for row in rows:
        expected = (await new.embed([row.text]))[0]
        norm = sum(v * v for v in expected) ** 0.5
        assert max(abs(a - b / norm) for a, b in zip(row.v, expected, strict=True)) < 1e-4
    # Each text was embedded once, but for the batch the kill interrupted (embedded, not stored).
    assert set(stored_by_job) == set(texts)
    assert sum(count - 1 for count in stored_by_job.values()) <= BATCH
    # Searches answered all along: from the old model before each tenant's switch, the new after.
    for tenant, models in seen.items():
        assert models[old.model_name] > 0 and models[new.model_name] > 0, (tenant, models)
