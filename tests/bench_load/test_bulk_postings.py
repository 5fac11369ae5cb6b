"""The bulk path writes the search's postings of the memories COPY loaded: the same postings the
service's write path writes, found before any is written, so a first load does not test each
memory against the postings the same insert is writing."""

from __future__ import annotations

import re
from typing import Any

from httpx import AsyncClient
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.bulk import WRITE_MISSING_POSTINGS_SQL
from benchmarks.rawsql import asyncpg_connection
from service.config import Settings
from tests.conftest import bearer

POSTINGS_OF_TENANT = """
SELECT memory_id, owner_key, lexeme, impact FROM memory_posting
 WHERE tenant_id = $1 ORDER BY memory_id, lexeme
"""


async def test_the_postings_of_loaded_memories_are_those_the_write_path_writes(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "ada", service=True)
    items = [
        {"text": "User plays the violin on Sunday mornings."},
        {"text": "User shared: the violin teacher moved to Lisbon.", "kind": "episodic"},
        {"text": "User likes chess, and chess likes nobody back."},
    ]
    stored = await client.post(
        "/v1/users/ada/memories/batch", headers=headers, json={"items": items}
    )
    assert stored.status_code == 201, stored.text
    organization = await client.post(
        "/v1/org/memories",
        headers=bearer(settings, tenant, "admin-1", admin=True),
        json={"text": "The team ships on Thursdays."},
    )
    assert organization.status_code == 201, organization.text

    async with owner_engine.connect() as connection:
        driver = await asyncpg_connection(connection)
        written: list[Any] = await driver.fetch(POSTINGS_OF_TENANT, tenant)
        assert {row["owner_key"] for row in written} == {"user:ada", "org:"}
        # What COPY leaves behind: the memories without their postings. Undone afterwards, so
        # no other memory of the database keeps postings this wrote.
        transaction = driver.transaction()
        await transaction.start()
        try:
            await driver.execute("DELETE FROM memory_posting WHERE tenant_id = $1", tenant)
            *find_missing, insert = WRITE_MISSING_POSTINGS_SQL
            for statement in find_missing:
                await driver.execute(statement)
            explained = await driver.fetch(f"EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) {insert}")
            plan = "\n".join(row[0] for row in explained)
            rewritten = await driver.fetch(POSTINGS_OF_TENANT, tenant)
        finally:
            await transaction.rollback()

    assert [tuple(row) for row in rewritten] == [tuple(row) for row in written]
    # The memories without postings are read once (not once per memory: quadratic in a load),
    # and the insert reads no posting.
    scans = re.findall(r"Scan on memory_without_postings .*loops=(\d+)", plan)
    assert scans == ["1"], plan
    assert "memory_posting " not in plan.replace("Insert on memory_posting ", ""), plan
