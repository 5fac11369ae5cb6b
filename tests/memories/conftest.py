"""Fixtures the memory tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.memories.owner_indexes import OwnerIndexes
from tests.fixtures.apps import app_client
from tests.fixtures.openai_server import FakeOpenAIServer
from tests.memories.large_owners import low_thresholds_app
from tests.memories.model_change import NEW_DIMS


@pytest.fixture(scope="module")
def embeddings_server() -> Iterator[FakeOpenAIServer]:
    """An OpenAI-compatible embeddings server for the model a change of model moves to (a
    module may replace it, as the killed-process test does with a slow one)."""
    with FakeOpenAIServer(native_dims=NEW_DIMS) as server:
        yield server


@pytest.fixture
async def indexed_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app with low thresholds: an owner of `BUILD_FROM` memories is searched through its
    postings and may get an index of its own; no refresh loop (the tests refresh)."""
    async with low_thresholds_app(settings, refresh_seconds=0) as application:
        yield application


@pytest.fixture
async def indexed_client(indexed_app: FastAPI) -> AsyncIterator[AsyncClient]:
    async with app_client(indexed_app) as client:
        yield client


@pytest.fixture
async def keeping_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app with `indexed_app`'s thresholds and a keeper of the owners' indexes of its own,
    refreshing every ten minutes (unless asked to at once)."""
    async with low_thresholds_app(settings, refresh_seconds=600) as application:
        yield application


@pytest.fixture
async def keeping_client(keeping_app: FastAPI) -> AsyncIterator[AsyncClient]:
    async with app_client(keeping_app) as client:
        yield client


OWNER_INDEX_TESTS_LOCK = 0x4D4E454D
"""The advisory lock a test that builds owner indexes holds while it runs (`no_owner_indexes`)."""


@pytest.fixture
async def no_owner_indexes(owner_engine: AsyncEngine) -> AsyncIterator[None]:
    """The test alone among the test workers to build owner indexes in the shared database, and
    every owner index dropped afterwards (other tests' owners may have got one too).

    The drop takes every owner's index, so a test on another worker that built its owner's and
    is about to search through it must not run meanwhile: the tests that use this fixture take
    turns, by an advisory lock held on a connection of its own. That connection holds no
    transaction while the test runs: an index built concurrently waits for every transaction
    older than itself to end."""
    async with owner_engine.connect() as holder:
        holder = await holder.execution_options(isolation_level="AUTOCOMMIT")
        await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": OWNER_INDEX_TESTS_LOCK})
        try:
            yield
            await OwnerIndexes(owner_engine, build_from=0, most=0).refresh()
        finally:
            await holder.execute(
                text("SELECT pg_advisory_unlock(:key)"), {"key": OWNER_INDEX_TESTS_LOCK}
            )
