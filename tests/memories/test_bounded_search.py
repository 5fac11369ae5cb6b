"""A large owner's lexical side reads impact-ordered postings instead of testing every memory:
the postings follow every write of a memory's text, the owner's statistics are counted in the
background when a search asks for them, and the bounded search ranks as the exact one does."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from httpx import ASGITransport, AsyncClient
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.rawsql import explain_prepared
from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.jobs import SEARCH_STATISTICS_JOB
from service.main import create_app
from service.memories.bm25 import number, term_weight
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    GENERIC_SEARCH_PLAN_SQL,
    FusionRepository,
    OwnersFound,
    SearchParams,
    SearchRow,
)
from service.memories.fusion.statement import compiled_search, weight_bound
from service.memories.jobs import search_statistics_job
from service.memories.postings import IMPACT_MEAN_LENGTH
from service.memories.vector_columns import VectorColumn
from tests.conftest import as_tenant, bearer, new_tenant
from tests.fixtures.factories import remember_texts
from tests.plans import plan_nodes
from tests.search_params import search_params

BOUNDED_FROM = 60
POSTINGS_PER_LEXEME = 40

WORDS = (
    "piano",
    "chess",
    "violin",
    "hiking",
    "tea",
    "coffee",
    "garden",
    "painting",
    "novels",
    "poetry",
    "football",
    "tennis",
    "sailing",
    "cooking",
    "baking",
    "pottery",
    "cycling",
    "running",
    "swimming",
    "yoga",
    "jazz",
    "opera",
    "museums",
    "astronomy",
    "birds",
    "dogs",
    "cats",
    "horses",
    "mountains",
    "beaches",
    "lakes",
    "forests",
    "trains",
    "photography",
    "knitting",
    "climbing",
    "skiing",
    "surfing",
    "dancing",
    "singing",
    "writing",
    "reading",
    "chemistry",
    "history",
)
VERBS = ("likes", "loves", "enjoys", "mentioned", "talked about", "wants to try", "dislikes")


def corpus(seed: int, size: int) -> list[str]:
    """Facts in the write path's style: every one starts with "User", and the verbs repeat,
    so a natural question's common words match most of the owner's memories."""
    chooser = random.Random(seed)
    texts: set[str] = set()
    while len(texts) < size:
        first, second = chooser.sample(WORDS, 2)
        texts.add(f"User {chooser.choice(VERBS)} {first} and {second} (note {len(texts)})")
    return sorted(texts)


QUESTIONS = [
    "what does the user like to play",
    "does the user enjoy piano or violin",
    "what did the user say about hiking in the mountains",
    "user loves tea",
    "which sports does the user talk about, football or tennis",
    "is the user into photography and painting",
]


@pytest.fixture
async def bounded_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The app with a low threshold: an owner of `BOUNDED_FROM` memories is searched through
    its postings (the default threshold is thousands of memories)."""
    changed = settings.model_copy(
        update={
            "search_bounded_from": BOUNDED_FROM,
            "search_postings_per_lexeme": POSTINGS_PER_LEXEME,
        }
    )
    application = create_app(changed)
    async with LifespanManager(application):
        yield application


@pytest.fixture
async def bounded_client(bounded_app: FastAPI) -> AsyncIterator[AsyncClient]:
    transport = ASGITransport(app=bounded_app)
    async with AsyncClient(transport=transport, base_url="http://mneme.test") as client:
        yield client


async def postings(owner_engine: AsyncEngine, tenant: str) -> dict[str, tuple[str, set[str]]]:
    """Each memory of the tenant: its owner key and the lexemes its postings hold."""
    async with owner_engine.begin() as connection:
        rows = await connection.execute(
            text(
                "SELECT memory_id::text, owner_key, lexeme FROM memory_posting "
                "WHERE tenant_id = :tenant"
            ),
            {"tenant": tenant},
        )
        found: dict[str, tuple[str, set[str]]] = {}
        for memory_id, owner_key, lexeme in rows:
            found.setdefault(memory_id, (owner_key, set()))[1].add(lexeme)
        return found


async def lexemes_of_text(owner_engine: AsyncEngine, tenant: str) -> dict[str, set[str]]:
    """Each memory of the tenant with the lexemes of its stored text."""
    async with owner_engine.begin() as connection:
        rows = await connection.execute(
            text("SELECT id::text, tsvector_to_array(tsv) FROM memory WHERE tenant_id = :tenant"),
            {"tenant": tenant},
        )
        return {memory_id: set(lexemes) for memory_id, lexemes in rows}


async def assert_postings_follow_the_text(owner_engine: AsyncEngine, tenant: str) -> None:
    expected = await lexemes_of_text(owner_engine, tenant)
    found = await postings(owner_engine, tenant)
    assert {key: lexemes for key, (_, lexemes) in found.items()} == {
        key: lexemes for key, lexemes in expected.items() if lexemes
    }


async def test_postings_follow_every_write_of_a_memorys_text(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    ada = bearer(settings, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    first, second, _ = await remember_texts(
        client, ada, ["User likes green tea", "User plays the cello", "the a an of"]
    )
    org = await client.post(
        "/v1/org/memories", headers=admin, json={"text": "The team ships on Thursdays"}
    )
    assert org.status_code == 201, org.text
    keyed = await client.put(
        "/v1/users/me/keyed-memories",
        params={"kind": "semantic", "key": "diet"},
        headers=ada,
        json={"text": "Vegetarian on weekdays"},
    )
    assert keyed.status_code == 201, keyed.text
    changed = await client.patch(
        f"/v1/users/me/memories/{first}", headers=ada, json={"text": "User prefers black coffee"}
    )
    assert changed.status_code == 200, changed.text
    deleted = await client.delete(f"/v1/users/me/memories/{second}", headers=ada)
    assert deleted.status_code == 204, deleted.text

    await assert_postings_follow_the_text(owner_engine, tenant)
    found = await postings(owner_engine, tenant)
    assert found[first] == ("user:ada", {"user", "prefer", "black", "coffe"})
    assert second not in found
    assert found[org.json()["id"]][0] == "org:"


async def statistics(owner_engine: AsyncEngine, tenant: str) -> dict[str, Any]:
    async with owner_engine.begin() as connection:
        owners = await connection.execute(
            text(
                "SELECT owner_key, documents, total_length FROM memory_owner_stats "
                "WHERE tenant_id = :tenant"
            ),
            {"tenant": tenant},
        )
        lexemes = await connection.execute(
            text(
                "SELECT owner_key, lexeme, documents FROM memory_lexeme_stats "
                "WHERE tenant_id = :tenant"
            ),
            {"tenant": tenant},
        )
        return {
            "owners": {row[0]: (row[1], row[2]) for row in owners},
            "lexemes": {(row[0], row[1]): row[2] for row in lexemes},
        }


async def queued_statistics_jobs(
    owner_engine: AsyncEngine, tenant: str, *apps: FastAPI
) -> list[dict[str, Any]]:
    """The tenant's queued statistics jobs, once `apps` have queued what their searches asked
    for (after each request's commit, in the background)."""
    for app in apps:
        await app.state.mneme.background.drain()
    async with owner_engine.begin() as connection:
        rows = await connection.execute(
            text(
                "SELECT convert_from(payload, 'UTF8')::jsonb FROM pgqueuer "
                "WHERE entrypoint = :kind AND status = 'queued' "
                "AND convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant"
            ),
            {"kind": SEARCH_STATISTICS_JOB, "tenant": tenant},
        )
        return sorted((dict(row[0]) for row in rows), key=lambda job: job["scope"])


async def run_statistics_jobs(app: FastAPI, owner_engine: AsyncEngine, tenant: str) -> int:
    """Run the queued statistics jobs of `tenant` with the service's handler, as the worker
    would, and take them off the queue."""
    handle = search_statistics_job(app.state.mneme)
    jobs = await queued_statistics_jobs(owner_engine, tenant, app)
    for payload in jobs:
        await handle(payload)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "DELETE FROM pgqueuer WHERE entrypoint = :kind "
                "AND convert_from(payload, 'UTF8')::jsonb ->> 'tenant_id' = :tenant"
            ),
            {"kind": SEARCH_STATISTICS_JOB, "tenant": tenant},
        )
    return len(jobs)


def bounded_params(memory_filter: MemoryFilter, question: str, **changes: Any) -> SearchParams:
    """`search_params` with this module's thresholds: bounded from `BOUNDED_FROM` memories,
    `POSTINGS_PER_LEXEME` postings read per lexeme."""
    return search_params(
        memory_filter,
        question,
        bounded_from=BOUNDED_FROM,
        postings_per_lexeme=POSTINGS_PER_LEXEME,
        **changes,
    )


async def search_hits(
    client: AsyncClient, headers: dict[str, str], question: str, *, mode: str = "lexical"
) -> list[dict[str, Any]]:
    """The top 10 hits of the caller's search, as the API answers them."""
    response = await client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        json={"query": question, "limit": 10, "mode": mode},
    )
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["hits"]
    return hits


async def search_ids(
    client: AsyncClient, headers: dict[str, str], question: str, *, mode: str = "lexical"
) -> list[str]:
    return [hit["memory"]["id"] for hit in await search_hits(client, headers, question, mode=mode)]


async def test_a_large_owner_gets_statistics_and_is_then_searched_through_its_postings(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(7, 4 * BOUNDED_FROM))
    exact = {question: await search_ids(client, ada, question) for question in QUESTIONS}

    # An owner past the threshold without statistics is searched exactly, and the search asks
    # for them: one job per owner searched (the user, and the organization it shares), however
    # many searches ask.
    for question in QUESTIONS[:2]:
        assert await search_ids(bounded_client, ada, question) == exact[question]
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == [
        {"tenant_id": tenant, "scope": "org"},
        {"tenant_id": tenant, "scope": "user", "user_id": "ada"},
    ]
    assert await run_statistics_jobs(bounded_app, owner_engine, tenant) == 2

    counted = await statistics(owner_engine, tenant)
    # The organization has no memory: no statistics (a search counts its postings, if any).
    assert set(counted["owners"]) == {"user:ada"}
    assert counted["owners"]["user:ada"][0] == 4 * BOUNDED_FROM
    assert counted["lexemes"][("user:ada", "user")] == 4 * BOUNDED_FROM
    assert all(documents >= 200 for documents in counted["lexemes"].values())

    async with tenant_transaction(bounded_app.state.mneme.sessionmaker, tenant) as session:
        user_only = MemoryFilter.build([Owner.user("ada")]).live_unless_asked()
        rows = await FusionRepository(session, tenant).search(
            bounded_params(
                user_only,
                QUESTIONS[0],
            )
        )
    assert rows and all(row.bounded for row in rows)

    # The API's default search (the user's memories and the organization's) is bounded now,
    # and it ranks as the exact search does.
    agreed = 0
    for question in QUESTIONS:
        bounded = await search_ids(bounded_client, ada, question)
        agreed += len(set(bounded) & set(exact[question]))
    assert agreed / (10 * len(QUESTIONS)) >= 0.9
    # A bounded search with fresh statistics asks for nothing more.
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == []


async def test_old_statistics_are_recounted_and_a_purged_user_keeps_none(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(11, 2 * BOUNDED_FROM))
    await search_ids(bounded_client, ada, "user likes chess")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)
    await remember_texts(client, ada, ["User adores marmalade"])
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE memory_owner_stats SET refreshed_at = now() - interval '1 hour' "
                "WHERE tenant_id = :tenant"
            ),
            {"tenant": tenant},
        )
    await search_ids(bounded_client, ada, "user likes chess")
    assert [
        job["scope"] for job in await queued_statistics_jobs(owner_engine, tenant, bounded_app)
    ] == [
        "org",
        "user",
    ]
    await run_statistics_jobs(bounded_app, owner_engine, tenant)
    owners = (await statistics(owner_engine, tenant))["owners"]
    assert owners["user:ada"][0] == 2 * BOUNDED_FROM + 1

    # A user's purge takes the postings and statistics with it (they repeat the user's words),
    # and a recount queued before it leaves nothing behind.
    await search_ids(bounded_client, ada, "user likes chess")
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE memory_owner_stats SET refreshed_at = now() - interval '1 hour'")
        )
    await search_ids(bounded_client, ada, "user likes chess")
    pending = await queued_statistics_jobs(owner_engine, tenant, bounded_app)
    admin = bearer(settings, tenant, "root", admin=True)
    purged = await client.delete("/v1/admin/users/ada", headers=admin)
    assert purged.status_code == 200, purged.text
    report = purged.json()
    assert report["deleted"]["memory_posting"] > 0
    assert report["remaining"]["memory_posting"] == 0
    assert report["remaining"]["memory_lexeme_stats"] == 0
    # The user's queued recount is dropped; the organization's stays (it is not the user's).
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == [
        {"tenant_id": tenant, "scope": "org"}
    ]
    for payload in pending:  # a recount that was already running when the purge committed
        await search_statistics_job(bounded_app.state.mneme)(payload)
    assert await statistics(owner_engine, tenant) == {"owners": {}, "lexemes": {}}
    assert await postings(owner_engine, tenant) == {}


async def test_another_tenants_postings_and_statistics_are_out_of_reach(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(13, BOUNDED_FROM))
    await search_ids(bounded_client, ada, "user likes chess")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)
    other = new_tenant()
    eve = bearer(settings, other, "ada")
    # The other tenant's user has the same id and asks the same question: nothing of the
    # first tenant's comes back, through the postings or the statistics.
    assert await search_ids(bounded_client, eve, "user likes chess") == []
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, other)
        for table in ("memory_posting", "memory_owner_stats", "memory_lexeme_stats"):
            count = await connection.execute(text(f"SELECT count(*) FROM {table}"))
            assert count.scalar_one() == 0, table


async def owners_found(
    application: FastAPI, tenant: str, owners: Sequence[Owner], column: VectorColumn
) -> OwnersFound:
    """What a search of `owners` reading `column` finds about them before its statement."""
    sessionmaker = application.state.mneme.sessionmaker
    async with (
        tenant_transaction(sessionmaker, tenant) as session,
        FusionRepository(session, tenant).planned() as planned,
    ):
        return await planned.owners_found(owners, column)


def test_an_owner_is_read_through_its_own_indexes_or_sorted_exactly() -> None:
    """What a search finds about its owners decides where it reads their nearest vectors:
    their own indexes when they have any, else an exact sort, however many memories they hold
    (the memory table has no graph of its own to walk)."""
    user, org = Owner.user("a"), Owner.org()
    params = search_params(MemoryFilter.build([user, org]), "q", bounded_from=100)
    user_alone = replace(params, filter=MemoryFilter.build([user]))
    org_alone = replace(params, filter=MemoryFilter.build([org]))

    def found(documents: dict[str, int], own: frozenset[str] = frozenset()) -> OwnersFound:
        return OwnersFound(user, params.vector_column, documents, own)

    assert not found({user.key: 1_000_000, org.key: 500_000}).reads_own_indexes(params)
    # Indexes of their own come first, and belong to the owner they name.
    own = frozenset({f"semantic:{user.key}"})
    assert found({}, own).reads_own_indexes(params)
    assert found({}, own).reads_own_indexes(user_alone)
    assert not found({org.key: 1_000_000}, own).reads_own_indexes(org_alone)
    assert found({}, own).own_indexes_of(user_alone) == own


async def test_a_lexeme_in_most_memories_brings_no_candidates_of_its_own(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """The word "user" is in every fact of the corpus: a memory holding it and no other lexeme
    of the question cannot outscore one that holds the rarer lexeme, so the bounded path takes
    its candidates from the rarer lexeme's postings alone; the exact path ranks the same
    first."""
    ada = bearer(settings, tenant, "ada")
    zither = ["User plays the zither badly", "The zither came from Vienna", "A zither for Ada"]
    ids = await remember_texts(client, ada, [*corpus(11, 4 * BOUNDED_FROM), *zither])
    zither_ids = set(ids[-3:])
    question = "what about the user and the zither"
    exact = await search_ids(client, ada, question)
    await search_ids(bounded_client, ada, question)
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    bounded = await search_ids(bounded_client, ada, question)

    # Exact: the three zither memories first, then memories holding only "user".
    assert len(exact) == 10 and set(exact[:3]) == zither_ids
    assert bounded == exact[:3]
    # A question of such lexemes alone still reads their postings.
    assert len(await search_ids(bounded_client, ada, "the user")) == 10


async def lexical_scores(
    client: AsyncClient, headers: dict[str, str], question: str
) -> list[float]:
    return [hit["scores"]["lexical_score"] for hit in await search_hits(client, headers, question)]


async def test_a_question_word_no_memory_holds_leaves_the_common_ones_to_bring_candidates(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Every memory says "User likes …", and the question's one other word ("play") is in none
    of them: a lexeme no memory holds brings no candidates, so the question is one of common
    lexemes alone, whose postings are read, and the bounded path ranks what the exact path
    ranks. (Taken as the lexeme that brings the candidates, it brought none, and a lexical
    search of the large owner answered nothing where the same owner searched exactly answered
    ten memories.)"""
    ada = bearer(settings, tenant, "ada")
    chooser = random.Random(5)
    facts = [
        f"User likes {' and '.join(chooser.sample(WORDS, 1 + index % 3))} (note {index})"
        for index in range(4 * BOUNDED_FROM)
    ]
    await remember_texts(client, ada, facts)
    question = "what does the user like to play"
    exact = await lexical_scores(client, ada, question)
    await search_ids(bounded_client, ada, question)
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    bounded = await lexical_scores(bounded_client, ada, question)

    # The exact path ranks every memory by its "user" and "like": the shortest first, many of
    # them tied; the bounded path returns memories of the same scores.
    assert len(exact) == 10 and exact[0] > 0
    assert bounded == exact


async def test_candidates_of_one_score_are_read_only_as_far_as_the_pool_takes_them(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Every memory holds "tulip" once and is as long as the others: every candidate's score is
    known from its posting, and all are equal. The ranking orders equal scores by key, so of
    those candidates the pool's are the pool's first keys, and the rest are never read, where
    a bound on scores alone could rule none of them out. The hits are the exact search's, in
    its order."""
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, [f"Tulip {WORDS[n % 40]} {n}" for n in range(120)])
    question = "tulip"
    await search_ids(bounded_client, ada, question)
    await run_statistics_jobs(bounded_app, owner_engine, tenant)
    memory_filter = MemoryFilter.build([Owner.user("ada"), Owner.org()]).live_unless_asked()
    params = replace(bounded_params(memory_filter, question, pool=10), postings_per_lexeme=200)

    hits, plan = await search_with_plan(bounded_app, tenant, params)
    exact, _ = await search_with_plan(bounded_app, tenant, replace(params, bounded_from=10**9))

    assert all(row.bounded for row in hits)
    assert [row.memory.id for row in hits] == [row.memory.id for row in exact]
    assert len({row.scores.lexical_score for row in hits}) == 1
    kept, pruned = candidates_pruned(plan)
    assert (kept, pruned) == (10, 110)


async def test_sections_of_one_owner_read_its_postings_once_and_rank_as_each_alone(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """A context asks for one user's facts and episodes in one statement: the two sections
    have the same owner, so the same postings and candidates. The statement reads them once
    and puts each candidate in the section whose filter it passes; each section's hits are
    still exactly those of its own search."""
    ada = bearer(settings, tenant, "ada")
    # Every other fact of the corpus is an episode: both kinds hold every word.
    texts = corpus(13, 4 * BOUNDED_FROM)
    await remember_texts(client, ada, texts[::2])
    await remember_texts(client, ada, texts[1::2], kind="episodic")
    await search_ids(bounded_client, ada, QUESTIONS[0])
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    owners = [Owner.user("ada")]
    sections = [
        bounded_params(
            MemoryFilter.build(owners, kinds=[kind]).live_unless_asked(),
            question,
        )
        for question in QUESTIONS[:1]
        for kind in ("semantic", "episodic")
    ]
    compiled, _ = compiled_search(tenant, sections, asyncpg.dialect())
    # One read of the postings (its ranges joined as `top`) for the two sections.
    assert compiled.sql.count(") AS top") == 1

    both_found = 0
    for question in QUESTIONS:
        asked = [replace(section, query=question) for section in sections]
        async with tenant_transaction(bounded_app.state.mneme.sessionmaker, tenant) as session:
            together = await FusionRepository(session, tenant).search_sections(asked)
            alone = [await FusionRepository(session, tenant).search(section) for section in asked]
        assert all(row.bounded for hits in together for row in hits)
        assert [row.memory.kind for row in together[0]] == ["semantic"] * len(together[0])
        assert [row.memory.kind for row in together[1]] == ["episodic"] * len(together[1])
        assert [[row.memory.id for row in hits] for hits in together] == [
            [row.memory.id for row in hits] for hits in alone
        ]
        both_found += bool(together[0] and together[1])
    assert both_found >= len(QUESTIONS) - 1


async def test_a_memory_naming_two_question_words_is_found_below_the_top_of_both_lists(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Each word of the question has more short memories than the postings read per lexeme,
    all weighing more in their lists than the one longer memory that names both words; that
    one still outscores them all, and the bounded search finds it further down the lists."""
    ada = bearer(settings, tenant, "ada")
    shorts = [f"Zither practice {n}" for n in range(2 * POSTINGS_PER_LEXEME)]
    shorts += [f"Marimba concert {n}" for n in range(2 * POSTINGS_PER_LEXEME)]
    await remember_texts(client, ada, shorts)
    [both] = await remember_texts(client, ada, ["User mentioned zither and marimba at the lake"])
    question = "zither marimba"
    exact = await search_ids(client, ada, question)
    await search_ids(bounded_client, ada, question)
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    assert exact[0] == both
    assert (await search_ids(bounded_client, ada, question))[0] == both
    # Read no further than the top of each list, the memory is not a candidate at all.
    async with tenant_transaction(bounded_app.state.mneme.sessionmaker, tenant) as session:
        rows = await FusionRepository(session, tenant).search(
            bounded_params(
                MemoryFilter.build([Owner.user("ada"), Owner.org()]).live_unless_asked(),
                question,
                postings_scanned=POSTINGS_PER_LEXEME,
            )
        )
    assert rows and all(row.bounded for row in rows)
    assert both not in {str(row.memory.id) for row in rows}


def postings_read(plan: dict[str, Any]) -> int:
    """The index entries the plan read from the postings' impact index, over every loop (a
    node's rows are its loops' mean, fractional: truncated, they would count less the more
    loops the plan made)."""
    return round(
        sum(
            float(node["Actual Rows"]) * int(node["Actual Loops"])
            for node in plan_nodes(plan)
            if node.get("Index Name") == "ix_memory_posting_impact"
        )
    )


async def search_with_plan(
    app: FastAPI, tenant: str, params: SearchParams
) -> tuple[list[SearchRow], dict[str, Any]]:
    """The repository's hits for `params`, and the plan (EXPLAIN ANALYZE) of the statement it
    runs for them."""
    [hits], plan = await sections_with_plan(app, tenant, [params])
    return hits, plan


async def sections_with_plan(
    app: FastAPI, tenant: str, sections: list[SearchParams]
) -> tuple[list[list[SearchRow]], dict[str, Any]]:
    """The repository's hits for each of `sections` searched as one statement, and the plan
    (EXPLAIN ANALYZE) of that statement on the generic plan the service runs it on: one plan
    whatever the values bound (a plan made for them could read the same ranges otherwise, as the
    table's statistics move under the other tests' writes)."""
    async with tenant_transaction(app.state.mneme.sessionmaker, tenant) as session:
        hits = await FusionRepository(session, tenant).search_sections(sections)
        connection = await session.connection()
        compiled, arguments = compiled_search(tenant, sections, connection.dialect)
        driver = await transaction_driver(connection)
        await driver.execute(GENERIC_SEARCH_PLAN_SQL)
        plan = (await explain_prepared(driver, compiled.sql, arguments))[0]["Plan"]
    return hits, plan


async def test_the_postings_are_read_past_the_top_only_when_two_lists_are_cut_there(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """A memory found in two ranges can be a candidate only from below the top of both lists,
    so with one list longer than the top (the other read whole), the ranges stop at the top;
    with two, they go on. Either way the hits start as the exact search's."""
    ada = bearer(settings, tenant, "ada")
    await remember_texts(
        client, ada, [f"Zither practice {n}" for n in range(2 * POSTINGS_PER_LEXEME)]
    )
    await remember_texts(client, ada, [f"Marimba concert {n}" for n in range(6)])
    await remember_texts(
        client, ada, [f"Ukulele lesson {n}" for n in range(2 * POSTINGS_PER_LEXEME)]
    )
    [every_word] = await remember_texts(
        client, ada, ["User mentioned zither, marimba and ukulele at the lake"]
    )
    await search_ids(bounded_client, ada, "zither")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    async def search_and_postings_read(question: str, scanned: int) -> tuple[list[str], int]:
        params = bounded_params(
            MemoryFilter.build([Owner.user("ada"), Owner.org()]).live_unless_asked(),
            question,
            postings_scanned=scanned,
        )
        hits, plan = await search_with_plan(bounded_app, tenant, params)
        assert hits and all(row.bounded for row in hits)
        return [str(row.memory.id) for row in hits], postings_read(plan)

    for question in ("zither marimba", "zither ukulele"):
        exact = await search_ids(client, ada, question)
        hits, read = await search_and_postings_read(question, 10 * POSTINGS_PER_LEXEME)
        top_only, read_at_top = await search_and_postings_read(question, POSTINGS_PER_LEXEME)
        if question == "zither marimba":
            # One list cut (zither's 81 memories), the other read whole (marimba's 7): no
            # entry is read past the top, and the hits are those of the top alone. They start
            # as the exact search's: the six marimba memories (the rarer word) and the one
            # naming both; the zither ones after them tie, and only some of those were read.
            assert read == read_at_top, (read, read_at_top)
            assert hits == top_only
            assert hits[:7] == exact[:7] and every_word in hits[:7]
        else:
            # Both cut: both read on, to their ends here (41 entries each past the top; more
            # than one list's worth), where the memory naming both words is, first as in the
            # exact search.
            assert read > read_at_top + 81 - POSTINGS_PER_LEXEME, (read, read_at_top)
            assert exact[0] == hits[0] == every_word
            assert every_word not in top_only


FILLER = (
    "quietly",
    "every",
    "morning",
    "beside",
    "the",
    "old",
    "harbour",
    "wall",
    "while",
    "gulls",
    "circled",
    "over",
    "fishing",
    "boats",
    "painted",
    "bright",
    "colours",
    "against",
    "grey",
    "winter",
    "skies",
    "near",
    "market",
    "stalls",
    "selling",
    "fresh",
    "bread",
    "cheese",
    "olives",
)


def candidates_pruned(plan: dict[str, Any]) -> tuple[int, int]:
    """The bounded read's candidates kept and left unread by the bound on their score."""
    [pruning] = [
        node
        for node in plan_nodes(plan)
        if node.get("CTE Name") == "candidate" and "at_most" in node.get("Filter", "")
    ]
    return int(pruning["Actual Rows"]), int(pruning["Rows Removed by Filter"])


async def test_a_candidate_whose_score_cannot_reach_the_pool_is_never_read(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Each candidate's score lies between what the question words it was found under give
    and that plus the most every other question word can add (the impact past that word's
    range); a candidate whose most is below the score the section's pool already reaches is
    not read. The hits stay the exact search's: with the other word's range cut above the
    memories that hold both words, and with higher-scoring memories of a kind the section
    leaves out."""
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(17, 2 * BOUNDED_FROM))
    # "zither": 35 memories, read whole; shorter ones weigh more.
    zithers = [f"Zither {' '.join(FILLER[:length])}" for length in range(20)]
    await remember_texts(client, ada, zithers)
    await remember_texts(client, ada, [f"Zither tune {n}" for n in range(12)], kind="episodic")
    both = await remember_texts(
        client, ada, [f"Zither and marimba {' '.join(FILLER[:n])}" for n in (3, 4, 5)]
    )
    # "marimba": 83 memories, cut at the top 40, above the three that hold both words.
    marimbas = [f"Marimba {' '.join(FILLER[: n % 5])} {n}" for n in range(80)]
    await remember_texts(client, ada, marimbas)
    await search_ids(bounded_client, ada, "zither")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    question = "zither marimba"

    async def search_and_plan(params: SearchParams) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
        hits, plan = await search_with_plan(bounded_app, tenant, params)
        assert all(row.bounded for row in hits) == (params.bounded_from == BOUNDED_FROM)
        return [(row.memory.id, row.scores.lexical_score) for row in hits], plan

    for kinds in (None, ["semantic"]):
        memory_filter = MemoryFilter.build([Owner.user("ada"), Owner.org()], kinds=kinds)
        params = bounded_params(memory_filter.live_unless_asked(), question, pool=10)
        found, plan = await search_and_plan(params)
        # The same read with a pool of 100: its ~75 candidates are too few to prune.
        unpruned, whole_plan = await search_and_plan(replace(params, pool=100))
        assert candidates_pruned(whole_plan)[1] == 0
        assert found == unpruned
        if kinds is None:
            # Over every kind, the owners' statistics are the exact search's too.
            exact, _ = await search_and_plan(replace(params, bounded_from=10**9))
            assert found == exact
        # The memories naming both words are found under one alone, and outscore all but one.
        assert set(both) <= {str(memory_id) for memory_id, _ in found[:4]}
        kept, pruned = candidates_pruned(plan)
        assert pruned >= 20 and kept >= 10


async def test_the_score_a_sections_pool_reaches_is_taken_from_its_own_memories(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """Higher-scoring memories of a kind the section leaves out do not set the score its pool
    reaches: a section of facts keeps the facts its pool holds (and reads fewer)."""
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(19, 2 * BOUNDED_FROM))
    await remember_texts(client, ada, [f"Marimba tune {n}" for n in range(15)], kind="episodic")
    # Facts far longer than the episodes: each weighs less than any episode.
    facts = [f"Marimba {' '.join(FILLER[: 7 + n % 12])} {n}" for n in range(60)]
    await remember_texts(client, ada, facts)
    await search_ids(bounded_client, ada, "marimba")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    semantic = MemoryFilter.build([Owner.user("ada")], kinds=["semantic"]).live_unless_asked()
    params = bounded_params(semantic, "marimba", pool=10)
    found, plan = await search_with_plan(bounded_app, tenant, params)
    unpruned, _ = await search_with_plan(bounded_app, tenant, replace(params, pool=100))
    assert [row.memory.kind for row in found] == ["semantic"] * 10
    assert [(row.memory.id, row.scores.lexical_score) for row in found] == [
        (row.memory.id, row.scores.lexical_score) for row in unpruned
    ]
    assert candidates_pruned(plan)[1] >= 10


async def test_sections_sharing_a_read_each_prune_by_their_own_pool(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """A context's facts and episodes read one user's postings once; a posting carries its
    memory's kind, so each section reads the top of its own kind's lists, takes the score its
    pool reaches among its own kind's candidates and leaves unread those that cannot reach it.
    Here every episode outscores every fact: the top of the word's list over both kinds holds
    no fact at all. The hits are each section's own, and a search of facts alone finds the
    exact search's."""
    ada = bearer(settings, tenant, "ada")
    await remember_texts(client, ada, corpus(23, 2 * BOUNDED_FROM))
    # Short episodes weigh more than any of the longer facts; "marimba" is in 80 memories, its
    # lists cut at the top 40.
    episodes = [f"Marimba tune {' '.join(FILLER[: n % 6])} {n}" for n in range(40)]
    await remember_texts(client, ada, episodes, kind="episodic")
    facts = [f"Marimba {' '.join(FILLER[: 7 + n % 12])} {n}" for n in range(40)]
    await remember_texts(client, ada, facts)
    await search_ids(bounded_client, ada, "marimba")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    sections = [
        bounded_params(
            MemoryFilter.build([Owner.user("ada")], kinds=[kind]).live_unless_asked(),
            "marimba",
            pool=10,
        )
        for kind in ("semantic", "episodic")
    ]
    together, plan = await sections_with_plan(bounded_app, tenant, sections)
    # With pools of 100, the 80 candidates are too few to prune.
    whole = [replace(section, pool=100) for section in sections]
    unpruned, whole_plan = await sections_with_plan(bounded_app, tenant, whole)
    assert candidates_pruned(whole_plan)[1] == 0
    kept, pruned = candidates_pruned(plan)
    # Each section keeps at least its pool of its own kind and prunes the rest it can.
    assert kept >= 20 and pruned >= 40, (kept, pruned)
    assert [[row.memory.kind for row in hits] for hits in together] == [
        ["semantic"] * 10,
        ["episodic"] * 10,
    ]
    assert [[(row.memory.id, row.scores.lexical_score) for row in hits] for hits in together] == [
        [(row.memory.id, row.scores.lexical_score) for row in hits] for hits in unpruned
    ]
    # One word: the order is by length alone, the same with the facts' own statistics.
    exact, _ = await search_with_plan(bounded_app, tenant, replace(sections[0], bounded_from=10**9))
    alone, _ = await search_with_plan(bounded_app, tenant, sections[0])
    assert [row.memory.id for row in alone] == [row.memory.id for row in exact]
    assert [row.memory.id for row in together[0]] == [row.memory.id for row in exact]
    # As a client asks for them.
    response = await bounded_client.post(
        "/v1/users/me/memories/search",
        headers=ada,
        json={"query": "marimba", "limit": 10, "mode": "lexical", "kinds": ["semantic"]},
    )
    assert response.status_code == 200, response.text
    assert [hit["memory"]["id"] for hit in response.json()["hits"]] == [
        str(row.memory.id) for row in exact
    ]


@pytest.mark.parametrize("mean_length", [1.5, 3.0, 7.5, 10.0, 14.0, 40.0])
async def test_a_weight_bound_holds_the_bm25_weight_of_every_frequency_and_length(
    runtime_engine: AsyncEngine, mean_length: float
) -> None:
    """From its impact alone, a lexeme's BM25 weight at the owners' mean length lies between
    the two bounds, for any term frequency and memory length; at one occurrence one bound is
    the weight itself."""
    impact = term_weight("tf", "length", number(IMPACT_MEAN_LENGTH))
    weight = term_weight("tf", "length", "s.mean")
    bounds = f"""
        SELECT tf, length, {weight} AS weight,
               {weight_bound(f"({impact})", most=False)} AS least_weight,
               {weight_bound(f"({impact})", most=True)} AS most_weight
          FROM (SELECT CAST(:mean AS float8) AS mean,
                       {IMPACT_MEAN_LENGTH} / CAST(:mean AS float8) AS k) AS s
         CROSS JOIN generate_series(1, 12) AS tf
         CROSS JOIN generate_series(1, 60) AS length
    """
    async with runtime_engine.connect() as connection:
        rows = (await connection.execute(text(bounds), {"mean": mean_length})).all()
    assert len(rows) == 12 * 60
    for tf, length, exact, least_weight, most_weight in rows:
        assert least_weight <= exact <= most_weight, (tf, length)
        if tf == 1:
            assert min(exact - least_weight, most_weight - exact) <= 1e-5 * exact


async def test_a_filter_few_memories_pass_is_searched_exactly_however_the_postings_rank_them(
    client: AsyncClient,
    bounded_client: AsyncClient,
    bounded_app: FastAPI,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    """The top of a word's postings may hold none of the memories a filter passes (a category,
    a time window, a lifecycle): here 40 long proposed preferences from 2021 name "marimba",
    and 40 short memories of today weigh more for it, filling the top of its list. A search
    filtered to those few is searched exactly and finds them; a filter most memories pass
    still reads the postings."""
    ada = bearer(settings, tenant, "ada")
    preferences = await remember_preferences_below_the_top(client, ada)
    await search_ids(bounded_client, ada, "marimba")
    await run_statistics_jobs(bounded_app, owner_engine, tenant)

    await assert_narrowed_searches_find_them(client, bounded_client, ada, preferences)

    user_only = [Owner.user("ada")]
    few = bounded_params(MemoryFilter.build(user_only, categories=["preference"]), "marimba")
    hits, plan = await search_with_plan(bounded_app, tenant, few)
    assert {str(row.memory.id) for row in hits} <= set(preferences)
    assert cte_rows(plan, "lexical_exact") == 1
    assert cte_rows(plan, "exact_matches") == 40
    # Most memories happened after 2020: the top of the postings is read, as for any filter.
    most = bounded_params(
        MemoryFilter.build(user_only, event_after=datetime(2020, 1, 1, tzinfo=UTC)), "marimba"
    )
    hits, plan = await search_with_plan(bounded_app, tenant, most)
    assert cte_rows(plan, "lexical_exact") == 0
    assert cte_rows(plan, "exact_matches") == 0
    assert hits and all(row.bounded for row in hits)
    # A list no longer than the postings read holds every memory that passes: read whole.
    whole = replace(few, postings_per_lexeme=100)
    hits, plan = await search_with_plan(bounded_app, tenant, whole)
    assert {str(row.memory.id) for row in hits} <= set(preferences) and len(hits) == 10
    assert cte_rows(plan, "lexical_exact") == 0


NARROWING_FILTERS = (
    {"categories": ["preference"]},
    {"event_before": "2022-01-01T00:00:00Z"},
    {"lifecycles": ["proposed"]},
)
"""Filters that pass exactly the memories `remember_preferences_below_the_top` returns."""


async def remember_preferences_below_the_top(
    client: AsyncClient, headers: dict[str, str]
) -> list[str]:
    """An owner of `2 * BOUNDED_FROM` facts and 80 memories naming "marimba": 40 short ones of
    today, which fill the top of its postings, and 40 longer proposed preferences of March 2021
    below them (`NARROWING_FILTERS` each pass those alone); the preferences' ids."""
    await remember_texts(client, headers, corpus(23, 2 * BOUNDED_FROM))
    short = [f"Marimba tune {' '.join(FILLER[: n % 6])} {n}" for n in range(40)]
    await remember_texts(client, headers, short, category="event")
    long = [f"Marimba {' '.join(FILLER[: 7 + n % 12])} {n}" for n in range(40)]
    return await remember_texts(
        client,
        headers,
        long,
        category="preference",
        lifecycle="proposed",
        event_at="2021-03-01T12:00:00Z",
    )


async def assert_narrowed_searches_find_them(
    exact_client: AsyncClient,
    bounded_client: AsyncClient,
    headers: dict[str, str],
    preferences: list[str],
) -> None:
    """For each of `NARROWING_FILTERS`, the bounded search returns the exact search's 10
    preferences."""
    for narrowed in NARROWING_FILTERS:
        found = {}
        for name, asking in (("exact", exact_client), ("bounded", bounded_client)):
            response = await asking.post(
                "/v1/users/me/memories/search",
                headers=headers,
                json={"query": "marimba", "limit": 10, "mode": "lexical", **narrowed},
            )
            assert response.status_code == 200, response.text
            found[name] = [hit["memory"]["id"] for hit in response.json()["hits"]]
        assert len(found["exact"]) == 10 and set(found["exact"]) <= set(preferences), narrowed
        assert found["bounded"] == found["exact"], narrowed


def cte_rows(plan: dict[str, Any], name: str) -> int:
    """The rows the plan's CTE `name` returned."""
    [node] = [node for node in plan_nodes(plan) if node.get("Subplan Name") == f"CTE {name}"]
    return int(node["Actual Rows"])
