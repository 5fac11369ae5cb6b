"""`python -m benchmarks.scripts.filling_owner`: an owner filled on a fresh service per code
version, searched at each size."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.scripts.filling_owner import PASTIMES, facts, main

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_owners_facts_are_distinct_and_written_as_the_write_path_writes_them() -> None:
    rows = facts(500)
    assert len(set(rows)) == 500
    assert all(row.startswith("User likes ") for row in rows)
    # Two different pastimes each, the same rows on every run.
    first = rows[0].removeprefix("User likes ").split(" (note")[0].split(" and ")
    assert len(set(first)) == 2 and set(first) <= set(PASTIMES)
    assert facts(500) == rows and facts(10) == rows[:10]


@pytest.mark.slow
def test_each_version_is_filled_and_searched_at_each_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = ["--sizes", "60,120", "--rounds", "2", "--settle", "0", "--data", str(tmp_path)]
    assert main([*asked, "--tree", f"a={REPOSITORY}", "--tree", f"b={REPOSITORY}"]) == 0
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()[2:]
    ]
    assert [(row[0], row[1]) for row in rows] == [
        ("60", "a"),
        ("60", "b"),
        ("120", "a"),
        ("120", "b"),
    ]
    for row in rows:
        assert float(row[2]) > 0
        answers = []
        for cell in row[3:]:
            for figure in cell.split(" / "):
                milliseconds, hits = figure.removesuffix(")").split(" (")
                assert float(milliseconds) > 0
                answers.append(int(hits))
        # Every memory holds "user" and "like": the first question's top ten in either mode;
        # a few hold "piano" or "violin", and the second question finds them.
        assert answers[:2] == [10, 10] and min(answers[2:]) >= 1
    # Each version's database is its own, made under --data.
    assert {path.name for path in tmp_path.iterdir()} == {"a", "b"}


def test_versions_must_be_named_apart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tree", f"a={REPOSITORY}", "--tree", f"a={REPOSITORY}"]) == 2
    assert "distinct names" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["--tree", f"a={REPOSITORY}", "--sizes", "lots"]) == 2
    assert "cannot read" in capsys.readouterr().err
