"""A context reads the procedures (the live procedural memories that fill a slot) of the user
and of the organization on every request: the read seeks those few memories, however many
other memories the organization holds, and on a plan made once for the statement too."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from benchmarks.rawsql import explain_prepared
from service.auth.owner import Owner
from service.config import Settings
from service.db import tenant_transaction, transaction_driver
from service.memories.repository import MemoryRepository
from service.memories.service import PROCEDURE_SLOTS
from tests.conftest import bearer
from tests.fixtures.factories import remember_all
from tests.plans import plan_nodes, statements_sent

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
    with statements_sent(runtime_engine) as statements:
        async with tenant_transaction(sessions, tenant) as session:
            found = await MemoryRepository(session, tenant).live_procedures(
                Owner.user("ada"), Owner.org(), slots=PROCEDURE_SLOTS
            )
            read, values = next(s for s in reversed(statements) if "m.kind = " in s[0])
            driver = await transaction_driver(await session.connection())
            await driver.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            # The driver decodes the JSON document.
            plan = (await explain_prepared(driver, read, values))[0]["Plan"]

    assert sorted(memory.text for memory in found) == sorted(
        [org_style["text"], ada_safety["text"]]
    )
    # The plan seeks the procedural memories: of the organization's 400 facts, none is read
    # and then thrown away (at most the procedure outside the slots is).
    assert rows_thrown_away(plan) <= 1
    assert plan_reads_rows(plan) <= 3
