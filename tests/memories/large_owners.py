"""An owner large enough, under lowered thresholds, to get vector indexes of its own: the
constants, the memories and the helpers the tests of owner indexes share (their fixtures are in
this package's conftest)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.rawsql import explain_prepared
from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.fusion.parameters import FIRST_VECTOR_COLUMN, SearchParams
from service.memories.fusion.repository import GENERIC_SEARCH_PLAN_SQL, FusionRepository
from service.memories.fusion.statement import compiled_search
from service.memories.owner_index_names import OWNER_INDEX_PREFIX, owner_index_name
from service.memories.postings import PostingsRepository
from tests.conftest import bearer
from tests.fixtures.apps import running_app
from tests.fixtures.factories import remember_all, remember_texts
from tests.memories.test_bounded_search import corpus, owners_found

TABLE_GRAPHS_SQL = f"""
SELECT c.relname FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
 WHERE i.indrelid = 'memory'::regclass AND a.amname = 'hnsw'
   AND NOT starts_with(c.relname, '{OWNER_INDEX_PREFIX}')
"""
"""The memory table's HNSW indexes but its owners' own: none, the table keeps no graph of every
owner's vectors."""

BUILD_FROM = 40
QUESTION = "what does the user like to play"
# A user id with every punctuation an id may hold: it reaches the index's condition as data.
USER = "ada.l|ove+lace@example.org:1=2-x_y"


def low_thresholds_app(
    settings: Settings, *, refresh_seconds: float
) -> AbstractAsyncContextManager[FastAPI]:
    """The app searching an owner of `BUILD_FROM` memories through its postings, which may
    get indexes of its own, refreshed by the app as it starts and every `refresh_seconds` (0:
    never)."""
    return running_app(
        settings,
        search_bounded_from=BUILD_FROM,
        owner_vector_index_from=BUILD_FROM,
        owner_vector_index_refresh_seconds=refresh_seconds,
    )


async def count_statistics(app: FastAPI, tenant: str, *owners: Owner) -> None:
    """The owners' search statistics counted, as the background job counts them."""
    for owner in owners:
        async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
            await PostingsRepository(session, tenant).refresh_statistics(owner)


async def index_definitions(owner_engine: AsyncEngine) -> dict[str, str]:
    async with owner_engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = 'memory'::regclass AND i.indisvalid "
                "AND c.relname LIKE 'ix\\_memory\\_owner\\_%'"
            )
        )
        return dict(rows.all())


async def once_indexes(owner_engine: AsyncEngine, hold: Callable[[set[str]], bool]) -> set[str]:
    """The owner indexes' names once they `hold` what the caller waits for, a keeper's refresh
    having run in the background; as they are after two minutes otherwise (a concurrent build or
    drop waits for every transaction that may use the table, and on a busy machine other tests'
    transactions take seconds)."""
    for _ in range(1200):
        names = set(await index_definitions(owner_engine))
        if hold(names):
            return names
        await asyncio.sleep(0.1)
    return set(await index_definitions(owner_engine))


def episodes(seed: int, size: int) -> list[str]:
    """Episodes in the write path's style ("User shared: …")."""
    return [f"User shared: {text.removeprefix('User ')}" for text in corpus(seed, size)]


async def large_owner(
    app: FastAPI, client: AsyncClient, settings: Settings, tenant: str
) -> dict[str, str]:
    """`USER` with 60 facts, 50 episodes and 2 procedures, and an organization of 5 facts,
    their statistics counted; the user's headers."""
    headers = bearer(settings, tenant, USER)
    await remember_texts(client, headers, corpus(23, 60))
    await remember_texts(client, headers, episodes(24, 50), kind="episodic")
    await remember_texts(
        client,
        headers,
        [f"When the user asks about {word}, answer in one line" for word in ("tea", "piano")],
        kind="procedural",
    )
    admin = bearer(settings, tenant, "admin", admin=True)
    await remember_all(
        client,
        admin,
        *({"text": f"The office closes at {hour} on Fridays"} for hour in range(5)),
        org=True,
    )
    await count_statistics(app, tenant, Owner.user(USER), Owner.org())
    return headers


async def own_indexes_found(
    app: FastAPI, tenant: str, owners: Sequence[Owner] = (Owner.user(USER), Owner.org())
) -> frozenset[str]:
    """The vector indexes of their own that a search of `owners` (by default `USER`'s search
    over both scopes) finds before its statement (`kind:owner key`)."""
    return (await owners_found(app, tenant, owners, FIRST_VECTOR_COLUMN)).own_indexes


def kind_names(tenant: str, *kinds: str) -> list[str]:
    """The names of `USER`'s indexes of `kinds`."""
    return [owner_index_name(tenant, Owner.user(USER).key, "embedding", kind) for kind in kinds]


async def explained_as_served(
    app: FastAPI,
    tenant: str,
    params: SearchParams,
    written: frozenset[str] | None,
    *settings: str,
) -> Any:
    """EXPLAIN (ANALYZE, FORMAT JSON) of the search statement with the owners written in and
    `written` as their indexes of their own (None: no owner written in, the statement of any
    owner), on the generic plan the service makes once per connection for it, after the
    `settings` statements (`SET LOCAL …`)."""
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        driver = await transaction_driver(await session.connection())
        compiled, arguments = compiled_search(
            tenant,
            [params],
            (await session.connection()).dialect,
            written_owners={} if written is None else {0: written},
        )
        await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        for setting in settings:
            await driver.execute(setting)
        return await explain_prepared(driver, compiled.sql, arguments)


async def exact_answer(app: FastAPI, tenant: str, params: SearchParams) -> list[Any]:
    """The search's ids as the exact statement ranks them: no index order anywhere (every
    vector and every candidate scored and sorted)."""
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        await session.execute(text("SET LOCAL enable_indexscan = off"))
        return [row.memory.id for row in await FusionRepository(session, tenant).search(params)]
