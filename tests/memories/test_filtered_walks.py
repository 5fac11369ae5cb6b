"""A search filtered to part of a kind (a category, a time window, a lifecycle) of an owner with
vector indexes of its own: when few of the owner's memories pass the filter they are sorted
exactly, found by their keys in one B-tree, and its graph is not walked; when many pass, the
graph is walked and the filter tested on what the walk finds. Either way the answer is the exact
statement's, and the filter's conditions are index conditions under row-level security."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from service.memories.fusion.parameters import SearchParams
from service.memories.fusion.sql import FILTERED_WALK_SQL
from service.memories.owner_indexes import OwnerIndexes
from tests.fixtures.factories import remember_texts
from tests.memories.large_owners import (
    BUILD_FROM,
    QUESTION,
    USER,
    count_statistics,
    exact_answer,
    explained_as_served,
    kind_names,
    large_owner,
)
from tests.plans import plan_nodes
from tests.search_params import filter_with_every_condition, search_params

POOL = 10
"""A pool small enough that the owner's 66 facts are many: few is sqrt(pool * memories)."""

TRAVEL = [
    "User flew to Lisbon for a conference in May",
    "User is planning a rail trip through the Alps",
    "User prefers window seats on long flights",
]


async def executed_plan(
    app: FastAPI, tenant: str, params: SearchParams, *settings: str
) -> list[dict[str, Any]]:
    """Every node of the statement's plan as the service runs it for `USER` with the facts'
    and episodes' indexes of their own, after the `settings` statements, explained with
    ANALYZE: a node of a branch that did not run has no loops."""
    key = Owner.user(USER).key
    written = frozenset({f"semantic:{key}", f"episodic:{key}"})
    document = await explained_as_served(app, tenant, params, written, *settings)
    [plan] = json.loads(document) if isinstance(document, str) else document
    return plan_nodes(plan["Plan"])


def loops_of(nodes: list[dict[str, Any]], index: str) -> list[int]:
    return [node["Actual Loops"] for node in nodes if node.get("Index Name") == index]


def counted(nodes: list[dict[str, Any]]) -> bool:
    """Whether the statement counted what passes its filtered walks' filters (a scan of the
    memory table under `few_passing` ran)."""
    [counts] = [node for node in nodes if node.get("Subplan Name") == "CTE few_passing"]
    return any(
        node.get("Relation Name") == "memory" and node["Actual Loops"] > 0
        for node in plan_nodes(counts)
    )


async def answers(app: FastAPI, tenant: str, params: SearchParams) -> tuple[list[Any], list[Any]]:
    """The search's ids as the service ranks them, and as the exact statement does (no index
    order anywhere)."""
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        served = [row.memory.id for row in await FusionRepository(session, tenant).search(params)]
    return served, await exact_answer(app, tenant, params)


@pytest.mark.usefixtures("no_owner_indexes")
async def test_few_passing_a_filter_are_sorted_exactly_and_many_are_walked(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    await remember_texts(indexed_client, headers, TRAVEL, category="travel")
    await count_statistics(indexed_app, tenant, Owner.user(USER), Owner.org())
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    facts_index, episodes_index = kind_names(tenant, "semantic", "episodic")
    vector = await indexed_app.state.mneme.embedding_backfill.embedder.embed_query(QUESTION)

    def searched(**conditions: Any) -> SearchParams:
        return search_params(
            MemoryFilter.build([Owner.user(USER), Owner.org()], **conditions),
            QUESTION,
            query_embedding=vector,
            use_vector=True,
            pool=POOL,
            bounded_from=BUILD_FROM,
        )

    # Three facts of a category among the owner's 113 memories: sorted exactly; neither graph
    # is walked (the episodes hold none: found so by the count, not by a walk of all 50).
    few = searched(categories=["travel"])
    nodes = await executed_plan(indexed_app, tenant, few)
    assert loops_of(nodes, facts_index) in ([0], [])
    assert loops_of(nodes, episodes_index) in ([0], [])
    assert counted(nodes)
    # A lexical search runs no vector scan, so it counts nothing.
    lexical = replace(few, use_vector=False)
    assert not counted(await executed_plan(indexed_app, tenant, lexical))
    served, exact = await answers(indexed_app, tenant, few)
    assert served == exact and len(served) == len(TRAVEL)

    # Every memory recorded since 1970 passes: more than few, so the walks run. Which scan
    # serves a walk is the planner's choice: once statistics count this toy owner's 66 facts
    # (an analysis by autovacuum, at any moment), sorting them costs less than walking their
    # graph, and it sorts. Sorts are disabled here so that a walk that runs is seen as a scan
    # of its index; the exact sorts of the few branch cannot use an index, so they keep sorting
    # and do not read the graphs.
    many = searched(event_after=datetime(1970, 1, 1, tzinfo=UTC))
    nodes = await executed_plan(indexed_app, tenant, many, "SET LOCAL enable_sort = off")
    assert loops_of(nodes, facts_index) == [1]
    assert loops_of(nodes, episodes_index) == [1]
    served, exact = await answers(indexed_app, tenant, many)
    assert served == exact and len(served) == 10

    # A lifecycle none of the owner's memories has: nothing to sort, nothing walked.
    none = searched(lifecycles=["superseded"])
    nodes = await executed_plan(indexed_app, tenant, none)
    assert loops_of(nodes, facts_index) in ([0], [])
    served, exact = await answers(indexed_app, tenant, none)
    assert served == exact == []


async def test_a_filter_of_confirmed_memories_or_of_kinds_walks_as_before() -> None:
    owners = [Owner.user(USER)]
    # What a context asks (confirmed memories of a kind) passes most of an owner's memories.
    for unfiltered in (
        MemoryFilter.build(owners),
        MemoryFilter.build(owners, kinds=["semantic"], lifecycles=["confirmed"]),
        MemoryFilter.build(owners, lifecycles=["proposed", "confirmed"]),
    ):
        assert not unfiltered.passes_part_of_a_kind
    for filtered in (
        MemoryFilter.build(owners, categories=["travel"]),
        MemoryFilter.build(owners, lifecycles=["proposed"]),
        MemoryFilter.build(owners, event_before=datetime(2024, 1, 1, tzinfo=UTC)),
        MemoryFilter.build(owners, created_after=datetime(2024, 1, 1, tzinfo=UTC)),
    ):
        assert filtered.passes_part_of_a_kind
        assert not filtered.of_kinds_only().passes_part_of_a_kind
        assert filtered.of_kinds_only().owners == filtered.owners


def test_a_filtered_walk_returns_every_column_a_filter_tests() -> None:
    """The walk's outer query tests the section's whole filter on what the inner one returns:
    a condition on a column the inner query does not return would be an error there."""
    every_condition = filter_with_every_condition([Owner.user(USER), Owner.org()])
    tested = set(re.findall(r"\bm\.(\w+)", every_condition.where("t-1").sql))
    inner = FILTERED_WALK_SQL.split("FROM memory m")[0]
    returned = set(re.findall(r"\bm\.(\w+)", inner))
    assert tested <= returned, tested - returned
