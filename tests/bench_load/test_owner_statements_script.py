"""`python -m benchmarks.scripts.owner_statements`: what one connection holds, and what a search
costs on it, as it serves more large owners' texts or more filter shapes' texts, with those
texts in the shared statement cache or kept apart."""

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
    assert main([*arguments, "--owners", "3,9", "--shapes", "3,9"]) == 0
    printed = capsys.readouterr().out
    owners_table, shapes_table = printed.split("### ")[1:]
    assert owners_table.startswith("Large owners'") and shapes_table.startswith("Filter shapes'")
    # The small owner's search is a filter shape too: beside shapes' texts, on their shelf.
    for table, beside in ((owners_table, 0), (shapes_table, 1)):
        rows = table_rows(table, 6)
        # Each way runs on a connection of its own. The shared cache (100) holds every text;
        # the connection that keeps them apart three of each kind: fewer statements, and less
        # of the backend's memory, once the kind's texts are more than three.
        for texts in (3, 9):
            held_shared = int(rows[(str(texts), "shared")][0])
            held_apart = int(rows[(str(texts), "apart")][0])
            assert held_shared - held_apart == max(0, texts + beside - 3)
        assert float(rows[("9", "apart")][1]) < float(rows[("9", "shared")][1])
        for row in rows.values():
            assert float(row[2]) > 0 and float(row[3]) > 0
