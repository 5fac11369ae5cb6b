"""The race: a user is purged while an extraction pass for one of its threads is under way. A
pass that read the turns and waits for the model must not bring anything of the user back, and
a pass that is writing holds the user's write lock (as every write to the user's data does),
which the purge waits for."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.accounts.repository import AccountRepository
from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.extraction.pipeline import WritePath
from service.kit.post_commit import BackgroundRunner
from service.memories.embedding import EmbeddingBackfill
from service.memories.repository import MemoryRepository
from service.memories.vector_columns import VectorColumns
from service.providers import build_embedder, embedder_config_from_settings
from service.providers.llm import OpenAIChatModel
from tests.admin.conftest import rows_by_thread, rows_of, seed_user
from tests.conftest import bearer
from tests.extraction.conftest import extraction_requests, fact, fresh_llm, llm, say
from tests.fixtures.factories import start_thread
from tests.fixtures.openai_server import API_KEY, MODEL, FakeOpenAIServer, extraction

__all__ = ["fresh_llm", "llm"]  # fixtures shared with the write-path tests

WAITING_ADVISORY_LOCKS_SQL = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


@pytest.fixture
async def write_path(
    app: FastAPI,
    settings: Settings,
    runtime_engine: AsyncEngine,
    fresh_llm: FakeOpenAIServer,
) -> AsyncIterator[WritePath]:
    chat_model = OpenAIChatModel(
        model=MODEL, base_url=fresh_llm.base_url, api_key=API_KEY, timeout_seconds=10, max_retries=0
    )
    background = BackgroundRunner()
    sessionmaker = create_sessionmaker(runtime_engine)
    embedder = build_embedder(embedder_config_from_settings(settings))
    # The app's state, with the pass's own model, database pool and background runner.
    yield WritePath(
        replace(
            app.state.mneme,
            settings=settings.model_copy(update={"extraction_strategy": "every_turn"}),
            sessionmaker=sessionmaker,
            embedding_backfill=EmbeddingBackfill(VectorColumns(embedder), sessionmaker),
            background=background,
            chat_model=chat_model,
        )
    )
    await background.drain()
    await chat_model.aclose()


async def test_a_pass_waiting_for_the_model_during_a_purge_writes_nothing_back(
    client: AsyncClient,
    write_path: WritePath,
    fresh_llm: FakeOpenAIServer,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = bearer(settings, tenant, "ada")
    thread_id = await start_thread(client, headers)
    await say(client, headers, thread_id, "I ride my bike to work every day.")
    fresh_llm.reply = lambda request: extraction(
        [fact("Ada cycles to work daily.")], episode="Ada talked about cycling."
    )
    fresh_llm.hold_back()
    running = asyncio.create_task(
        write_path.extract(tenant, uuid.UUID(thread_id), org_writes=False)
    )
    for _ in range(250):
        if extraction_requests(fresh_llm):
            break
        await asyncio.sleep(0.02)
    assert extraction_requests(fresh_llm), "the pass never asked the model"

    admin = bearer(settings, tenant, "root", admin=True)
    purged = await client.delete("/v1/admin/users/ada", headers=admin)
    assert purged.status_code == 200, purged.text
    fresh_llm.release()
    outcomes = await running

    assert [o.status for o in outcomes] == ["superseded"]
    assert set((await rows_of(owner_engine, tenant, "ada")).values()) == {0}
    assert set((await rows_by_thread(owner_engine, tenant, [thread_id])).values()) == {0}


async def test_a_purge_waits_for_a_write_holding_the_users_write_lock(
    client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    await seed_user(client, settings, owner_engine, tenant, "ada")
    sessionmaker = create_sessionmaker(runtime_engine)
    admin = bearer(settings, tenant, "root", admin=True)
    async with tenant_transaction(sessionmaker, tenant) as session:
        # What a write-path pass holds while it writes the user's memories (and any other
        # write to the user's data, the first of those locks).
        await AccountRepository(session, tenant).hold_user_writes("ada")
        await MemoryRepository(session, tenant).lock_writers(Owner.user("ada"))
        purge = asyncio.create_task(client.delete("/v1/admin/users/ada", headers=admin))
        waiting = 0
        for _ in range(250):
            async with owner_engine.connect() as connection:
                waiting = (await connection.execute(text(WAITING_ADVISORY_LOCKS_SQL))).scalar_one()
            if waiting:
                break
            await asyncio.sleep(0.02)
        assert waiting == 1
        assert not purge.done()
    response = await purge
    assert response.status_code == 200 and response.json()["verified"] is True
