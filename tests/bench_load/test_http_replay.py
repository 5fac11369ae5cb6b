"""`python -m benchmarks.scripts.http_replay`: two or more code versions' servers asked the
scenario's questions in turn over HTTP, timed, and their hits compared."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from benchmarks.load import parse_sizes
from benchmarks.scripts import statement_replay
from benchmarks.scripts.http_replay import answered_hits, main, statement_totals
from benchmarks.scripts.statement_replay import hits_share
from service.memories.telemetry import SEARCH_STAGE_METRIC, STATEMENT_STAGE
from tests.bench_load.chats import TOY_SCENARIO, write_chats
from tests.bench_load.replay_report import table_rows as report_rows

REPOSITORY = Path(__file__).resolve().parents[2]


def table_rows(printed: str) -> dict[tuple[str, str], list[str]]:
    """The report's rows by (size, version): the p50, the change, the server's CPU per request,
    the questions answered with the first version's hits, the share of the first version's hits
    returned, the spread of the time per question against the first version's, the p50 of the
    server's own time for its fusion statement."""
    return report_rows(printed, 9)


@pytest.mark.slow
def test_servers_of_each_version_answer_in_turn_and_their_hits_are_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chats = write_chats(tmp_path / "chats.json")
    data = tmp_path / "replay"
    # Without a loaded scenario there is nothing to ask.
    assert (
        main(["--data", str(data), "--tree", f"a={REPOSITORY}", "--tree", f"b={REPOSITORY}"]) == 2
    )
    assert "holds no loaded scenario" in capsys.readouterr().err
    # The scenario as statement_replay loads and keeps it (loaded alone: no replay of its own).
    loading = statement_replay._arguments([*TOY_SCENARIO, "--dataset", str(chats)])
    asyncio.run(statement_replay._load(data, loading, parse_sizes(loading.sizes)))

    asked = ["--data", str(data), "--questions", "4", "--passes", "1"]
    first = ["--tree", f"first={REPOSITORY}"]
    # The same code answers the same questions with the same hits...
    assert main([*asked, *first, "--tree", f"again={REPOSITORY}", "--what", "context"]) == 0
    context = table_rows(capsys.readouterr().out)
    for size in ("60", "120"):
        assert float(context[(size, "first")][0]) > 0
        # Each server's own CPU for a request (with what it does in the background meanwhile,
        # a recount of the owners' statistics a search asked for: it may exceed the p50).
        for version in ("first", "again"):
            assert float(context[(size, version)][2]) > 0
            # The statement as each server timed it: one a block, part of each request.
            assert 0 < float(context[(size, version)][6]) < 1000 * 60
        assert context[(size, "again")][3:5] == ["4/4", "1.000"]
        low, high = (float(each) for each in context[(size, "again")][5].split(" / "))
        assert 0 < low <= high
    # ... and a setting that changes what a search returns (the neighbours lend no evidence)
    # answers some question with other hits.
    alone = ["--env", f"alone={REPOSITORY}:MNEME_SEARCH_NEIGHBOUR_WEIGHT=0"]
    assert main([*asked, *first, *alone]) == 0
    search = table_rows(capsys.readouterr().out)
    assert any(search[(size, "alone")][3] != "4/4" for size in ("60", "120"))
    assert all(0 <= float(search[(size, "alone")][4]) <= 1 for size in ("60", "120"))
    # `--body` reaches every request: a filter the API refuses stops the replay with its answer.
    assert main([*asked, *first, "--tree", f"again={REPOSITORY}", "--body", '{"limit": 0}']) == 1
    assert "answered 422" in capsys.readouterr().err


def test_the_hits_of_a_search_and_of_a_context_block_are_their_memories_in_order() -> None:
    search = {"hits": [{"memory": {"id": "m1"}}, {"memory": {"id": "m2"}}]}
    assert answered_hits("search", search) == [("hits", "m1"), ("hits", "m2")]
    block = {
        "sections": [
            {"name": "profile", "items": [{"id": None}]},
            {"name": "facts", "items": [{"id": "m2"}, {"id": "m1"}]},
        ]
    }
    assert answered_hits("context", block) == [("facts", "m2"), ("facts", "m1")]
    assert answered_hits("context", {"sections": None}) == []
    # Any order counts; a hit in another section is another hit.
    assert hits_share([("facts", "m1"), ("facts", "m2")], [("facts", "m2"), ("org", "m1")]) == 0.5
    assert hits_share([], [("facts", "m1")]) == 1.0


def test_a_servers_statement_time_is_its_fusion_query_stage_over_every_mode() -> None:
    registry = CollectorRegistry()
    stages = Histogram(SEARCH_STAGE_METRIC, "stages", ["stage", "mode"], registry=registry)
    # Before any search: none run.
    assert statement_totals(generate_latest(registry).decode()) == (0.0, 0)
    stages.labels(STATEMENT_STAGE, "hybrid").observe(0.010)
    stages.labels(STATEMENT_STAGE, "hybrid").observe(0.030)
    stages.labels(STATEMENT_STAGE, "lexical").observe(0.002)
    # Other stages of the same searches are not the statement.
    stages.labels("mmr", "hybrid").observe(0.5)
    stages.labels("rerank", "hybrid").observe(0.7)
    seconds, count = statement_totals(generate_latest(registry).decode())
    assert count == 3
    assert seconds == pytest.approx(0.042)


def test_fewer_than_two_versions_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tree", f"only={REPOSITORY}"]) == 2
    assert "two or more versions" in capsys.readouterr().err


@pytest.mark.parametrize("body", ["[1]", "{categories", '"food"'])
def test_a_body_that_is_not_a_json_object_is_refused(
    body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--tree", f"a={REPOSITORY}", "--tree", f"b={REPOSITORY}", "--body", body])
    assert stopped.value.code == 2
    assert "--body" in capsys.readouterr().err
