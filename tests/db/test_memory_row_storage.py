"""A memory's vector is stored in its row, not moved out of line: an exact distance reads the
row once; and a memory of any allowed length can be written."""

from __future__ import annotations

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.config import Settings
from tests.conftest import bearer
from tests.fixtures.factories import remember

STORAGE_SQL = text(
    """
SELECT pg_column_size(m.*) AS row_bytes,
       pg_column_toast_chunk_id(m.embedding) IS NOT NULL AS vector_out_of_line
  FROM memory m
 WHERE m.tenant_id = :tenant_id AND m.id = CAST(:memory_id AS uuid)
"""
)


async def _storage(owner_engine: AsyncEngine, tenant: str, memory_id: str) -> dict[str, object]:
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(STORAGE_SQL, {"tenant_id": tenant, "memory_id": memory_id})
        ).one()
    return dict(row._mapping)


async def test_a_memory_of_a_sentence_keeps_its_vector_in_its_row(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    headers = bearer(settings, tenant, "row-storage")
    # A fact with a tsvector of a dozen lexemes: over PostgreSQL's default 2 KB row target with
    # its vector, which would then have been moved out of line.
    sentence = (
        "User shared: we drove along the coast to Porto for my sister's birthday, stopped at "
        "every bakery on the way, and came back with far too many pastéis de nata and a "
        "sunburn, talking about moving there one day; the kids want a dog, and a garden."
    )
    memory = await remember(client, headers, user="row-storage", text=sentence)

    stored = await _storage(owner_engine, tenant, memory["id"])

    assert int(str(stored["row_bytes"])) > 2032
    assert stored["vector_out_of_line"] is False


async def test_a_long_memory_of_varied_words_is_stored_and_found(
    client: AsyncClient, settings: Settings, owner_engine: AsyncEngine, tenant: str
) -> None:
    """Its tsvector is larger than a B-tree entry can hold even compressed: no index may
    carry it (writing such a memory was a 500)."""
    headers = bearer(settings, tenant, "row-storage")
    # 4,000 characters of words that do not repeat, so they compress poorly.
    words = [f"w{n * 7919 % 100_003:x}q" for n in range(600)]
    long_text = " ".join(words)[:4000]
    memory = await remember(client, headers, user="row-storage", text=long_text)

    stored = await _storage(owner_engine, tenant, memory["id"])
    found = await client.post(
        "/v1/users/row-storage/memories/search",
        headers=headers,
        json={"query": words[300], "mode": "lexical"},
    )

    assert stored["vector_out_of_line"] is False
    assert found.status_code == 200, found.text
    assert [hit["memory"]["id"] for hit in found.json()["hits"]] == [memory["id"]]
