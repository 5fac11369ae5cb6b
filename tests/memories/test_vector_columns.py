"""Which column a tenant reads and where a vector is stored, from the columns' state alone."""

from __future__ import annotations

import pytest

from service.memories.vector_columns import (
    ColumnsState,
    ColumnState,
    ModelVector,
    VectorColumn,
    VectorColumns,
    VectorSizeMismatch,
)
from tests.memories.model_change import ServerVectors

OLD, NEW = "model-a", "model-b"


def _during_a_change() -> VectorColumns:
    columns = VectorColumns(ServerVectors(OLD, 384), [ServerVectors(NEW, 768)])
    columns.state = ColumnsState(
        (
            ColumnState("embedding", None, None, "live"),
            ColumnState("embedding_alt", NEW, 768, "filling"),
        ),
        {"switched": "embedding_alt"},
    )
    return columns


def test_a_tenant_reads_the_new_column_only_once_it_switched() -> None:
    columns = _during_a_change()
    assert columns.read_by("waiting") == VectorColumn("embedding", OLD)
    assert columns.read_by("switched") == VectorColumn("embedding_alt", NEW, 768)
    assert columns.read_by("switched").expression("m") == "(m.embedding_alt::vector(768))"
    assert columns.question_embedder("switched") is not None
    assert columns.question_embedder("switched").model_name == NEW  # type: ignore[union-attr]


def test_a_vector_is_compared_with_and_stored_in_the_column_of_its_model() -> None:
    columns = _during_a_change()
    both = ModelVector([0.1] * 384, OLD, [ModelVector([0.2] * 768, NEW)])
    assert columns.column_for(both, "switched") == VectorColumn("embedding", OLD)
    assert columns.column_for(ModelVector([0.3], "model-c"), "waiting") is None
    stored = columns.stored_values(both)
    assert (stored["embedding_model"], stored["embedding_alt_model"]) == (OLD, NEW)
    assert len(stored["embedding"]) == 384 and len(stored["embedding_alt"]) == 768
    # A changed text whose new model's vector could not be made: the stale one is cleared.
    only_old = columns.stored_values(ModelVector([0.1] * 384, OLD))
    assert (only_old["embedding_alt"], only_old["embedding_alt_model"]) == (None, None)
    # Filling in what is missing leaves the other column alone.
    assert set(columns.stored_values(ModelVector([0.1] * 384, OLD), clear_others=False)) == {
        "embedding",
        "embedding_model",
    }


def test_a_write_leaves_out_a_vector_of_another_size_than_its_models_column() -> None:
    columns = _during_a_change()
    wrong_size = ModelVector([0.1] * 384, OLD, [ModelVector([0.2] * 512, NEW)])
    stored = columns.stored_values(wrong_size)
    assert (stored["embedding_model"], len(stored["embedding"])) == (OLD, 384)
    assert (stored["embedding_alt"], stored["embedding_alt_model"]) == (None, None)


def test_a_process_running_the_new_model_at_another_size_does_not_use_it() -> None:
    columns = VectorColumns(ServerVectors(OLD, 384), [ServerVectors(NEW, 512)])
    columns.state = _during_a_change().state
    assert columns.question_embedder("switched") is None
    assert columns.storage_embedder().filling == ()


def test_an_imported_vector_goes_to_the_column_of_its_model_or_nowhere() -> None:
    columns = _during_a_change()
    vector = str([0.2] * 768)
    exported_elsewhere = {"id": "m1", "embedding": vector, "embedding_model": NEW}
    placed = columns.placed(exported_elsewhere)
    assert (placed["embedding_alt"], placed["embedding_alt_model"]) == (vector, NEW)
    assert (placed["embedding"], placed["embedding_model"]) == (None, None)
    unknown = columns.placed({"id": "m2", "embedding": "[0.2]", "embedding_model": "model-c"})
    assert [unknown[key] for key in ("embedding", "embedding_alt")] == [None, None]
    assert unknown["id"] == "m2"
    # Its model's, but not the size its column takes here.
    with pytest.raises(VectorSizeMismatch, match=r"1-dimensional vector of model-b.*768"):
        columns.placed({"id": "m3", "embedding": "[0.2]", "embedding_model": NEW})
