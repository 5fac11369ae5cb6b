"""`mneme bench cluster` at a toy size against the Citus cluster: the same corpus in the cluster
and in a throwaway single node ranks the same memories, the coordinator sends each search to
one shard, and the run leaves none of its tenants behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.cli import main
from tests.fixtures.bench import TOY_CORPUS

pytestmark = pytest.mark.citus

TOY = [
    "--size",
    "120",
    *TOY_CORPUS,
    "--pool-size",
    "60",
    "--concurrency",
    "1,2",
    "--rounds",
    "2",
    "--requests-per-round",
    "4",
    "--queries",
    "6",
    "--explains",
    "3",
    "--no-progress",
]


async def _bench_tenants(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        found = await connection.execute(
            text("SELECT count(*) FROM tenant WHERE id LIKE 'bench-cluster-%'")
        )
        return int(found.scalar_one())


async def test_the_cluster_benchmark_compares_the_same_corpus_on_citus_and_one_node(
    citus_urls: dict[str, str],
    citus_owner_engine: AsyncEngine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = await _bench_tenants(citus_owner_engine)
    out = tmp_path / "cluster.json"
    arguments = [
        "cluster",
        "--database-url",
        citus_urls["MNEME_CITUS_APP_URL"],
        "--migration-database-url",
        citus_urls["MNEME_CITUS_OWNER_URL"],
        *TOY,
        "--out",
        str(out),
    ]

    # The command runs its own event loop, so it runs in a thread of its own.
    assert await asyncio.to_thread(main, arguments) == 0

    report = json.loads(out.read_text())
    single, cluster = report["sides"]["single node"], report["sides"]["given database"]
    assert single["topology"]["citus"] is None
    assert cluster["topology"]["citus"].startswith("14.")
    assert cluster["topology"]["workers"] == 2
    # 120 user memories = 4 users in 2 tenants, plus 3 org memories per tenant, on both sides.
    assert single["load"]["total_rows"] == cluster["load"]["total_rows"] == 126
    # The run builds the largest owners' own vector indexes after its load on the throwaway
    # single node, never on the given database.
    assert "hnsw_build_seconds" not in single["load"]
    assert single["load"]["owner_index_seconds"] > 0
    assert isinstance(single["load"]["owner_indexes_built"], int)
    assert cluster["load"]["owner_index_seconds"] == 0
    assert cluster["load"]["owner_indexes_built"] == 0
    for side in (single, cluster):
        for path in ("service", "raw_sql"):
            for clients in ("1", "2"):
                figures = side["search_ms"][path][clients]
                assert figures["errors"] == 0, figures["first_error"]
                assert figures["requests"] == 8
                assert figures["p95"] >= figures["p50"] > 0
        assert side["transaction_floor_ms"]["p50"] > 0
        assert side["explain"]["explained"] == 3
    # Router-planned: every search of one tenant went to exactly one shard.
    assert cluster["explain"]["citus"]["task_counts"] == [1]
    assert cluster["explain"]["citus"]["shard_execution_ms"] > 0
    assert report["identical_top10"] == {"compared": 6, "identical": 6}
    assert "Identical top 10 on both databases: 6 of 6 questions." in capsys.readouterr().out
    assert await _bench_tenants(citus_owner_engine) == before
