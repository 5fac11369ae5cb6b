"""On Citus a search's statement goes to the tenant's shard whole: it reads no table of the
coordinator's catalog (the owners' own indexes are looked up before it), so Citus plans it as one
router query instead of planning each of its CTEs apart and passing their results on."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient

from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.filters import MemoryFilter
from service.memories.fusion import FusionRepository
from service.memories.fusion.statement import compiled_search
from tests.conftest import bearer, new_tenant
from tests.fixtures.factories import remember_all, remember_texts
from tests.memories.test_bounded_search import corpus
from tests.search_params import search_params

pytestmark = pytest.mark.citus

QUESTION = "what does the user like to play"


async def test_a_search_and_a_sectioned_search_are_each_one_router_query_on_citus(
    citus_app: FastAPI, citus_client: AsyncClient, citus_settings: Settings
) -> None:
    tenant = new_tenant()
    headers = bearer(citus_settings, tenant, "ada")
    await remember_texts(citus_client, headers, corpus(5, 30))
    admin = bearer(citus_settings, tenant, "admin", admin=True)
    await remember_all(
        citus_client, admin, {"text": "The team likes to play chess at lunch"}, org=True
    )

    user_and_org = search_params(MemoryFilter.build([Owner.user("ada"), Owner.org()]), QUESTION)
    user_alone, org_alone = (
        search_params(MemoryFilter.build([owner]), QUESTION)
        for owner in (Owner.user("ada"), Owner.org())
    )
    messages: list[str] = []
    async with tenant_transaction(citus_app.state.mneme.sessionmaker, tenant) as session:
        # The asyncpg connection itself: its notices reach a listener.
        driver: Any = await transaction_driver(await session.connection())
        driver.add_log_listener(lambda _connection, message: messages.append(message.message))
        await driver.execute("SET LOCAL client_min_messages = debug2")
        repository = FusionRepository(session, tenant)
        searched = [row.memory.id for row in await repository.search(user_and_org)]
        sectioned = await repository.search_sections([user_alone, org_alone])
        await driver.execute("SET LOCAL client_min_messages = notice")
        # The statement alone, without the question about its owners before it: it names no
        # catalog table, whatever the server.
        compiled, arguments = compiled_search(
            tenant, [user_and_org], (await session.connection()).dialect
        )
        assert "pg_class" not in compiled.sql
        statement_alone = [row["id"] for row in await driver.fetch(compiled.sql, *arguments)]

    # Citus's own account of its planning: every statement routed to the tenant's shard, none
    # split into subplans (a statement that read the coordinator's catalog beside the
    # distributed tables was planned as twenty, one per CTE), nor any of the queries before
    # it (the owners' counts go to the shard, their indexes are the coordinator's catalog
    # alone). A statement the connection prepared before may reuse its plan unannounced.
    assert not [message for message in messages if message.startswith("generating subplan")]
    assert not [message for message in messages if "Local tables" in message]
    routed = [message for message in messages if message == "Creating router plan"]
    assert len(routed) >= 2, messages
    # The same hits as the statement alone, and each section its own owner's.
    assert len(searched) == 10
    assert searched == statement_alone
    assert sectioned[0] and sectioned[1]
    assert all(row.memory.user_id == "ada" for row in sectioned[0])
    assert all(row.memory.scope == "org" for row in sectioned[1])
