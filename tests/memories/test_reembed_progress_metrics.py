"""A change of embedding model's progress metrics: published while a column is being filled,
withdrawn once none is, and nothing withdrawn (no warning from prometheus_client's shared-file
mode) by a process that published none."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from service.memories.vector_columns import ColumnsState, ColumnState, publish_progress
from service.observability import DOMAIN_METRICS

MODEL = "progress-test-model"

FILLING = ColumnsState(
    columns=(
        ColumnState("embedding", None, None, "live"),
        ColumnState("embedding_alt", MODEL, 8, "filling", memories_total=10, memories_embedded=3),
    ),
    switched={"tenant-a": "embedding_alt"},
)
NONE_FILLING = ColumnsState()


def _embedded() -> float | None:
    return DOMAIN_METRICS.registry.get_sample_value(
        "mneme_reembed_memories", {"model": MODEL, "state": "embedded"}
    )


def test_progress_is_published_while_a_column_fills_and_withdrawn_after() -> None:
    publish_progress(FILLING, lambda column: column.model or "")
    assert _embedded() == 3
    assert (
        DOMAIN_METRICS.registry.get_sample_value("mneme_reembed_tenants_switched", {"model": MODEL})
        == 1
    )
    publish_progress(NONE_FILLING, lambda column: column.model or "")
    assert _embedded() is None


def test_a_process_that_published_no_progress_withdraws_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Whatever an earlier test published, withdrawn (as a process's first refresh finds it).
    publish_progress(NONE_FILLING, lambda column: column.model or "")
    # Under `--workers`, prometheus_client warns on any clearing of a metric's series (which it
    # cannot do there): each worker's first refresh, finding no change of model, cleared them.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        publish_progress(NONE_FILLING, lambda column: column.model or "")
    assert _embedded() is None
