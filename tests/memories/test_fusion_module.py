"""The fusion statement's text is rendered from named fragments, and every ranking parameter
is declared once, on `SearchParams`."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from service.auth.owner import Owner
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    RANKING_PARAMETERS,
    SearchParams,
    hybrid_search_statement,
    render,
    sectioned_search_statement,
)
from service.memories.vector_columns import VectorColumn
from tests.search_params import search_params


def test_a_placeholder_without_a_fragment_is_an_error() -> None:
    with pytest.raises(ValueError, match="pool"):
        render("SELECT 1 LIMIT ${pool} OFFSET ${offset}", offset="0")


def test_rendering_fills_every_placeholder_and_leaves_array_literals_alone() -> None:
    rendered = render("SELECT ts_filter(tsv, '{a}') LIMIT ${pool}", pool=":pool_0")
    assert rendered == "SELECT ts_filter(tsv, '{a}') LIMIT :pool_0"


def test_every_ranking_parameter_is_bound_under_its_own_name() -> None:
    """A field added to `SearchParams` reaches the statement as a bind of the same name."""
    # The vector column is the statement's text, not a value (see the next test); the owner
    # index's candidate list is a planner setting made before the statement runs.
    declared = {each.name for each in fields(SearchParams)} - {
        "filter",
        "pool",
        "limit",
        "vector_column",
        "owner_index_ef_search",
    }
    assert {name for name, _ in RANKING_PARAMETERS} == declared

    facts = MemoryFilter.build([Owner.user("ada")], kinds=["semantic"])
    episodes = MemoryFilter.build([Owner.user("ada")], kinds=["episodic"])
    statement = sectioned_search_statement(
        "t-1", [search_params(facts, "tea"), search_params(episodes, "tea")]
    )
    sql = str(statement)
    assert "${" not in sql
    bound = set(statement.compile().params)
    assert declared <= bound
    assert {"pool_0", "pool_1", "limit_0", "limit_1", "tenant_id"} <= bound


def test_a_search_reads_the_vector_column_it_names_cast_to_its_index_dimension() -> None:
    """The question is compared with one column only: the one the search names, cast as its
    index is built when the column's type has no dimension."""
    ada = MemoryFilter.build([Owner.user("ada")], kinds=["semantic"])
    first = str(hybrid_search_statement("t-1", search_params(ada, "tea")))
    assert "m.embedding <=>" in first and "embedding_alt" not in first

    new_model = VectorColumn("embedding_alt", "all-mpnet-base-v2", 768)
    params = replace(search_params(ada, "tea"), vector_column=new_model)
    second = str(hybrid_search_statement("t-1", params))
    assert "(m.embedding_alt::vector(768)) <=>" in second
    assert "s.embedding_alt_model AS embedding_model" in second
    assert "m.embedding <=>" not in second and "m.embedding IS" not in second
