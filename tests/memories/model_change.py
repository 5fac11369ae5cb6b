"""Helpers for the tests of a change of embedding model: a database of its own (the vector
columns' state is global, and a change drops a column, so it cannot share the session's), the
second model (the fake OpenAI-compatible server's vectors, another dimension than MiniLM's),
and the check that a search compared its question with one model's vectors only."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from service import db_migrations
from service.config import Settings
from service.db import create_engine
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from service.main import create_app
from service.providers import Embedder
from tests.conftest import make_settings
from tests.fixtures.openai_server import API_KEY, EMBEDDING_MODEL, fake_vector

NEW_DIMS = 768
REFRESH_SECONDS = 0.2


def second_model(base_url: str) -> dict[str, Any]:
    """`embedding_second` for the fake server's model, at `NEW_DIMS` dimensions."""
    return {
        "provider": "openai",
        "openai_base_url": base_url,
        "openai_api_key": API_KEY,
        "openai_model": EMBEDDING_MODEL,
        "dims": NEW_DIMS,
        "openai_max_retries": 0,
    }


async def own_database(cluster: EmbeddedCluster, embeddings_url: str) -> Settings:
    """A freshly migrated database of its own, and settings for it that run the second model."""
    name = "mneme_change_" + uuid.uuid4().hex[:8]
    await bootstrap(cluster, name)
    settings = make_settings(
        cluster,
        database_url=SecretStr(cluster.url("mneme_app", name)),
        migration_database_url=SecretStr(cluster.url(OWNER_ROLE, name)),
        embedding_second=second_model(embeddings_url),
        embedding_columns_refresh_seconds=REFRESH_SECONDS,
    )
    engine = create_engine(settings.migration_url_for_tests, settings, pool_size=1, max_overflow=0)
    try:
        await db_migrations.upgrade(engine, settings)
    finally:
        await engine.dispose()
    return settings


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, AsyncClient]]:
    application = create_app(settings)
    async with LifespanManager(application):
        transport = ASGITransport(app=application)
        async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
            yield application, client


@asynccontextmanager
async def owner_engine_for(settings: Settings) -> AsyncIterator[AsyncEngine]:
    assert settings.migration_database_url is not None
    engine = create_engine(
        settings.migration_database_url.get_secret_value(), settings, pool_size=2
    )
    try:
        yield engine
    finally:
        await engine.dispose()


class ServerVectors:
    """The fake server's vectors computed here, without a request (so the server's record holds
    only what the service and the command asked it)."""

    def __init__(self, model_name: str, dims: int = NEW_DIMS) -> None:
        self.model_name = model_name
        self.dims = dims

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [fake_vector(text, self.dims) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return fake_vector(text, self.dims)

    async def aclose(self) -> None:
        """Nothing to release."""


async def search_memories(
    client: AsyncClient, headers: dict[str, str], query: str, limit: int
) -> dict[str, Any]:
    """The caller's search for `query` (API defaults otherwise), answered 200."""
    response = await client.post(
        "/v1/users/me/memories/search", headers=headers, json={"query": query, "limit": limit}
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _cosine(left: list[float], right: list[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    return dot / (math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right)))


async def assert_cosines_of(items: list[dict[str, Any]], query: str, embedder: Embedder) -> None:
    """Every item found by vector carries the cosine `embedder`'s vectors give."""
    by_vector = [item for item in items if (item.get("scores") or {}).get("vector_cosine")]
    assert by_vector, items
    question = await embedder.embed_query(query)
    stored = await embedder.embed([item["text"] for item in by_vector])
    for item, vector in zip(by_vector, stored, strict=True):
        cosine = item["scores"]["vector_cosine"]
        assert math.isclose(cosine, _cosine(question, vector), abs_tol=1e-3)


async def assert_one_model(
    response: dict[str, Any], query: str, embedders: dict[str, Embedder]
) -> str:
    """The model whose vectors the search compared its question with; fails unless every hit
    found by vector names that one model and carries the cosine that model gives."""
    by_vector = [hit for hit in response["hits"] if hit["scores"]["vector_cosine"] is not None]
    assert by_vector, response
    models = {hit["memory"]["embedding_model"] for hit in by_vector}
    assert len(models) == 1, models
    (model,) = models
    embedder = embedders[model]
    question = await embedder.embed_query(query)
    stored = await embedder.embed([hit["memory"]["text"] for hit in by_vector])
    for hit, vector in zip(by_vector, stored, strict=True):
        assert math.isclose(hit["scores"]["vector_cosine"], _cosine(question, vector), abs_tol=1e-3)
    return str(model)
