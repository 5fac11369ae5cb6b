"""`python -m benchmarks.scripts.statement_replay`: two code versions' fusion statements replayed
on one kept database of the realistic scenario, timed, and their rows compared."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.rawsql import asyncpg_connection
from benchmarks.scripts.statement_replay import (
    CLUSTER_DIR,
    MANIFEST,
    _buffers_touched,
    asked_with,
    hits_share,
    main,
    parse_version,
    question_ratios,
    run_order,
)
from service.config import Settings
from service.embedded_postgres import OWNER_ROLE, EmbeddedCluster, bootstrap
from tests.bench_load.chats import TOY_SCENARIO, write_chats
from tests.bench_load.replay_report import table_rows as report_rows

REPOSITORY = Path(__file__).resolve().parents[2]

TOY = [*TOY_SCENARIO, "--questions", "4", "--passes", "1"]


def table_rows(printed: str) -> dict[tuple[str, str], list[str]]:
    """The report's rows by (size, version): the p50, the change, the rows that agree, the
    share of the first version's hits returned, the shared buffers touched, the spread of the
    time per statement against the first version's."""
    return report_rows(printed, 8)


@pytest.mark.slow
def test_versions_are_timed_on_one_kept_database_and_their_rows_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chats = write_chats(tmp_path / "chats.json")
    data = tmp_path / "replay"
    versions = [
        "--tree",
        f"first={REPOSITORY}",
        "--tree",
        f"again={REPOSITORY}",
        # A setting that changes what a search returns: the neighbours lend no evidence.
        "--env",
        f"alone={REPOSITORY}:MNEME_SEARCH_NEIGHBOUR_WEIGHT=0",
    ]
    arguments = [*TOY, "--dataset", str(chats), "--data", str(data), *versions]

    assert main(arguments) == 0
    first_report = table_rows(capsys.readouterr().out)
    manifest = json.loads((data / MANIFEST).read_text())
    assert manifest["sizes"] == ["60", "120"]
    assert [len(manifest["questions"][size]) for size in ("60", "120")] == [4, 4]
    for size in ("60", "120"):
        assert float(first_report[(size, "first")][0]) > 0
        # The same code compiles the same statements: the same rows for every question.
        assert first_report[(size, "again")][2] == "4/4"
        assert first_report[(size, "again")][3] == "1.000"
        # ... which touch the same buffers: the work is counted, not timed.
        first_buffers = int(first_report[(size, "first")][4])
        assert first_buffers > 0
        assert first_report[(size, "again")][4] == f"{first_buffers} (+0.0%)"
        # The spread of its time per statement: for the versions after the first only.
        assert first_report[(size, "first")][5] == ""
        low, high = (float(each) for each in first_report[(size, "again")][5].split(" / "))
        assert 0 < low <= high
    # Without the neighbours' evidence some question ranks differently.
    assert any(first_report[(size, "alone")][2] != "4/4" for size in ("60", "120"))
    assert all(0 <= float(first_report[(size, "alone")][3]) <= 1 for size in ("60", "120"))

    # A second run reuses the database: nothing is loaded again.
    loaded_at = (data / MANIFEST).stat().st_mtime_ns
    assert main([*arguments, "--what", "context"]) == 0
    assert (data / MANIFEST).stat().st_mtime_ns == loaded_at
    context_report = table_rows(capsys.readouterr().out)
    assert context_report[("120", "again")][2] == "4/4"

    # A filter in every search's body, each statement as a process's first search sends it:
    # nothing passes the filter, so its statements touch fewer buffers than the unfiltered.
    nothing_passes = ["--body", '{"categories": ["no-such-category"]}', "--first-search"]
    assert main([*arguments, *nothing_passes]) == 0
    filtered = table_rows(capsys.readouterr().out)
    assert filtered[("120", "again")][2] == "4/4"
    assert int(filtered[("120", "first")][4]) < int(first_report[("120", "first")][4])

    # Other sizes need a database of their own.
    other_sizes = [*arguments, "--sizes", "60"]
    assert main(other_sizes) == 2
    assert "holds the sizes 60,120" in capsys.readouterr().err
    # So does a database among many small tenants.
    assert main([*arguments, "--small-tenants", "10"]) == 2
    assert "among 0 small tenants, not 60,120 among 10" in capsys.readouterr().err


@pytest.mark.slow
def test_a_scenario_loaded_into_a_server_of_ones_own_is_replayed_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: EmbeddedCluster
) -> None:
    """A database of the caller's (here: another database of the tests' cluster, made as for
    any PostgreSQL the service runs on) holds the scenario, and every later run on that
    `--data` replays there."""
    database = "replay_" + uuid.uuid4().hex[:8]
    asyncio.run(bootstrap(cluster, database))
    runtime, owner = (
        cluster.url(Settings().db_runtime_role, database),
        cluster.url(OWNER_ROLE, database),
    )
    data = tmp_path / "replay"
    versions = ["--tree", f"first={REPOSITORY}", "--tree", f"again={REPOSITORY}"]
    chats = write_chats(tmp_path / "chats.json")
    arguments = [*TOY, "--dataset", str(chats), "--data", str(data), *versions]

    # Half of the pair of URLs is refused, before anything is loaded.
    assert main([*arguments, "--database-url", runtime]) == 2
    assert "give both" in capsys.readouterr().err
    assert main([*arguments, "--database-url", runtime, "--migration-database-url", owner]) == 0
    report = table_rows(capsys.readouterr().out)
    assert report[("120", "again")][2] == "4/4"
    # No embedded cluster under --data: the scenario's memories are in that database.
    assert not (data / CLUSTER_DIR).exists()
    assert asyncio.run(_memories_in(owner)) > 0

    # A later run on that --data replays there without naming it...
    assert main([*arguments, "--what", "context"]) == 0
    assert table_rows(capsys.readouterr().out)[("120", "again")][2] == "4/4"
    assert not (data / CLUSTER_DIR).exists()
    # ... and naming another database is refused.
    elsewhere = cluster.url(Settings().db_runtime_role, "elsewhere")
    assert main([*arguments, "--database-url", elsewhere]) == 2
    assert "loaded elsewhere" in capsys.readouterr().err


async def _memories_in(owner_url: str) -> int:
    connection = await asyncpg.connect(owner_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        count: int = await connection.fetchval("SELECT count(*) FROM memory")
    finally:
        await connection.close()
    return count


def test_a_suffix_asks_every_question_about_a_time_and_keeps_its_vector() -> None:
    questions = {
        "1k": [{"text": "What does the user play?", "embedding": [0.5]}],
        "10k": [{"text": "tea", "embedding": [0.25]}],
    }
    assert asked_with(questions, " last month?") == {
        "1k": [{"text": "What does the user play last month?", "embedding": [0.5]}],
        "10k": [{"text": "tea last month?", "embedding": [0.25]}],
    }


def test_the_share_of_the_first_versions_hits_counts_each_section_apart() -> None:
    first = [(0, "a", 1), (0, "b", 2), (1, "c", 1), (1, "d", 2)]
    # The same hits in another order, ranks or scores: all of them returned.
    assert hits_share(first, [(1, "d", 1), (0, "b", 1), (0, "a", 2), (1, "c", 2)]) == 1.0
    # "c" in another section is not the first's "c"; "e" is not among the first's hits.
    assert hits_share(first, [(0, "a", 1), (0, "c", 2), (1, "d", 1), (1, "e", 2)]) == 0.5
    assert hits_share([], [(0, "a", 1)]) == 1.0


def test_the_spread_of_a_versions_time_is_taken_statement_by_statement() -> None:
    # Half the statements twice as fast, half twice as slow: the p50 of either list is the
    # same, the spread shows both.
    first = [0.010, 0.020, 0.010, 0.020, 0.010, 0.020, 0.010, 0.020, 0.010, 0.020]
    mixed = [0.005, 0.040, 0.005, 0.040, 0.005, 0.040, 0.005, 0.040, 0.005, 0.040]
    assert question_ratios(mixed, first) == (0.5, 2.0)
    assert question_ratios(first, first) == (1.0, 1.0)
    # One statement: its own ratio both ways.
    assert question_ratios([0.003], [0.002]) == (1.5, 1.5)
    # The two lists are the same statements in the same order.
    with pytest.raises(ValueError, match="shorter"):
        question_ratios([0.1, 0.2], [0.1])


def test_a_version_is_a_tree_with_the_service_and_optional_settings(tmp_path: Path) -> None:
    version = parse_version(f"after={REPOSITORY}", with_environment=False)
    assert (version.name, version.tree, version.environment) == ("after", REPOSITORY, {})
    tuned = parse_version(
        f"tuned={REPOSITORY}:MNEME_SEARCH_CANDIDATE_POOL=50,MNEME_SEARCH_RRF_K=30",
        with_environment=True,
    )
    assert tuned.environment == {
        "MNEME_SEARCH_CANDIDATE_POOL": "50",
        "MNEME_SEARCH_RRF_K": "30",
    }
    for spec, with_environment, refusal in (
        ("after", False, "expected NAME=DIR"),
        (f"={REPOSITORY}", False, "expected NAME=DIR"),
        (f"after={tmp_path}", False, "holds no service package"),
        (f"tuned={REPOSITORY}", True, "expected NAME=DIR:VAR=VALUE"),
        (f"tuned={REPOSITORY}:POOL", True, "expected VAR=VALUE"),
    ):
        with pytest.raises(ValueError, match=refusal):
            parse_version(spec, with_environment=with_environment)


def test_fewer_than_two_versions_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tree", f"only={REPOSITORY}"]) == 2
    assert "two or more versions" in capsys.readouterr().err
    assert main(["--tree", f"same={REPOSITORY}", "--tree", f"same={REPOSITORY}"]) == 2


def test_each_version_takes_each_place_in_the_order_in_turn() -> None:
    places: dict[int, list[int]] = {version: [] for version in range(3)}
    for turn in range(6):
        order = run_order(3, turn)
        assert sorted(order) == [0, 1, 2]
        for place, version in enumerate(order):
            places[version].append(place)
    assert all(sorted(taken) == [0, 0, 1, 1, 2, 2] for taken in places.values())


async def test_the_buffers_counted_are_those_of_the_plan_the_settings_choose(
    owner_engine: AsyncEngine,
) -> None:
    # An index partial to one value (as an owner's own vector index is partial to the owner):
    # the custom plan for that value reads the index, the generic plan (planned for any
    # value, which the index may not hold) the whole table.
    table = f"replay_skewed_{uuid.uuid4().hex[:12]}"
    async with owner_engine.connect() as held:
        connection = await asyncpg_connection(held)
        await connection.execute(
            f"CREATE TABLE {table} AS SELECT CASE WHEN n = 1 THEN 5 ELSE n % 4 END AS k, "
            "repeat('x', 200) AS filler FROM generate_series(1, 20000) AS n; "
            f"CREATE INDEX ON {table} (k) WHERE k = 5; ANALYZE {table}"
        )
        try:
            pages = await connection.fetchval(
                f"SELECT relpages FROM pg_class WHERE oid = '{table}'::regclass"
            )
            rare = {"sql": f"SELECT count(filler) FROM {table} WHERE k = $1", "values": [5]}
            counted = {}
            for mode in ("force_custom_plan", "force_generic_plan"):
                async with connection.transaction():
                    await connection.execute(f"SET LOCAL plan_cache_mode = {mode}")
                    counted[mode] = await _buffers_touched(connection, rare)
        finally:
            await connection.execute(f"DROP TABLE {table}")
    assert counted["force_custom_plan"] < 10
    assert counted["force_generic_plan"] >= pages > 100
