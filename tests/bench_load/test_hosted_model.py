"""`python -m benchmarks.scripts.hosted_model`: never-seen searches on a hosted model that
answers late, and the reads served meanwhile, per version."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from benchmarks.scripts.hosted_model import hosted_model, main, text_vector

REPOSITORY = Path(__file__).resolve().parents[2]


def test_the_model_answers_each_text_after_its_latency_with_the_asked_size() -> None:
    with hosted_model(0.2) as base_url:
        started = time.perf_counter()
        answer = httpx.post(
            f"{base_url}/embeddings",
            json={"model": "m", "input": ["a", "b"], "dimensions": 16},
            timeout=5,
        )
        took = time.perf_counter() - started
    data = answer.raise_for_status().json()["data"]
    assert took >= 0.2
    assert [item["index"] for item in data] == [0, 1]
    assert [item["embedding"] for item in data] == [text_vector("a", 16), text_vector("b", 16)]


@pytest.mark.slow
def test_every_version_is_measured_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["--data", str(tmp_path), "--model-ms", "50", "--clients", "2", "--seconds", "1"]
    assert main([*arguments, "--tree", f"a={REPOSITORY}", "--tree", f"a={REPOSITORY}"]) == 2
    assert main([*arguments, "--tree", f"a={REPOSITORY}"]) == 0
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| a ")
    ]
    [[_, answered, p50, refused, failed, _reads, reads_refused]] = rows
    assert float(answered) > 0 and float(p50) >= 50
    assert refused == failed == reads_refused == "0"
