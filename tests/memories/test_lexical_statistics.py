"""BM25's collection statistics come from the stored `tsv_length`: it must equal `length(tsv)`
for every memory however it was written, and one index must be able to serve the statistics
and the lexical matches of any search filter without reading the table."""

from __future__ import annotations

import re

import pytest
from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.memories.fusion import COLLECTION_SQL, LEXICAL_MATCHES_SQL
from tests.conftest import as_tenant, bearer
from tests.memories.test_search import bm25_scores
from tests.search_params import filter_with_every_condition

TEXTS = [
    "Her sister Lena lives in Lisbon and visits her sister in Porto every summer",
    "Prefers green tea",
    "Allergic to peanuts, shellfish and, since last year, to walnuts as well",
    "the a an of",
]


async def _lengths(owner_engine: AsyncEngine, tenant: str) -> list[tuple[str, int, int]]:
    async with owner_engine.begin() as connection:
        rows = await connection.execute(
            text(
                "SELECT text, tsv_length, length(tsv) FROM memory WHERE tenant_id = :tenant "
                "ORDER BY text"
            ),
            {"tenant": tenant},
        )
        return [(row[0], row[1], row[2]) for row in rows]


async def test_the_stored_length_is_the_tsvector_length_after_every_kind_of_write(
    client: AsyncClient, settings: Settings, tenant: str, owner_engine: AsyncEngine
) -> None:
    headers = bearer(settings, tenant, "ada")
    batch = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": value} for value in TEXTS]},
    )
    assert batch.status_code == 201, batch.text
    keyed = await client.put(
        "/v1/users/me/keyed-memories",
        params={"kind": "semantic", "key": "diet"},
        headers=headers,
        json={"text": "Vegetarian on weekdays"},
    )
    assert keyed.status_code == 201, keyed.text
    first = batch.json()["items"][1]["id"]
    changed = await client.patch(
        f"/v1/users/me/memories/{first}",
        headers=headers,
        json={"text": "Prefers green tea, black coffee and sparkling water in the morning"},
    )
    assert changed.status_code == 200, changed.text

    lengths = await _lengths(owner_engine, tenant)
    assert len(lengths) == len(TEXTS) + 1
    assert all(stored == computed for _, stored, computed in lengths), lengths
    by_text = {value: stored for value, stored, _ in lengths}
    # The rewritten memory was recomputed (three lexemes before); a text of stop words only
    # has none.
    assert by_text["Prefers green tea, black coffee and sparkling water in the morning"] == 8
    assert by_text["the a an of"] == 0


@pytest.mark.parametrize(
    ("fragment", "read_from_rows"), [(COLLECTION_SQL, set()), (LEXICAL_MATCHES_SQL, {"tsv"})]
)
async def test_the_lexical_side_of_any_filter_reads_only_the_tsvector_from_the_rows(
    owner_engine: AsyncEngine, tenant: str, fragment: str, read_from_rows: set[str]
) -> None:
    """The statistics are an index-only scan; the matches read each candidate's tsvector from
    its row (no B-tree entry can hold a long memory's tsvector), every condition from the
    index."""
    # Every condition a filter can set, so the index must carry every column they test.
    memory_filter = filter_with_every_condition([Owner.user("ada"), Owner.org()])
    where = memory_filter.where(tenant).sql
    sql = (
        fragment.replace("{section}", "0")
        .replace("{candidate_filter}", where)
        .replace("{collected_filter}", where)
        .replace("{collected}", "memory")
    )
    read = set(re.findall(r"\bm\.(\w+)", sql))
    async with owner_engine.begin() as connection:
        indexed = set(
            (
                await connection.execute(
                    text(
                        "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                        "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                        "WHERE i.indexrelid = 'ix_memory_lexical'::regclass"
                    )
                )
            ).scalars()
        )
    # An index-only scan is possible exactly when the index holds every column read.
    assert {"tenant_id", "user_id", "scope", "tsv_length", "happened_at"} <= read
    assert read - indexed == read_from_rows


async def test_a_filters_conditions_are_the_lexical_indexs_keys_in_the_order_they_narrow(
    owner_engine: AsyncEngine,
) -> None:
    """The owner first, then what a filter narrows an owner's memories by (kind, lifecycle,
    category, event time): each can be an index condition under row-level security (plain
    columns, leakproof comparisons), so a filter to one category or one month finds its
    memories without reading the owner's others (`COUNT_PASSING_SQL`)."""
    async with owner_engine.connect() as connection:
        keys = (
            await connection.execute(
                text(
                    "SELECT array_agg(a.attname ORDER BY k.position) "
                    "FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey[0:i.indnkeyatts - 1]) "
                    "WITH ORDINALITY AS k(attnum, position) "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                    "WHERE i.indexrelid = 'ix_memory_lexical'::regclass"
                )
            )
        ).scalar_one()
    assert keys == [
        "tenant_id",
        "scope",
        "user_id",
        "kind",
        "lifecycle",
        "category",
        "happened_at",
    ]


async def test_lexical_scores_are_bm25_with_repeated_terms_and_stored_lengths(
    client: AsyncClient, settings: Settings, tenant: str, runtime_engine: AsyncEngine
) -> None:
    # Term frequencies above one (sister twice, tea three times) and lengths that differ, so
    # a wrong frequency or length changes the scores.
    texts = [*TEXTS, "Tea, more tea and green tea for her sister", "Lena drinks tea"]
    headers = bearer(settings, tenant, "ada")
    batch = await client.post(
        "/v1/users/me/memories/batch",
        headers=headers,
        json={"items": [{"text": value} for value in texts]},
    )
    assert batch.status_code == 201, batch.text
    query = "sister tea Porto"
    response = await client.post(
        "/v1/users/me/memories/search",
        headers=headers,
        json={"query": query, "mode": "lexical", "limit": 10},
    )
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    async with runtime_engine.begin() as connection:
        await as_tenant(connection, tenant)
        expected = await bm25_scores(connection, texts, query)
    found = {hit["memory"]["text"]: hit["scores"]["lexical_score"] for hit in hits}
    assert found.keys() == expected.keys()
    for value, score in found.items():
        assert score == pytest.approx(expected[value], rel=1e-9), value
