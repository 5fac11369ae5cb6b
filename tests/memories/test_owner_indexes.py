"""The largest owners get HNSW indexes of their own, one per kind of memory: built for each
kind an owner holds past the threshold, used by its searches over every kind and over one
(which rank as the exact statement does), kept down to half the threshold, dropped when the kind
shrinks, is outgrown or its owner is purged; an index over all of an owner's kinds (as earlier
versions built them) is read until its kinds' are built, then retired; built only by the
table's owner."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import replace
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.rawsql import (
    FusionStatement,
    RecordingDriver,
    asyncpg_connection,
    service_search_params,
)
from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    GENERIC_SEARCH_PLAN_SQL,
    FusionRepository,
    PlannedSearch,
)
from service.memories.fusion.parameters import SearchParams
from service.memories.fusion.statement import owner_literal
from service.memories.index_builds import create_index_concurrently, drop_index_concurrently
from service.memories.owner_index_names import OWNER_INDEX_PREFIX, owner_index_name
from service.memories.owner_indexes import (
    REFRESH_LOCK,
    OwnerIndexes,
    OwnerIndexesRefused,
    indexed_columns,
    keep_owner_indexes,
)
from service.memories.schemas import SearchRequest
from tests.conftest import bearer
from tests.memories.large_owners import (
    BUILD_FROM,
    QUESTION,
    USER,
    exact_answer,
    explained_as_served,
    index_definitions,
    kind_names,
    large_owner,
    low_thresholds_app,
    once_indexes,
    own_indexes_found,
)
from tests.memories.test_bounded_search import search_ids
from tests.search_params import search_params


async def planned_json(
    app: FastAPI, tenant: str, params: SearchParams, written: frozenset[str]
) -> str:
    """The plan of the search statement with the user's owners written in and `written` as
    the indexes of their own, as the service plans it once per connection. Sorting is priced
    out to show which indexes the plan can read: for owners of a few dozen memories that the
    table's statistics know about (whether they do depends on the tests that ran before),
    sorting their vectors is rightly the cheaper plan."""
    document = await explained_as_served(
        app, tenant, params, written, "SET LOCAL enable_sort = off"
    )
    return json.dumps(document)


async def ranked_alike_with_and_without_indexes(
    app: FastAPI, tenant: str, params: SearchParams
) -> list[str]:
    """The search's top 10 ids through the repository, four times (each finds the owner's
    indexes before its statement and reads them on the plan made once per connection:
    checked), each equal to the exact statement's; returned."""
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        repository = FusionRepository(session, tenant)
        answers = [[row.memory.id for row in await repository.search(params)] for _ in range(4)]
        driver: Any = await transaction_driver(await session.connection())
        # The text with the owners written in (the search's kinds: the facts' scan or not).
        plans = await driver.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE strpos(statement, $1) > 0 AND (strpos(statement, $2) > 0) = $3",
            f"m.user_id IN ({owner_literal(USER)})",
            "AND m.kind = E'semantic'",
            params.filter.kinds is None,
        )
    assert plans is not None and plans["generic_plans"] == 4 and plans["custom_plans"] == 0
    exact = await exact_answer(app, tenant, params)
    assert answers == [exact] * 4
    return exact


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_large_owner_gets_an_index_per_kind_and_its_searches_read_them(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    facts_index, episodes_index, procedures_index = kind_names(
        tenant, "semantic", "episodic", "procedural"
    )
    org_names = [
        owner_index_name(tenant, Owner.org().key, "embedding", kind) for kind in ("", "semantic")
    ]

    report = await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()

    assert {facts_index, episodes_index} <= {index.name for index in report.built}
    definitions = await index_definitions(owner_engine)
    # The user's 2 procedures and the organization's 5 facts are too few for one.
    assert procedures_index not in definitions and not set(org_names) & set(definitions)
    for name, kind in ((facts_index, "semantic"), (episodes_index, "episodic")):
        assert "USING hnsw (embedding vector_cosine_ops)" in definitions[name]
        # The owner's graph is built with a wider candidate list than the whole table's.
        assert "WITH (m='16', ef_construction='100')" in definitions[name]
        # The owner's condition, its id quoted as data, and the kind.
        assert f"(tenant_id = '{tenant}'::text)" in definitions[name]
        assert f"(user_id = '{USER}'::text)" in definitions[name]
        assert f"(kind = '{kind}'::text)" in definitions[name]
    # A second refresh finds nothing to do.
    again = await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    assert not again.built and not again.dropped
    assert {facts_index, episodes_index} <= {index.name for index in again.kept}

    # The search statement of the user (with the organization) reads each kind's index on the
    # plan the service makes once for it: the owners and the kinds are written into its text,
    # so the planner can prove each index's condition. A search over every kind reads both;
    # a context's episodes read their own only.
    key = Owner.user(USER).key
    written = frozenset({f"semantic:{key}", f"episodic:{key}"})
    embedder = indexed_app.state.mneme.embedding_backfill.embedder
    vector = await embedder.embed_query(QUESTION)
    every_kind, episodic = (
        search_params(
            MemoryFilter.build([Owner.user(USER), Owner.org()], kinds=kinds),
            QUESTION,
            query_embedding=vector,
            use_vector=True,
            bounded_from=BUILD_FROM,
        )
        for kinds in (None, ["episodic"])
    )
    plan = await planned_json(indexed_app, tenant, every_kind, written)
    assert f'"Index Name": "{facts_index}"' in plan
    assert f'"Index Name": "{episodes_index}"' in plan
    # The organization, written in beside the user but with no index of its own, is sorted
    # exactly even with sorting priced out: no other graph is read.
    graphs_read = set(re.findall(rf'"Index Name": "({OWNER_INDEX_PREFIX}[^"]*)"', plan))
    assert graphs_read == {facts_index, episodes_index}
    plan = await planned_json(indexed_app, tenant, episodic, written)
    assert f'"Index Name": "{episodes_index}"' in plan
    assert facts_index not in plan

    # Each search finds which indexes the owner has before its statement, and runs the
    # statement with the owners written in, on a plan made once per connection (no planning
    # per search), ranking exactly as the exact statement does. The procedures have no index
    # of their own: the search over every kind sorts them exactly.
    assert await own_indexes_found(indexed_app, tenant) == written
    await ranked_alike_with_and_without_indexes(indexed_app, tenant, every_kind)
    await ranked_alike_with_and_without_indexes(indexed_app, tenant, episodic)

    # Through the API: the first search reads the owner's indexes as the next one does.
    answers = []
    for _ in range(2):
        response = await indexed_client.post(
            f"/v1/users/{USER}/memories/search",
            headers=headers,
            json={"query": QUESTION, "limit": 10, "mode": "hybrid"},
        )
        assert response.status_code == 200, response.text
        answers.append([hit["memory"]["id"] for hit in response.json()["hits"]])
    assert answers[0] == answers[1]


@pytest.mark.usefixtures("no_owner_indexes")
async def test_the_benchmarks_bare_statement_is_the_one_the_service_sends_for_the_owner(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    served = indexed_app.state.mneme.settings
    vector = await indexed_app.state.mneme.embedding_backfill.embedder.embed_query(QUESTION)
    request = SearchRequest(query=QUESTION, limit=10, mode="hybrid")
    params = await service_search_params(served, tenant, USER, request, list(vector))
    assert params.use_vector

    learnt = FusionStatement(runtime_engine.dialect)
    built = FusionStatement(runtime_engine.dialect)
    async with runtime_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        arguments = await learnt.learn(driver, tenant, params)
        # Learning again gives the same text and values: one owner, one statement.
        assert await learnt.learn(driver, tenant, params) == arguments
        ids = await learnt.ids(driver, tenant, arguments)
    built.arguments(tenant, params)

    # The service's statement reads the owner's own vector indexes: the owner is written into
    # its text. The one built from the parameters alone is the statement of any owner.
    assert f"m.user_id IN ({owner_literal(USER)})" in learnt.sql
    assert owner_literal(USER) not in built.sql
    # It ranks what the API returns for the same question.
    response = await indexed_client.post(
        f"/v1/users/{USER}/memories/search",
        headers=headers,
        json={"query": QUESTION, "limit": 10, "mode": "hybrid"},
    )
    assert response.status_code == 200, response.text
    assert [str(memory_id) for memory_id in ids] == [
        hit["memory"]["id"] for hit in response.json()["hits"]
    ]


@pytest.mark.usefixtures("no_owner_indexes")
async def test_indexes_looked_up_before_the_statement_rank_as_those_it_reads_itself(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """The statement reads no catalog table (where the server distributes queries, a catalog
    read would keep it from going to the tenant's shard whole): the owners' own indexes are
    looked up before it, in one query with their counts, or (distributed) in a query of the
    catalog apart. Run both ways on one server (the second planned for each search, as such a
    server plans it), each section gets its own owners' indexes, and the two rank alike."""
    await large_owner(indexed_app, indexed_client, settings, tenant)
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    key = Owner.user(USER).key
    vector = await indexed_app.state.mneme.embedding_backfill.embedder.embed_query(QUESTION)
    user_alone, org_alone = (
        search_params(
            MemoryFilter.build([owner]),
            QUESTION,
            query_embedding=vector,
            use_vector=True,
            bounded_from=5,
        )
        for owner in (Owner.user(USER), Owner.org())
    )
    answers: dict[bool, list[list[Any]]] = {}
    for distributed in (False, True):
        async with tenant_transaction(indexed_app.state.mneme.sessionmaker, tenant) as session:
            connection = await session.connection()
            driver = await transaction_driver(connection)
            recording = RecordingDriver(driver)
            searches = PlannedSearch(
                recording,
                tenant,
                connection.dialect,
                generic_plan=not distributed,
                statistics=None,
            )
            sections = await searches.search_sections([user_alone, org_alone])
            found = await searches.owners_found(
                [Owner.user(USER), Owner.org()], user_alone.vector_column
            )
        answers[distributed] = [[row.id for row in section] for section in sections]
        assert recording.statement is not None
        assert "pg_class" not in recording.statement[0]
        assert found.own_indexes_of(user_alone) == {f"semantic:{key}", f"episodic:{key}"}
        assert found.own_indexes_of(org_alone) == frozenset()
        assert found.reads_own_indexes(user_alone) and not found.reads_own_indexes(org_alone)
    assert answers[True] == answers[False]
    user_rows, org_rows = answers[True]
    assert len(user_rows) == 10 and org_rows


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_search_that_finds_nothing_is_planned_for_its_owner_from_the_first_one_on(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Which vector indexes of their own a search's owners have is asked before each
    statement, not remembered from the hits of earlier searches: a process's first search of
    the owner, and a search that finds nothing (no hit to tell anything), run with the owner
    written into the statement, on the plan made for it. Planned for any owner instead, a
    filter that passes none of a large owner's memories had their count read every memory of
    the owner through the index of its newest (345 ms at 100,000 memories), search after
    search."""
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    vector = await indexed_app.state.mneme.embedding_backfill.embedder.embed_query(QUESTION)
    nothing_passes = [
        search_params(
            MemoryFilter.build(
                [Owner.user(USER), Owner.org()], kinds=["episodic"], categories=["none-has"]
            ),
            QUESTION,
            query_embedding=vector,
            use_vector=use_vector,
            use_lexical=not use_vector,
            bounded_from=BUILD_FROM,
        )
        for use_vector in (False, True)
    ]

    async def recorded(params: SearchParams) -> RecordingDriver:
        """What the search of `params` sent, once it found nothing."""
        async with tenant_transaction(indexed_app.state.mneme.sessionmaker, tenant) as session:
            connection = await session.connection()
            recording = RecordingDriver(await transaction_driver(connection))
            searches = PlannedSearch(
                recording, tenant, connection.dialect, generic_plan=True, statistics=None
            )
            assert await searches.search(params) == []
        return recording

    for params in nothing_passes * 2:
        recording = await recorded(params)
        assert recording.statement is not None
        assert f"m.user_id IN ({owner_literal(USER)})" in recording.statement[0]
        # The owner's own index's candidate list, on the generic plan of the written text:
        # twice the vector side's candidates (the whole pool of 100 here).
        assert recording.settings == [f"{GENERIC_SEARCH_PLAN_SQL}; SET LOCAL hnsw.ef_search = 200"]
    # A smaller vector side walks a shorter list, never shorter than the configured least.
    for vector_pool, ef_search in ((70, 140), (30, 100)):
        params = replace(nothing_passes[1], vector_pool=vector_pool, owner_index_ef_search=100)
        assert (await recorded(params)).settings == [
            f"{GENERIC_SEARCH_PLAN_SQL}; SET LOCAL hnsw.ef_search = {ef_search}"
        ]
    # Through the API: nothing found, and nothing wrong with finding nothing.
    response = await indexed_client.post(
        f"/v1/users/{USER}/memories/search",
        headers=headers,
        json={"query": QUESTION, "kinds": ["episodic"], "categories": ["none-has"]},
    )
    assert response.status_code == 200, response.text
    assert response.json()["hits"] == []


@pytest.mark.usefixtures("no_owner_indexes")
async def test_an_index_over_all_of_an_owners_kinds_is_read_until_its_kinds_are_built(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    key = Owner.user(USER).key
    whole = owner_index_name(tenant, key, "embedding")
    # As an earlier version built it: one graph of the owner's memories of every kind.
    async with owner_engine.connect() as connection:
        await connection.execute(
            text(
                f'CREATE INDEX "{whole}" ON memory USING hnsw (embedding vector_cosine_ops) '
                f"WITH (m = 16, ef_construction = 200) WHERE tenant_id = '{tenant}' "
                f"AND scope = 'user' AND user_id = {owner_literal(USER)}"
            )
        )
        await connection.commit()
    before = await search_ids(indexed_client, headers, QUESTION, mode="hybrid")
    assert await own_indexes_found(indexed_app, tenant) == {f":{key}"}
    indexes = OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100)

    plan = await indexes.plan()
    assert set(kind_names(tenant, "semantic", "episodic")) <= {i.name for i in plan.build}
    # Dropped after the kinds' indexes are built, not before (the owner's searches read it).
    assert plan.retire == [whole] and whole not in plan.drop
    assert f"retire: {whole}" in plan.lines()
    report = await indexes.refresh()

    assert report.retired == [whole]
    definitions = await index_definitions(owner_engine)
    assert whole not in definitions and set(kind_names(tenant, "semantic", "episodic")) <= set(
        definitions
    )
    # The next search reads the owner's indexes per kind; the answer is the same.
    assert await own_indexes_found(indexed_app, tenant) == {f"semantic:{key}", f"episodic:{key}"}
    assert await search_ids(indexed_client, headers, QUESTION, mode="hybrid") == before


@pytest.mark.usefixtures("no_owner_indexes")
async def test_an_index_is_kept_down_to_half_the_threshold_and_dropped_below_or_when_purged(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    await large_owner(indexed_app, indexed_client, settings, tenant)
    facts_index, episodes_index = kind_names(tenant, "semantic", "episodic")
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    [column] = await indexed_columns(owner_engine)

    # 60 facts and 50 episodes: each kept while half the threshold is at most its count, not
    # built anew.
    kept = await OwnerIndexes(owner_engine, build_from=100, most=100).plan([column])
    assert {facts_index, episodes_index} <= {index.name for index in kept.kept}
    assert not {facts_index, episodes_index} & ({i.name for i in kept.build} | set(kept.drop))
    fewer = await OwnerIndexes(owner_engine, build_from=120, most=100).plan([column])
    assert facts_index in [index.name for index in fewer.kept]
    assert episodes_index in fewer.drop
    dropped = await OwnerIndexes(owner_engine, build_from=122, most=100).plan([column])
    assert {facts_index, episodes_index} <= set(dropped.drop)
    # Outgrown: only the largest `most` indexes are kept.
    outgrown = await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=0).plan([column])
    assert {facts_index, episodes_index} <= set(outgrown.drop)

    admin = bearer(settings, tenant, "admin", admin=True)
    purged = await indexed_client.delete(f"/v1/admin/users/{USER}", headers=admin)
    assert purged.status_code == 200, purged.text
    report = await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()

    assert {facts_index, episodes_index} <= set(report.dropped)
    assert not {facts_index, episodes_index} & set(await index_definitions(owner_engine))


@pytest.mark.usefixtures("no_owner_indexes")
async def test_an_index_built_with_other_graph_settings_is_replaced_under_its_name(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    headers = await large_owner(indexed_app, indexed_client, settings, tenant)
    name = owner_index_name(tenant, Owner.user(USER).key, "embedding", "semantic")
    # As an earlier version built them: the whole table's candidate list.
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100, ef_construction=64).refresh()
    assert "ef_construction='64'" in (await index_definitions(owner_engine))[name]
    before = await search_ids(indexed_client, headers, QUESTION, mode="hybrid")
    # A replacement killed before it finished left its pieces behind.
    async with owner_engine.connect() as connection:
        await connection.execute(text(f'CREATE INDEX "{name}_prev" ON memory (id)'))
        await connection.commit()
    indexes = OwnerIndexes.configured(
        owner_engine, settings.model_copy(update={"owner_vector_index_from": BUILD_FROM})
    )

    # (Other tests' large owners may be in the plan too.)
    plan = await indexes.plan()
    assert name in [index.name for index in plan.rebuild]
    assert name not in [index.name for index in plan.build + plan.kept]
    assert f"{name}_prev" in plan.drop and "rebuild: " + name in "\n".join(plan.lines())
    report = await indexes.refresh()

    assert name in [index.name for index in report.rebuilt]
    definitions = await index_definitions(owner_engine)
    # One index for the owner, under its name, with the configured settings; nothing left over.
    assert [n for n in definitions if n.startswith(name)] == [name]
    assert "WITH (m='16', ef_construction='100')" in definitions[name]
    assert f"(user_id = '{USER}'::text)" in definitions[name]
    again = await indexes.refresh()
    assert not again.rebuilt and not again.built and name in [i.name for i in again.kept]
    # The owner's searches go on reading it (the new graph finds the same 60 memories' top 10).
    assert await search_ids(indexed_client, headers, QUESTION, mode="hybrid") == before


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_purge_has_the_serving_process_drop_the_users_index_at_once(
    keeping_app: FastAPI,
    keeping_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    # The process refreshes the indexes itself, every ten minutes.
    await large_owner(keeping_app, keeping_client, settings, tenant)
    name = owner_index_name(tenant, Owner.user(USER).key, "embedding", "semantic")
    await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=100).refresh()
    assert name in await index_definitions(owner_engine)

    admin = bearer(settings, tenant, "admin", admin=True)
    purged = await keeping_client.delete(f"/v1/admin/users/{USER}", headers=admin)
    assert purged.status_code == 200, purged.text
    # The purge asked the process's refresh loop to run now, not in ten minutes (the index goes
    # by DROP INDEX CONCURRENTLY).
    assert name not in await once_indexes(owner_engine, lambda names: name not in names)


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_process_that_starts_builds_the_indexes_an_owner_outgrew_meanwhile(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    # Grown and counted while no process kept the indexes.
    await large_owner(indexed_app, indexed_client, settings, tenant)
    wanted = set(kind_names(tenant, "semantic", "episodic"))
    assert not wanted & set(await index_definitions(owner_engine))
    # A process that keeps them, every ten minutes, starts: it refreshes at once, unasked.
    async with low_thresholds_app(settings, refresh_seconds=600):
        assert wanted <= await once_indexes(owner_engine, wanted.issubset)


WAITING_FOR_THE_REFRESH_LOCK_SQL = text(
    """
SELECT count(*) FROM pg_stat_activity
 WHERE pid <> :holder AND datname = current_database() AND query LIKE '%advisory_lock(%'
"""
)
"""The sessions other than `holder` whose statement, running or last, asks for an advisory
lock: a refresh waiting for the refresh lock."""


async def test_a_refresh_waiting_for_another_holds_up_none_of_its_concurrent_builds(
    owner_engine: AsyncEngine,
) -> None:
    name = f"ix_test_refresh_wait_{uuid.uuid4().hex[:12]}"
    async with owner_engine.connect() as connection:
        holder = await connection.execution_options(isolation_level="AUTOCOMMIT")
        holder_pid = (await holder.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        # This session is the refresh that holds the lock, another refresh waits for it.
        await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": REFRESH_LOCK})
        waiting = asyncio.create_task(OwnerIndexes(owner_engine, build_from=0, most=0).refresh())
        try:
            for _ in range(600):
                asking = await holder.execute(
                    WAITING_FOR_THE_REFRESH_LOCK_SQL, {"holder": holder_pid}
                )
                if asking.scalar_one() or waiting.done():
                    break
                await asyncio.sleep(0.05)
            assert not waiting.done()
            # The holder builds and drops concurrently, which waits for every transaction with
            # an older snapshot: had the waiting refresh waited inside a statement, the two
            # would wait for each other until PostgreSQL ended one as a deadlock.
            # A partial index no row is in (and no query can use), as test_index_builds builds.
            await create_index_concurrently(holder, name, "(created_at) WHERE false")
            await drop_index_concurrently(holder, name)
        finally:
            await holder.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": REFRESH_LOCK})
        # The waiting refresh then takes the lock and runs.
        report = await asyncio.wait_for(waiting, 60)
    assert report.built == []


async def test_only_the_tables_owner_maintains_the_indexes(runtime_engine: AsyncEngine) -> None:
    with pytest.raises(OwnerIndexesRefused):
        await OwnerIndexes(runtime_engine, build_from=BUILD_FROM, most=100).refresh()


def test_an_index_name_hides_its_owner_and_fits_postgres() -> None:
    name = owner_index_name("tenant-a", "user:" + "x" * 300, "embedding")
    assert name.startswith("ix_memory_owner_") and len(name) <= 63
    assert "tenant-a" not in name
    assert name != owner_index_name("tenant-a", "user:" + "x" * 300, "embedding_alt")
    # One per kind, none of them the name of the index over all the owner's kinds.
    names = {
        owner_index_name("tenant-a", "user:x", "embedding", kind)
        for kind in ("", "semantic", "episodic", "procedural")
    }
    assert len(names) == 4


async def test_no_index_of_the_schema_goes_by_the_owner_indexes_name(
    owner_engine: AsyncEngine,
) -> None:
    # The keeper of the owners' indexes drops every index on `memory` whose name starts with
    # the prefix and that it did not build: a schema index so named would be dropped by the
    # first refresh. Names it builds are the prefix and 24 hex digits.
    async with owner_engine.connect() as connection:
        names = (
            await connection.execute(
                text(
                    "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE i.indrelid = 'memory'::regclass"
                )
            )
        ).scalars()
        prefixed = [name for name in names if name.startswith(OWNER_INDEX_PREFIX)]
    owner_name = re.compile(re.escape(OWNER_INDEX_PREFIX) + "[0-9a-f]{24}")
    assert [name for name in prefixed if not owner_name.fullmatch(name)] == []


class _RefreshCancelledAsAnError:
    """Owner indexes whose refresh, when cancelled mid-statement, raises the driver's own error
    (as SQLAlchemy over asyncpg may) instead of the cancellation."""

    def __init__(self) -> None:
        self.refreshing = asyncio.Event()

    async def until_due(self, every_seconds: float) -> None:
        if self.refreshing.is_set():
            await asyncio.sleep(every_seconds)

    async def refresh(self) -> None:
        self.refreshing.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as cancelled:
            raise RuntimeError("connection was closed in the middle of operation") from cancelled


async def test_the_index_keeper_stops_when_cancelled_mid_refresh() -> None:
    # A shutdown cancels the keeper and waits for it: had the loop taken the driver's error
    # for a failed refresh, it would wait for its next turn (600 s) and the shutdown with it.
    indexes = _RefreshCancelledAsAnError()
    keeper = asyncio.create_task(keep_owner_indexes(indexes, 600))  # type: ignore[arg-type]
    await asyncio.wait_for(indexes.refreshing.wait(), 5)
    keeper.cancel()
    await asyncio.wait_for(keeper, 5)
