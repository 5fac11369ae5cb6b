"""The search question is embedded while the request's transaction begins: only for a caller
the route accepts, once, and never for a lexical search."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from httpx import AsyncClient

from service.config import Settings
from service.memories.search import embedding_underway
from service.observability import DOMAIN_METRICS
from service.providers import EmbedderUnavailable
from service.providers.local_embedder import MODEL_NAME
from tests.conftest import bearer


def questions_embedded() -> float:
    count = DOMAIN_METRICS.registry.get_sample_value(
        "mneme_embedding_duration_seconds_count", {"purpose": "query", "model": MODEL_NAME}
    )
    return count or 0.0


async def test_a_search_embeds_its_question_once_and_finds_by_meaning(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "asker")
    created = await client.post(
        "/v1/users/me/memories",
        headers=headers,
        json={"text": "Mountain trekking is my favourite hobby"},
    )
    assert created.status_code == 201, created.text
    before = questions_embedded()
    response = await client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        # A question no other test asks: the query-vector cache cannot answer it.
        json={"query": f"I adore hiking {uuid.uuid4().hex[:6]}", "mode": "vector"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["query_embedded"] is True
    assert [hit["memory"]["id"] for hit in response.json()["hits"]] == [created.json()["id"]]
    assert questions_embedded() == before + 1


async def test_a_refused_caller_gets_nothing_embedded(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    before = questions_embedded()
    response = await client.post(
        "/v1/users/someone-else/memories/search",
        headers=bearer(settings, tenant, "intruder"),
        json={"query": "what does someone else remember?"},
    )
    assert response.status_code == 404
    invalid = await client.post(
        "/v1/users/me/memories/search",
        headers=bearer(settings, tenant, "asker"),
        json={"query": "", "limit": 0},
    )
    assert invalid.status_code == 422
    assert questions_embedded() == before


async def test_a_lexical_search_embeds_nothing(
    client: AsyncClient, settings: Settings, tenant: str
) -> None:
    before = questions_embedded()
    response = await client.post(
        "/v1/users/me/memories/search",
        headers=bearer(settings, tenant, "asker"),
        json={"query": "hiking", "mode": "lexical"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["query_embedded"] is False
    assert questions_embedded() == before


async def test_the_question_is_on_its_way_before_the_transaction_set_up_goes_on() -> None:
    steps: list[str] = []

    async def embed() -> list[float]:
        steps.append("handed to the model")
        await asyncio.sleep(0.01)
        steps.append("embedded")
        return [1.0]

    async with embedding_underway(asyncio.ensure_future(embed()), in_process=True) as pending:
        steps.append("transaction set-up")
        assert pending is not None
        assert await pending == [1.0]
    assert steps == ["handed to the model", "transaction set-up", "embedded"]


async def test_a_remote_models_question_is_embedded_before_the_transaction_set_up() -> None:
    steps: list[str] = []

    async def embed() -> list[float]:
        steps.append("handed to the model")
        await asyncio.sleep(0.01)
        steps.append("embedded")
        raise EmbedderUnavailable("its failure is the caller's to see")

    async with embedding_underway(asyncio.ensure_future(embed()), in_process=False) as pending:
        steps.append("transaction set-up")
        assert pending is not None
        with pytest.raises(EmbedderUnavailable):
            await pending
    assert steps == ["handed to the model", "embedded", "transaction set-up"]


async def test_a_vector_nobody_took_is_cancelled_when_the_request_fails() -> None:
    async def never_taken() -> list[float] | None:
        await asyncio.sleep(10)
        return [1.0]

    pending = asyncio.ensure_future(never_taken())
    with pytest.raises(RuntimeError, match="refused"):
        async with embedding_underway(pending, in_process=True):
            raise RuntimeError("refused")
    await asyncio.gather(pending, return_exceptions=True)
    assert pending.cancelled()
