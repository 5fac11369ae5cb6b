"""A candidate's neighbours in its thread are found from the index of the thread's turns at the
candidate: the memory's time is the stored `happened_at` (its event time, else when it was
recorded), whose comparison the planner uses as an index condition under row-level security."""

from __future__ import annotations

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from service.memories.fusion import HYBRID_SEARCH_SQL
from tests.conftest import as_tenant, bearer
from tests.fixtures.factories import remember_all
from tests.memories.sessions import new_source_thread

NEIGHBOUR_BEFORE_SQL = """
SELECT m.id FROM memory m
 WHERE m.tenant_id = :tenant AND m.source_thread_id = CAST(:thread AS uuid)
   AND m.kind = 'episodic'
   AND (m.happened_at, m.id) < (now(), CAST(:id AS uuid))
 ORDER BY m.happened_at DESC, m.id DESC
 LIMIT 1
"""
"""The shape of the fusion statement's look-up of the memory before a candidate."""


async def test_happened_at_is_the_event_time_else_the_time_recorded(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "ada")
    batch = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={
            "items": [
                {"text": "Met Lena in Porto", "event_at": "2023-05-07T10:00:00Z"},
                {"text": "Prefers green tea"},
            ]
        },
    )
    assert batch.status_code == 201, batch.text
    first = batch.json()["items"][0]["id"]
    moved = await client.patch(
        f"/v1/users/me/memories/{first}", headers=headers, json={"event_at": "2024-01-02T03:04:05Z"}
    )
    assert moved.status_code == 200, moved.text
    async with owner_engine.begin() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT text, happened_at = coalesce(event_at, created_at), "
                    "to_char(happened_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM memory "
                    "WHERE tenant_id = :tenant ORDER BY text"
                ),
                {"tenant": tenant},
            )
        ).all()
    assert [(row[0], row[1]) for row in rows] == [
        ("Met Lena in Porto", True),
        ("Prefers green tea", True),
    ]
    assert rows[0][2] == "2024-01-02"


async def test_the_neighbour_look_up_starts_at_the_candidate_under_row_level_security(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
    owner_engine: AsyncEngine,
) -> None:
    # The statement's own look-up has this shape (the comparison on the stored column, among
    # the thread's turns).
    assert "(m.happened_at, m.id) < (c.happened_at, c.id)" in HYBRID_SEARCH_SQL
    assert "m.source_thread_id = c.thread_id AND m.kind = 'episodic'" in HYBRID_SEARCH_SQL
    headers = bearer(settings, tenant, "ada")
    thread = await new_source_thread(client, headers)
    # Facts drawn from the thread, and the table's statistics counted: the index of every
    # memory of the thread then holds what the turns' index leaves out (on a table without
    # them the two cost the planner the same, and it may take either).
    facts = [{"text": f"User mentioned fact {n}.", "source_thread_id": thread} for n in range(200)]
    await remember_all(client, headers, *facts[:100])
    await remember_all(client, headers, *facts[100:])
    async with owner_engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE memory"))
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        await connection.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in await connection.execute(
                text("EXPLAIN " + NEIGHBOUR_BEFORE_SQL),
                {"tenant": tenant, "thread": thread, "id": "00000000-0000-0000-0000-000000000000"},
            )
        )
    # The index of the thread's turns alone: a look-up from a fact never steps over facts.
    assert "ix_memory_thread_turns" in plan, plan
    index_condition = next(line for line in plan.splitlines() if "Index Cond" in line)
    assert "happened_at" in index_condition, plan
