"""`mneme bench retrieval` without its data file: LoCoMo is not in the repository, so the error
says what it is, where the benchmark looked, how to point it at a copy and where to get one."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.cli import DATASET_ENV, DEFAULT_DATASET
from service.cli import main


def test_a_missing_locomo_file_says_where_to_get_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "locomo10.json"

    assert main(["bench", "retrieval", "--dataset", str(absent)]) == 2

    err = capsys.readouterr().err
    assert f"cannot read {absent}" in err
    assert "CC BY-NC 4.0" in err
    assert "evaluation only" in err
    assert "not part of this repository" in err
    assert str(DEFAULT_DATASET) in err
    assert "--dataset PATH" in err
    assert f"{DATASET_ENV}=PATH" in err
    assert "https://github.com/snap-research/locomo" in err
    assert "data/locomo10.json" in err


def test_the_environment_names_the_default_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "elsewhere" / "locomo10.json"
    monkeypatch.setenv(DATASET_ENV, str(absent))

    assert main(["bench", "retrieval"]) == 2

    assert f"cannot read {absent}" in capsys.readouterr().err


def test_a_missing_longmemeval_file_gets_no_locomo_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "longmemeval_s.json"

    assert main(["bench", "retrieval", "--format", "longmemeval", "--dataset", str(absent)]) == 2

    err = capsys.readouterr().err
    assert f"cannot read {absent}" in err
    assert "LoCoMo" not in err
