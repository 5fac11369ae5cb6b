"""The fusion statement's text is rendered from named fragments, and every ranking parameter
is declared once, on `SearchParams`."""

from __future__ import annotations

from dataclasses import fields

import pytest

from service.auth.owner import Owner
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    RANKING_PARAMETERS,
    SearchParams,
    render,
    sectioned_search_statement,
)
from tests.search_params import search_params


def test_a_placeholder_without_a_fragment_is_an_error() -> None:
    with pytest.raises(ValueError, match="pool"):
        render("SELECT 1 LIMIT ${pool} OFFSET ${offset}", offset="0")


def test_rendering_fills_every_placeholder_and_leaves_array_literals_alone() -> None:
    rendered = render("SELECT ts_filter(tsv, '{a}') LIMIT ${pool}", pool=":pool_0")
    assert rendered == "SELECT ts_filter(tsv, '{a}') LIMIT :pool_0"


def test_every_ranking_parameter_is_bound_under_its_own_name() -> None:
    """A field added to `SearchParams` reaches the statement as a bind of the same name."""
    declared = {each.name for each in fields(SearchParams)} - {"filter", "pool", "limit"}
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
