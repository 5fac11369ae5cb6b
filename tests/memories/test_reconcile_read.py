"""The write path's read of what a new fact meets (`MemoryRepository.related_live`): planned
for its owner on every run, never on the plan PostgreSQL would make for any owner after a
prepared statement's fifth run (which cannot read the owner's own vector index)."""

from __future__ import annotations

import math

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction
from service.memories.repository import CategoryRelevance, MemoryRepository
from tests.conftest import bearer
from tests.fixtures.factories import remember_texts

RUNS = 8
"""More runs of one prepared statement than PostgreSQL plans for their values by default (5)."""


async def test_the_read_of_what_a_new_fact_meets_is_planned_for_its_values_every_run(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> None:
    headers = bearer(settings, tenant, "alice")
    texts = [f"User keeps note {n} about the garden" for n in range(20)]
    await remember_texts(client, headers, texts, kind="semantic", category="context")
    vector = [1 / math.sqrt(384)] * 384
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        repository = MemoryRepository(session, tenant)
        for run in range(RUNS):
            related = await repository.related_live(
                Owner.user("alice"),
                "semantic",
                text_value=texts[run],
                vector=vector,
                vector_column="embedding",
                category=CategoryRelevance("context", "garden", 0.75),
                nearest=5,
            )
            assert texts[run] in {memory.text for memory, _ in related}
        plans = (
            await session.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE '%content_hash%' AND statement LIKE '%<=>%' "
                    "AND statement NOT LIKE '%pg_prepared_statements%'"
                )
            )
        ).all()
    assert [generic for generic, _ in plans] == [0]
    assert [custom for _, custom in plans] == [RUNS]
