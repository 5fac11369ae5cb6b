"""`mneme bench load` end to end, at toy sizes, in its own throwaway database: the corpus grows
through the bulk path, the real service answers over loopback HTTP exactly as the bare
statement does, and the report carries every figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import TextClause, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import asyncpg

from benchmarks.cli import REFERENCE_CHOICES, main
from benchmarks.rawsql import (
    EXACT,
    REFERENCES,
    FusionStatement,
    ReferenceStatement,
    reference_statement,
    service_search_params,
)
from benchmarks.server import settings_environment
from service.config import Settings
from service.memories.fusion import SearchParams
from service.memories.schemas import SearchRequest
from tests.bench_load.chats import TOY_SCENARIO, write_chats
from tests.fixtures.bench import TOY_CORPUS

TOY = [
    "load",
    "--sizes",
    "120,240",
    *TOY_CORPUS,
    "--pool-size",
    "60",
    "--concurrency",
    "1,3",
    "--requests",
    "9",
    "--queries",
    "6",
    "--recall-queries",
    "3",
    "--api-rows",
    "30",
    "--heavy-user",
    "60",
    "--no-progress",
]


# The heavy user's 40 facts reach this; no other owner holds 34 memories of a kind. The
# settings build owner indexes only from the bounded search's size, so that is lowered with it.
OWNER_INDEX_FROM = "34"


# Builds a throwaway database and serves it from a uvicorn child process.
@pytest.mark.slow
def test_the_command_grows_the_corpus_and_measures_every_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "load.json"
    monkeypatch.setenv("MNEME_OWNER_VECTOR_INDEX_FROM", OWNER_INDEX_FROM)
    monkeypatch.setenv("MNEME_SEARCH_BOUNDED_FROM", OWNER_INDEX_FROM)

    assert main([*TOY, "--out", str(out)]) == 0

    report = json.loads(out.read_text())
    assert report["benchmark"] == "load"
    assert report["config"]["sizes"] == [120, 240]
    assert report["config"]["corpus"]["seed"] == 4
    assert report["config"]["postgres"]["hnsw.iterative_scan"] == "relaxed_order"
    first, second = report["sizes"]
    # 120 user memories = 4 users in 2 tenants, plus 3 org memories per tenant.
    assert first["bulk"]["total_rows"] == 126
    assert second["bulk"]["rows_added"] == 126
    assert second["bulk"]["total_rows"] == 252
    # The table has no vector graph of its own, and the load builds none: only the heavy user,
    # loaded with the second size, gets an index of its own (its facts'), built after the load.
    for size in (first, second):
        assert not [name for name in size["bulk"]["relation_bytes"] if name.endswith("_hnsw")]
        assert size["bulk"]["owner_index_seconds"] > 0
    assert first["bulk"]["owner_indexes_built"] == first["bulk"]["owner_index_bytes"] == 0
    [graph] = [n for n in second["bulk"]["relation_bytes"] if n.startswith("ix_memory_owner_")]
    assert second["bulk"]["owner_indexes_built"] == 1
    assert second["bulk"]["owner_index_bytes"] == second["bulk"]["relation_bytes"][graph] > 0
    bulk = second["bulk"]
    assert bulk["seconds"] == pytest.approx(
        bulk["copy_seconds"] + bulk["vacuum_analyze_seconds"] + bulk["owner_index_seconds"]
    )
    assert bulk["rows_per_second_with_owner_graphs"] == pytest.approx(126 / bulk["seconds"])
    for size in (first, second):
        for clients in ("1", "3"):
            level = size["search"][clients]
            for path in ("service", "raw_sql"):
                assert level[path]["errors"] == 0, level[path]["first_error"]
                assert level[path]["requests"] == 9
                assert level[path]["latency_ms"]["p99"] >= level[path]["latency_ms"]["p50"] > 0
            assert level["service_over_raw_p50"] > 0
        # The bare statement ranked every query exactly as the HTTP service did.
        agreement = size["agreement"]
        assert agreement["identical_top10"] == agreement["compared"] == 9
        # The corpus's users have no vector index of their own: as planned, their vectors are
        # sorted exactly.
        recall = size["recall"]
        assert set(recall) == {"queries", "pool", "as planned", "exact"}
        assert recall["exact"]["recall_at_10"] == recall["as planned"]["recall_at_10"] == 1.0
        assert recall["as planned"]["recall_at_pool"] == 1.0
        assert not any("ix_memory_owner_" in s for s in recall["as planned"]["plan"]["scans"])
        context = size["context"]
        assert context["errors"] == 0, context["first_error"]
        assert context["requests"] == 9 and context["latency_ms"]["p50"] > 0
        api = size["api_ingest"]
        assert api["stored"] == 30 and api["duplicates"] == 0
        assert api["stored_without_embedding"] == 0
    # One more user, in a tenant of their own, owning 60 memories: loaded with the last size.
    heavy = report["heavy_user"]
    assert heavy["memories"] == 60
    assert heavy["service"]["errors"] == heavy["raw_sql"]["errors"] == 0
    assert heavy["service"]["requests"] == 9
    assert heavy["agreement"]["identical_top10"] == heavy["agreement"]["compared"] == 9
    assert heavy["recall"]["exact"]["recall_at_10"] == 1.0
    assert 0 <= heavy["recall"]["HNSW strict, ef_search 200"]["recall_at_10"] <= 1
    assert set(heavy["strategies"]) == {"exact", "as planned", "HNSW strict", "HNSW relaxed"}
    assert heavy["strategies"]["exact"]["top10_shared_with_exact"] == 1.0
    # Its searches, and the strategies run on the statement the service sends for it, walk its
    # own index; the exact strategy sorts its vectors instead.
    for strategy in ("as planned", "HNSW strict"):
        assert any(graph in s for s in heavy["strategies"][strategy]["plan"]["scans"])
        assert any(graph in s for s in heavy["recall"][strategy]["plan"]["scans"])
    assert not any(graph in s for s in heavy["strategies"]["exact"]["plan"]["scans"])
    assert not any(graph in s for s in heavy["recall"]["exact"]["plan"]["scans"])
    printed = capsys.readouterr().out
    assert "### The heavy user: 60 memories of one user" in printed
    assert "| 126 | 1 |" in printed
    assert "| 252 | 3 |" in printed
    assert "### Vector-mode recall" in printed


def test_the_command_refuses_sizes_it_cannot_build(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "--sizes", "1000", "--memories-per-user", "300"]) == 2
    assert "not a multiple of 300" in capsys.readouterr().err
    assert main(["load", "--sizes", "1000", "--small-tenants", "5"]) == 2
    assert "--small-tenants belongs to the realistic scenario" in capsys.readouterr().err
    assert main(["load", "--sizes", "lots"]) == 2
    assert "cannot read corpus size" in capsys.readouterr().err
    assert main(["load", "--sizes", "600", "--memories-per-user", "300", "--pool-size", "200"]) == 2
    assert "--pool-size" in capsys.readouterr().err


def test_the_server_process_gets_exactly_the_benchmarks_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(
        _env_file=None,
        database_url=SecretStr("postgresql://app@/db?host=/tmp"),
        jwt_hs256_secret=SecretStr("s" * 40),
        rate_limit_enabled=False,
        jwt_algorithms=["HS256"],
    )
    monkeypatch.setenv("MNEME_JWKS_URL", "https://stale.invalid/jwks")

    environment = settings_environment(settings)

    for name in [n for n in environment if n.startswith("MNEME_")]:
        monkeypatch.setenv(name, environment[name])
    monkeypatch.delenv("MNEME_JWKS_URL")
    assert "MNEME_JWKS_URL" not in environment
    assert Settings(_env_file=None) == settings


REALISTIC_TOY = [
    "load",
    "--scenario",
    "realistic",
    *TOY_SCENARIO,
    "--concurrency",
    "1,3",
    "--requests",
    "9",
    "--queries",
    "6",
    "--recall-queries",
    "4",
    "--never-seen-queries",
    "3",
    "--api-rows",
    "30",
    "--no-progress",
]


@pytest.mark.slow
def test_the_realistic_scenario_loads_owners_among_others_and_measures_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "realistic.json"
    chats = write_chats(tmp_path / "chats.json")

    arguments = [*REALISTIC_TOY, "--small-tenants", "3", "--dataset", str(chats), "--out", str(out)]
    assert main(arguments) == 0

    report = json.loads(out.read_text())
    assert report["scenario"] == "realistic"
    assert report["config"]["measurement"]["reference"] == "exact"
    first, second = report["sizes"]
    # 60 memories of the owner, 20 of its organization, 4 other users of 30 in its tenant; the
    # first size brings the 3 small tenants too: 4 users of 40 and 5 of the organization's.
    assert first["bulk"]["rows_added"] == 60 + 20 + 4 * 30 + 3 * (4 * 40 + 5)
    assert first["bulk"]["tenants_added"] == 1 + 3
    # 120: the owner, 20, 4 neighbours and 4 more users in 2 tenants with 3 org memories each.
    assert second["bulk"]["rows_added"] == 120 + 20 + 8 * 30 + 2 * 3
    assert (
        second["bulk"]["total_rows"] == first["bulk"]["total_rows"] + second["bulk"]["rows_added"]
    )
    for size, memories in ((first, 60), (second, 120)):
        assert size["owner"]["memories"] == memories
        assert size["owner"]["threads"] > 0
        for clients in ("1", "3"):
            level = size["search"][clients]
            assert level["errors"] == 0, level["first_error"]
            assert level["requests"] == 9 and level["latency_ms"]["p50"] > 0
        never_seen = size["never_seen_search"]
        assert never_seen["errors"] == 0 and never_seen["requests"] == 3
        assert size["context"]["errors"] == 0 and size["context"]["requests"] == 9
        assert size["raw_sql"]["errors"] == 0
        # No owner holds enough memories of a kind for an index of its own (the load built
        # none), so the statement the service runs is exact here: the reference ranks the same
        # top 10.
        assert size["bulk"]["owner_indexes_built"] == size["bulk"]["owner_index_bytes"] == 0
        assert size["recall"]["queries"] == 4
        assert size["recall"]["recall_at_10"] == 1.0
        # So are a context's sections, each against the reference on its own filter.
        sections = size["context_recall"]["sections"]
        assert size["context_recall"]["queries"] == 4
        assert list(sections) == ["org", "facts", "episodes"]
        assert all(section["recall_at_10"] == 1.0 for section in sections.values())
        api = size["api_ingest"]
        assert api["stored"] == 30 and api["duplicates"] == 0
        assert api["stored_without_embedding"] == 0
    printed = capsys.readouterr().out
    assert "## Load, realistic scenario: owners of 60, 120 memories" in printed
    assert "| 60 | 695 |" in printed and "| 120 | 1,081 |" in printed
    assert "3 small tenants (4 users of 40 memories, 5 of the organization's)" in printed
    assert "context sections R@10 (org / facts / episodes)" in printed
    assert "| 1.000 / 1.000 / 1.000 |" in printed


def test_the_realistic_scenario_says_where_to_get_its_text_when_it_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.json"

    assert main(["load", "--scenario", "realistic", "--dataset", str(missing)]) == 2

    error = capsys.readouterr().err
    assert str(missing) in error and "CC BY-NC" in error and "--dataset PATH" in error
    assert main(["load", "--scenario", "realistic", "--heavy-user", "10k"]) == 2
    assert "--heavy-user belongs to the synthetic scenario" in capsys.readouterr().err


def test_every_reference_the_command_offers_is_one_the_benchmark_knows() -> None:
    assert tuple(REFERENCES) == REFERENCE_CHOICES
    with pytest.raises(ValueError, match="unknown reference ranking"):
        reference_statement("approximate", postgresql.dialect())


async def test_a_reference_ranks_with_the_statement_its_builder_makes() -> None:
    def build(tenant_id: str, params: SearchParams) -> TextClause:
        return text("SELECT id FROM memory WHERE tenant_id = :tenant LIMIT :limit").bindparams(
            tenant=tenant_id, limit=params.limit
        )

    params = await service_search_params(
        Settings(_env_file=None), "t-x", "alice", SearchRequest(query="tea?", limit=7), [0.1] * 384
    )
    reference = ReferenceStatement("frozen", FusionStatement(asyncpg.dialect(), build), EXACT)

    assert reference.arguments("t-x", params) == ["t-x", 7]
    assert reference.statement.sql.startswith("SELECT id FROM memory WHERE tenant_id = $1")
    assert reference_statement("exact", asyncpg.dialect()).variant == EXACT
