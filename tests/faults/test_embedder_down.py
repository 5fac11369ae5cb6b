"""The embedding service is down: writes are still acknowledged and kept, search and context
still answer (lexically), and every memory is embedded once the service is back.

(The chat model's outages are covered where its features live: a synchronous summary is a 503
`LLM_UNAVAILABLE` that keeps every message, tests/threads/test_summary_api.py; extraction waits
and then reads every turn it missed, tests/extraction/test_extraction_api.py and
test_pipeline.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient

from service.config import Settings
from service.embedded_postgres import EmbeddedCluster
from service.main import create_app
from tests.conftest import bearer, database_of_its_own
from tests.fixtures.openai_server import API_KEY, FakeOpenAIServer


@pytest.fixture(scope="module")
def embeddings() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
async def remote_embedder_app(
    cluster: EmbeddedCluster, settings: Settings, embeddings: FakeOpenAIServer
) -> AsyncIterator[FastAPI]:
    application = create_app(
        await database_of_its_own(
            cluster,
            migrate_on_start=False,
            embedding_provider="openai",
            embedding_openai_base_url=embeddings.base_url,
            embedding_openai_api_key=API_KEY,
            embedding_openai_send_dimensions=True,
            embedding_openai_max_retries=0,
            embedding_openai_timeout_seconds=2,
        )
    )
    async with LifespanManager(application):
        yield application


async def test_writes_while_the_embedder_is_down_are_kept_and_embedded_when_it_returns(
    remote_embedder_app: FastAPI, embeddings: FakeOpenAIServer, settings: Settings, tenant: str
) -> None:
    state = remote_embedder_app.state.mneme
    state.embedding_backfill.retry_delays = (0.3, 0.6, 1.2, 2.4)
    headers = bearer(settings, tenant, "ada")
    transport = ASGITransport(app=remote_embedder_app)
    async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
        embeddings.mode = "fail"
        try:
            written = []
            for text in ("Keeps bees on the roof", "Cycles to work", "Allergic to walnuts"):
                response = await client.post(
                    "/v1/users/me/memories", json={"text": text}, headers=headers
                )
                assert response.status_code == 201, response.text
                assert response.json()["embedding_model"] is None
                written.append(response.json()["id"])
            search = await client.post(
                "/v1/users/me/memories/search", json={"query": "bees"}, headers=headers
            )
            assert search.status_code == 200
            assert search.json()["query_embedded"] is False
            assert search.json()["hits"][0]["memory"]["id"] == written[0]
            context = await client.post(
                "/v1/users/me/context", json={"query": "walnuts"}, headers=headers
            )
            assert context.status_code == 200 and "walnuts" in context.json()["text"]
        finally:
            embeddings.mode = "summarize"
        await state.background.drain()
        for memory_id in written:
            got = await client.get(f"/v1/users/me/memories/{memory_id}", headers=headers)
            assert got.status_code == 200
            assert got.json()["embedding_model"] is not None
