"""The write path's read of what a new fact meets (`MemoryRepository.related_live`): each part
found by an index of its own, and planned for its owner on every run, never on the plan
PostgreSQL would make for any owner after a prepared statement's fifth run (which cannot read
the owner's own vector index)."""

from __future__ import annotations

import math

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.memories.repository import CategoryRelevance, MemoryRepository
from tests.conftest import bearer
from tests.fixtures.factories import remember, remember_all, remember_texts
from tests.plans import statements_sent, tenant_plan

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


async def test_each_part_of_what_a_new_fact_meets_is_found_by_its_index(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
) -> None:
    headers = bearer(settings, tenant, "alice")
    await remember(
        client,
        headers,
        kind="semantic",
        text="User's home base is Lisbon.",
        category="context",
        metadata={"subject": "Home City"},
    )
    # Facts of other subjects, and the table's statistics counted: the planner chooses an
    # index by what it expects its conditions to leave out.
    others = [
        {
            "kind": "semantic",
            "text": f"User has pet {n}.",
            "category": "context",
            "metadata": {"subject": f"pet_{n}"},
        }
        for n in range(40)
    ]
    await remember_all(client, headers, *others)
    async with owner_engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE memory"))
    with statements_sent(runtime_engine) as sent:
        async with tenant_transaction(create_sessionmaker(runtime_engine), tenant) as session:
            related = await MemoryRepository(session, tenant).related_live(
                Owner.user("alice"),
                "semantic",
                text_value="User lives in Porto.",
                vector=None,
                vector_column="embedding",
                category=CategoryRelevance("context", "home_city", 0.75),
                nearest=5,
            )
    assert [memory.text for memory, _ in related] == ["User's home base is Lisbon."]
    [reconciled] = [(s, p) for s, p in sent if "content_hash" in s]
    nodes = await tenant_plan(runtime_engine, tenant, reconciled, "SET LOCAL enable_seqscan = off")
    conditions = {
        node["Index Name"]: node.get("Index Cond", "") for node in nodes if "Index Name" in node
    }
    # The duplicate by the live memories' content, the subject among the category's facts
    # that name one.
    assert "content_hash" in conditions.get("ix_memory_content", ""), conditions
    assert "category" in conditions.get("ix_memory_subjects", ""), conditions
