"""A search of an owner with vector indexes of its own runs a statement with the owner written
in: a text per large owner. A pooled connection keeps those apart from its statement cache and
from the texts every owner shares, at most `MNEME_DB_OWNER_STATEMENT_CACHE_SIZE` of them (least
recently used first out, none unused for five minutes), each closed on the server as it leaves:
however many large owners a connection serves, it holds a bounded number of their plans, and
they never push out the statements every other search shares."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from service import db
from service.auth.owner import Owner
from service.config import Settings
from service.db import create_engine, create_sessionmaker, tenant_transaction, transaction_driver
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository, SearchParams
from service.memories.fusion.statement import owner_literal
from service.memories.owner_index_names import owner_index_name
from service.memories.owner_indexes import OwnerIndexes
from tests.conftest import bearer
from tests.fixtures.factories import remember_texts
from tests.memories.large_owners import BUILD_FROM, QUESTION, count_statistics
from tests.memories.test_bounded_search import corpus
from tests.search_params import search_params

LARGE_OWNERS = ("ada", "grace", "edsger")
SMALL_OWNER = "barbara"
HELD_SQL = "SELECT name, statement, generic_plans FROM pg_prepared_statements"
"""The statements the session holds prepared on the server (this one among them once run)."""


async def write_owners(
    app: FastAPI, client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> list[float]:
    """`LARGE_OWNERS`, each with `BUILD_FROM` facts, counted and given an index of its own, and
    `SMALL_OWNER` with three facts; the question's vector."""
    for seed, user in enumerate((*LARGE_OWNERS, SMALL_OWNER)):
        size = 3 if user == SMALL_OWNER else BUILD_FROM
        await remember_texts(client, bearer(settings, tenant, user), corpus(seed, size))
    await count_statistics(app, tenant, *(Owner.user(user) for user in LARGE_OWNERS))
    report = await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    built = {index.name for index in (*report.built, *report.kept)}
    for user in LARGE_OWNERS:
        assert owner_index_name(tenant, Owner.user(user).key, "embedding", "semantic") in built
    vector: list[float] = await app.state.mneme.embedding_backfill.embedder.embed_query(QUESTION)
    return vector


def params_of(user: str, vector: list[float]) -> SearchParams:
    """A hybrid search of `user`'s memories, bounded from as few as the indexed app's."""
    return search_params(
        MemoryFilter.build([Owner.user(user)]),
        QUESTION,
        query_embedding=vector,
        use_vector=True,
        bounded_from=BUILD_FROM,
    )


def written_for(held: list[Any], user: str) -> list[Any]:
    """The held statements that are a search with `user` written in."""
    return [row for row in held if f"m.user_id IN ({owner_literal(user)})" in row["statement"]]


async def held(session: AsyncSession) -> list[Any]:
    driver: Any = await transaction_driver(await session.connection())
    return list(await driver.fetch(HELD_SQL))


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_connection_keeps_large_owners_statements_apart_and_at_most_as_configured(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    vector = await write_owners(indexed_app, indexed_client, settings, owner_engine, tenant)
    assert settings.database_url is not None
    # Room for two owners' statements, and for one shared search text (the small owner's), each
    # on its own shelf; two in the driver's cache: the question asked before every search, and
    # `HELD_SQL`.
    configured = settings.model_copy(
        update={
            "db_owner_statement_cache_size": 2,
            "db_search_statement_cache_size": 1,
            "db_statement_cache_size": 2,
        }
    )
    engine = create_engine(
        settings.database_url.get_secret_value(), configured, pool_size=1, max_overflow=0
    )
    try:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            repository = FusionRepository(session, tenant)
            small = [row.id for row in await repository.search(params_of(SMALL_OWNER, vector))]
            first = {}
            for user in LARGE_OWNERS:
                first[user] = [row.id for row in await repository.search(params_of(user, vector))]
                assert first[user], user
            after_three = await held(session)
            # The most recent owner again: its statement is reused, not prepared again.
            again = [row.id for row in await repository.search(params_of("edsger", vector))]
            after_again = await held(session)
            # The owner that left: prepared again, with the same answer.
            returned = [row.id for row in await repository.search(params_of("ada", vector))]
            after_return = await held(session)
            small_again = [
                row.id for row in await repository.search(params_of(SMALL_OWNER, vector))
            ]
            after_small = await held(session)
    finally:
        await engine.dispose()

    # Each large owner's search ran with the owner written in; with room for two, the first
    # owner's statement was closed on the server when the third owner's was prepared.
    assert not written_for(after_three, "ada")
    assert len(written_for(after_three, "grace")) == 1
    [edsger] = written_for(after_three, "edsger")
    [edsger_again] = written_for(after_again, "edsger")
    assert edsger_again["name"] == edsger["name"]
    assert edsger_again["generic_plans"] == edsger["generic_plans"] + 1
    assert again == first["edsger"]
    # Ada's statement is prepared again (in place of the least recently used, grace's), and
    # ranks as before.
    assert returned == first["ada"]
    assert [row["name"] for row in written_for(after_return, "ada")]
    assert not written_for(after_return, "grace") and written_for(after_return, "edsger")
    # The three large owners' texts did not push the small owner's statement off its shelf of
    # one: it is the one prepared first, still held and reused.
    shared = [
        row
        for row in after_small
        if "query_terms" in row["statement"]
        and not any(written_for([row], user) for user in LARGE_OWNERS)
    ]
    assert len(shared) == 1 and shared[0]["generic_plans"] >= 2
    assert small_again == small
    assert sum(bool(written_for(after_small, user)) for user in LARGE_OWNERS) == 2


@pytest.mark.usefixtures("no_owner_indexes")
async def test_an_owners_statement_unused_for_a_while_is_not_kept(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vector = await write_owners(indexed_app, indexed_client, settings, owner_engine, tenant)
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), settings, pool_size=1)
    try:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            repository = FusionRepository(session, tenant)
            await repository.search(params_of("ada", vector))
            # Any statement kept apart is now older than the idle limit.
            monkeypatch.setattr(db, "KEPT_APART_IDLE_SECONDS", -1.0)
            await repository.search(params_of("grace", vector))
            after = await held(session)
    finally:
        await engine.dispose()
    assert settings.db_owner_statement_cache_size >= 2
    assert not written_for(after, "ada") and written_for(after, "grace")
