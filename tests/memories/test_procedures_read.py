"""A context reads the procedures (the live procedural memories that fill a slot) of the user
and of the organization on every request: the read seeks those few memories, however many
other memories the organization holds, and on a plan made once for the statement too. It runs
on the driver, and finds exactly what the session's read of the same slots finds."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from benchmarks.rawsql import explain_prepared
from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.repository import MemoryRepository, ProcedureRow
from service.memories.slots import PROCEDURE_SLOTS
from tests.conftest import bearer
from tests.fixtures.factories import remember_all
from tests.plans import plan_nodes

ORGANIZATION_FACTS = 400


def rows_thrown_away(plan: dict[str, Any]) -> int:
    """The rows the plan's scans read and then removed by a filter or a recheck."""
    return sum(
        int(node.get("Rows Removed by Filter", 0))
        + int(node.get("Rows Removed by Index Recheck", 0))
        for node in plan_nodes(plan)
    )


def plan_reads_rows(plan: dict[str, Any]) -> int:
    """The rows the plan's index scans return, before any filter on the table's rows."""
    return sum(
        int(node["Actual Rows"]) for node in plan_nodes(plan) if "Index Scan" in node["Node Type"]
    )


async def test_the_procedures_read_seeks_only_procedural_memories_on_a_generic_plan(
    client: Any,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada = bearer(settings, tenant, "ada")
    admin = bearer(settings, tenant, "root", admin=True)
    facts = [{"text": f"The team keeps note {n} in the shared wiki"} for n in range(100)]
    for start in range(0, ORGANIZATION_FACTS, len(facts)):
        await remember_all(
            client, admin, *({"text": f"{f['text']} ({start})"} for f in facts), org=True
        )
    org_style = {"kind": "procedural", "category": "style", "text": "Answer in British English"}
    await remember_all(client, admin, org_style, org=True)
    ada_safety = {"kind": "procedural", "category": "safety", "text": "Never share my address"}
    ada_note = {"kind": "procedural", "category": "notes", "text": "Not a slot: never read"}
    await remember_all(client, ada, ada_safety, ada_note)
    async with owner_engine.begin() as connection:
        await connection.exec_driver_sql("ANALYZE memory")

    sessions = async_sessionmaker(runtime_engine, expire_on_commit=False)
    async with tenant_transaction(sessions, tenant) as session:
        # The asyncpg connection itself: its query loggers are not part of `Driver`.
        driver: Any = await transaction_driver(await session.connection())
        sent: list[Any] = []
        driver.add_query_logger(sent.append)
        found = await MemoryRepository(session, tenant).procedure_rows(
            Owner.user("ada"), Owner.org(), slots=PROCEDURE_SLOTS
        )
        await asyncio.sleep(0)  # the driver reports a query on the loop's next turn
        driver.remove_query_logger(sent.append)
        # The read went to the driver, its values bound (the same text for every user).
        [read] = [query for query in sent if "m.kind = 'procedural'" in query.query]
        assert "ada" not in read.query and tenant not in read.query
        await driver.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        # The driver decodes the JSON document.
        plan = (await explain_prepared(driver, read.query, read.args))[0]["Plan"]

    assert sorted(row.text for row in found) == sorted([org_style["text"], ada_safety["text"]])
    # The plan seeks the procedural memories: of the organization's 400 facts, none is read
    # and then thrown away (at most the procedure outside the slots is).
    assert rows_thrown_away(plan) <= 1
    assert plan_reads_rows(plan) <= 3


async def test_the_driver_read_of_the_slots_finds_what_the_sessions_read_finds(
    client: Any,
    settings: Settings,
    owner_engine: AsyncEngine,
    runtime_engine: AsyncEngine,
    tenant: str,
) -> None:
    ada, bo = bearer(settings, tenant, "ada"), bearer(settings, tenant, "bo")
    admin = bearer(settings, tenant, "root", admin=True)
    procedure = {"kind": "procedural"}
    await remember_all(
        client,
        ada,
        {**procedure, "category": "style", "text": "Answer in short paragraphs"},
        {**procedure, "category": "workflow", "text": "Superseded: ask before booking"},
        {**procedure, "category": "safety", "text": "Expired: never mention the trip"},
        {**procedure, "category": "notes", "text": "A procedure outside the slots"},
        {"kind": "semantic", "category": "task_policies", "text": "A fact, not a procedure"},
    )
    await remember_all(client, bo, {**procedure, "category": "workflow", "text": "Bo's own"})
    refunds = {**procedure, "category": "task_policies", "text": "Log every refund"}
    await remember_all(client, admin, refunds, org=True)
    async with owner_engine.begin() as connection:
        await connection.exec_driver_sql(
            "UPDATE memory SET lifecycle = 'superseded' WHERE text LIKE 'Superseded:%'"
        )
        await connection.exec_driver_sql(
            "UPDATE memory SET expires_at = now() - interval '1 minute' WHERE text LIKE 'Expired:%'"
        )

    sessions = async_sessionmaker(runtime_engine, expire_on_commit=False)
    async with tenant_transaction(sessions, tenant) as session:
        repository = MemoryRepository(session, tenant)
        owners = (Owner.user("ada"), Owner.org())
        on_driver = await repository.procedure_rows(*owners, slots=PROCEDURE_SLOTS)
        in_session = await repository.live_procedures(*owners, slots=PROCEDURE_SLOTS)

    assert sorted((row.scope, row.category, row.text) for row in on_driver) == [
        ("org", "task_policies", "Log every refund"),
        ("user", "style", "Answer in short paragraphs"),
    ]
    assert sorted(on_driver) == sorted(ProcedureRow.of(memory) for memory in in_session)
