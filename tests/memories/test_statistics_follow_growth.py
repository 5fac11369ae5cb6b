"""An owner's search statistics follow its growth: writes that add a quarter of its last count
(or, never counted, the bounded search's threshold) ask for a recount without waiting for a
search to find the count old; a recount that finds an owner past the vector-index threshold
without its index has the keeper build it at once instead of at its next turn."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi import FastAPI
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.memories.jobs import search_statistics_job
from service.memories.owner_indexes import OwnerIndexes
from service.memories.postings import OwnerGrowth
from tests.conftest import bearer
from tests.fixtures.apps import app_client, running_app
from tests.fixtures.factories import remember_texts
from tests.memories.large_owners import (
    BUILD_FROM,
    USER,
    index_definitions,
    kind_names,
    large_owner,
    once_indexes,
)
from tests.memories.test_bounded_search import (
    BOUNDED_FROM,
    corpus,
    queued_statistics_jobs,
    run_statistics_jobs,
    statistics,
)


def test_a_recount_is_due_once_an_owner_grows_by_a_quarter_of_its_last_count() -> None:
    growth = OwnerGrowth(timedelta(hours=1), kept=100)
    ada, org = Owner.user("ada"), Owner.org()
    # Never counted here: due once the bounded search's threshold (1,000) has been written.
    assert not growth.wrote("t", ada, 999, 1_000)
    assert growth.wrote("t", ada, 1, 1_000)
    # Asking took the recount as done at 1,000: the next is due 250 memories later.
    assert not growth.wrote("t", ada, 249, 1_000)
    assert growth.wrote("t", ada, 1, 1_000)
    # The job's own count replaces the estimate: 4,000 counted, due after 1,000 more.
    growth.counted("t", ada, 4_000)
    assert not growth.wrote("t", ada, 999, 1_000)
    assert growth.wrote("t", ada, 1, 1_000)
    # An owner counted below the threshold is due when it reaches it, not a quarter on.
    growth.counted("t", org, 100)
    assert not growth.wrote("t", org, 899, 1_000)
    assert growth.wrote("t", org, 1, 1_000)
    # Owners are told apart by tenant too.
    assert not growth.wrote("another", ada, 999, 1_000)


async def test_writes_that_grow_an_owner_queue_its_recount_without_a_search(
    settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    async with (
        running_app(settings, search_bounded_from=BOUNDED_FROM) as application,
        app_client(application) as client,
    ):
        await _grow_and_recount(application, client, settings, owner_engine, tenant)


async def _grow_and_recount(
    bounded_app: FastAPI,
    bounded_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    texts = corpus(31, BOUNDED_FROM + BOUNDED_FROM // 4 + 5)
    # Below the threshold nothing is asked: such an owner is searched exactly.
    await remember_texts(bounded_client, ada, texts[: BOUNDED_FROM - 1])
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == []
    # The write that reaches it queues the recount; no search has run.
    await remember_texts(bounded_client, ada, texts[BOUNDED_FROM - 1 : BOUNDED_FROM])
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == [
        {"tenant_id": tenant, "scope": "user", "user_id": "ada"}
    ]
    assert await run_statistics_jobs(bounded_app, owner_engine, tenant) == 1
    assert (await statistics(owner_engine, tenant))["owners"]["user:ada"][0] == BOUNDED_FROM

    # The next is due a quarter of the count later (15 memories), and counts them all.
    grown = BOUNDED_FROM // 4
    await remember_texts(bounded_client, ada, texts[BOUNDED_FROM : BOUNDED_FROM + grown - 1])
    assert await queued_statistics_jobs(owner_engine, tenant, bounded_app) == []
    await remember_texts(
        bounded_client, ada, texts[BOUNDED_FROM + grown - 1 : BOUNDED_FROM + grown]
    )
    assert await run_statistics_jobs(bounded_app, owner_engine, tenant) == 1
    counted = await statistics(owner_engine, tenant)
    assert counted["owners"]["user:ada"][0] == BOUNDED_FROM + grown


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_recount_finding_an_owner_past_the_threshold_has_its_indexes_built_at_once(
    keeping_app: FastAPI,
    keeping_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    # The process keeps the indexes itself, every ten minutes.
    await large_owner(keeping_app, keeping_client, settings, tenant)
    keeper = keeping_app.state.mneme.owner_indexes
    wanted = set(kind_names(tenant, "semantic", "episodic"))
    assert not wanted & set(await index_definitions(owner_engine))
    # The organization's 5 memories are too few for an index: its recount asks nothing.
    assert not await keeper.build_soon_if_wanted(tenant, Owner.org(), 5)

    # The user's recount, as the background job runs it: the keeper runs at once, not in ten
    # minutes.
    handle = search_statistics_job(keeping_app.state.mneme)
    await handle({"tenant_id": tenant, "scope": "user", "user_id": USER})
    assert wanted <= await once_indexes(owner_engine, wanted.issubset)
    # Nothing is missing now: the next recount asks for no refresh.
    assert not await keeper.build_soon_if_wanted(tenant, Owner.user(USER), 112)


@pytest.mark.usefixtures("no_owner_indexes")
async def test_a_recount_asks_for_no_refresh_that_would_leave_the_owners_indexes_unbuilt(
    indexed_app: FastAPI,
    indexed_client: AsyncClient,
    settings: Settings,
    owner_engine: AsyncEngine,
    tenant: str,
) -> None:
    await large_owner(indexed_app, indexed_client, settings, tenant)
    user = Owner.user(USER)
    facts_index, episodes_index = kind_names(tenant, "semantic", "episodic")
    # Room for no owner at all: the refresh would build nothing for the user.
    assert not await OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=0).build_soon_if_wanted(
        tenant, user, 112
    )

    # The statistics count the user as the largest owner of the database, and there is room
    # for one index: its facts (60) are built, its episodes (50) passed over.
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE memory_owner_stats SET documents = 1000000000 "
                "WHERE tenant_id = :tenant AND owner_key = :key"
            ),
            {"tenant": tenant, "key": user.key},
        )
    crowded = OwnerIndexes(owner_engine, build_from=BUILD_FROM, most=1)
    assert await crowded.build_soon_if_wanted(tenant, user, 1_000_000_000)
    report = await crowded.refresh()
    assert [index.name for index in report.built] == [facts_index]
    assert episodes_index not in await index_definitions(owner_engine)
    # Until a refresh finds room for the episodes, the owner's recounts ask for none.
    assert not await crowded.build_soon_if_wanted(tenant, user, 1_000_000_000)
