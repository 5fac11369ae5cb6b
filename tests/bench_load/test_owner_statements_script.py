"""`python -m benchmarks.scripts.owner_statements`: what one connection holds, and what a search
costs on it, as it serves more large owners' texts, with those texts in the shared statement
cache or kept apart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.load import parse_sizes
from benchmarks.scripts import statement_replay
from benchmarks.scripts.owner_statements import main
from tests.bench_load.chats import TOY_SCENARIO, write_chats
from tests.bench_load.replay_report import table_rows


@pytest.mark.slow
def test_the_large_owners_texts_kept_apart_are_held_at_most_as_configured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "replay"
    # Without a loaded scenario there is nothing to run.
    assert main(["--data", str(data)]) == 2
    assert "holds no loaded scenario" in capsys.readouterr().err
    loading = statement_replay._arguments(
        [*TOY_SCENARIO, "--dataset", str(write_chats(tmp_path / "chats.json"))]
    )
    asyncio.run(statement_replay._load(data, loading, parse_sizes(loading.sizes)))
    # Fewer owners than the small owner's period cannot be measured.
    assert main(["--data", str(data), "--owners", "2", "--small-every", "3"]) == 2

    arguments = ["--data", str(data), "--rounds", "2", "--kept", "3", "--small-every", "3"]
    assert main([*arguments, "--owners", "3,9"]) == 0
    printed = capsys.readouterr().out
    rows = table_rows(printed, 6)
    # Each way runs on a connection of its own: with as few owners as it keeps, kept apart or
    # not, the connection holds the same statements.
    assert rows[("3", "apart")][0] == rows[("3", "shared")][0]
    # With more, the shared cache (100) holds every owner's text, and the connection that keeps
    # them apart three of them: six fewer statements, and less of the backend's memory.
    held_shared, held_apart = int(rows[("9", "shared")][0]), int(rows[("9", "apart")][0])
    assert held_shared - held_apart == 9 - 3
    assert float(rows[("9", "apart")][1]) < float(rows[("9", "shared")][1])
    for row in rows.values():
        assert float(row[2]) > 0 and float(row[3]) > 0
