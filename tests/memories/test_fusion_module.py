"""The fusion statement's text is rendered from named fragments, and every ranking parameter
is declared once, on `SearchParams`."""

from __future__ import annotations

import re
from dataclasses import fields, replace

import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.memories.filters import MemoryFilter
from service.memories.fusion import (
    RANKING_PARAMETERS,
    SearchParams,
    hybrid_search_statement,
    render,
    sectioned_search_statement,
)
from service.memories.fusion.statement import compiled_search, owner_literal
from service.memories.owner_index_names import ALL_KINDS
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
    # The sizes are bound per section; the vector column is the statement's text, not a
    # value (see the next test); the owner
    # index's candidate list is a planner setting made before the statement runs, and the
    # thresholds of the table's vector index decide that setting; the messages whose memories
    # a section does not return are bound per section, like its filter; the most a filtered
    # walk reads is bound only in a statement with one (test_filtered_walks).
    declared = {each.name for each in fields(SearchParams)} - {
        "filter",
        "pool",
        "limit",
        "vector_pool",
        "vector_column",
        "owner_index_ef_search",
        "not_only_of_messages",
        "walk_scanned",
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
    assert {
        "pool_0",
        "pool_1",
        "limit_0",
        "limit_1",
        "vector_pool_0",
        "vector_pool_1",
        "tenant_id",
    } <= bound


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


# Strings a quoting must not let out of their literal: quotes, backslashes before quotes, a
# comment, and text that is SQL itself.
HOSTILE_STRINGS = [
    "o'brien",
    "x\\' OR true --",
    "\\",
    "''; DROP TABLE memory; --",
    "tab\there\nnewline",
    "ünïcødé ✓",
    "E'nested'",
]


@pytest.mark.parametrize("conforming", ["on", "off"])
async def test_an_owner_written_into_the_statement_reads_back_as_itself(
    runtime_engine: AsyncEngine, conforming: str
) -> None:
    """The server reads every written owner back as the very string, whatever
    `standard_conforming_strings` says about backslashes; a NUL is refused before any SQL."""
    async with runtime_engine.connect() as connection:
        await connection.execute(text(f"SET standard_conforming_strings = {conforming}"))
        for value in HOSTILE_STRINGS:
            read = await connection.scalar(text(f"SELECT {owner_literal(value)}::text"))
            assert read == value
        await connection.rollback()
    with pytest.raises(ValueError, match="NUL"):
        owner_literal("a\x00b")


def test_a_section_with_its_owners_written_in_binds_neither_them_nor_its_sizes() -> None:
    """The owners (tenant and user) and the section's pool and limit are in the text, and the
    nearest vectors of an owner with an index of its own are read in the order an index
    serves, those of an owner with none sorted exactly; the filter's other conditions stay
    bound, and a section not written in is as before."""
    user = "ada.l|ove+lace@example.org"
    facts = search_params(MemoryFilter.build([Owner.user(user)], kinds=["semantic"]), "tea")
    dialect = asyncpg.dialect()
    own_index = frozenset({f"{ALL_KINDS}:{Owner.user(user).key}"})
    written, _ = compiled_search("t-1", [facts], dialect, written_owners={0: own_index})
    without_index, _ = compiled_search("t-1", [facts], dialect, written_owners={0: frozenset()})
    plain, _ = compiled_search("t-1", [facts], dialect)
    names = {name for name, _ in written.parameters}
    assert f"m.user_id IN ({owner_literal(user)})" in written.sql
    assert f"m.tenant_id = {owner_literal('t-1')}" in written.sql
    assert f"LIMIT {facts.pool}" in written.sql
    assert not {"pool_0", "limit_0", "f0_0_tenant_id", "f0_0_user_ids"} & names
    # The section's own filter (lexical side, neighbours) keeps its binds.
    assert {"f0_tenant_id", "f0_user_ids", "f0_kind", "f0_0_kind"} <= names
    exact_order = re.compile(r"ORDER BY \(m\.embedding <=> .*\) \+ 0")
    assert exact_order.search(plain.sql) and not exact_order.search(written.sql)
    assert re.search(r"ORDER BY m\.embedding <=> ", written.sql)
    assert exact_order.search(without_index.sql)
    assert not re.search(r"ORDER BY m\.embedding <=> ", without_index.sql)
    plain_names = {name for name, _ in plain.parameters}
    assert {"pool_0", "limit_0"} <= plain_names
    assert owner_literal(user) not in plain.sql


def test_owners_without_indexes_of_their_own_are_sorted_exactly_in_every_section() -> None:
    """In one statement, every section whose owners are not written in with indexes of their
    own sorts their nearest vectors exactly, compiled for the service or built for a reader:
    the memory table has no graph of its own, and no plan may walk a graph for them."""
    user = Owner.user("ada")
    facts, episodes = (
        search_params(MemoryFilter.build([user], kinds=[kind]), "tea")
        for kind in ("semantic", "episodic")
    )
    compiled, _ = compiled_search("t-1", [facts, episodes], asyncpg.dialect())
    built = str(sectioned_search_statement("t-1", [facts, episodes]))

    assert nearest_orders(compiled.sql) == [("0", "exact"), ("1", "exact")]
    assert nearest_orders(built) == [("0", "exact"), ("1", "exact")]


def nearest_orders(sql: str) -> list[tuple[str, str]]:
    """Each vector scan of a statement not written for its owners: its section, and whether
    it reads its nearest in the order an index serves (`index`) or sorts them exactly
    (`exact`: the expression `(… <=> …) + 0`)."""
    scan = (
        r"SELECT m\.id, (\d) AS section, [^\n]* AS distance\n  FROM memory m\n(?:[^\n]*\n)*?"
        r" ORDER BY (\(?)m\.embedding <=> [^\n]*\n LIMIT"
    )
    return [(section, "exact" if opened else "index") for section, opened in re.findall(scan, sql)]


def test_an_owner_with_indexes_per_kind_is_scanned_per_kind_and_the_rest_exactly() -> None:
    """A written owner with indexes of its own for some kinds reads each of them in a scan of
    that kind (in the order an index serves, the kind written in) and the kinds without one in
    one exact scan; a section asking for one kind scans that kind alone."""
    user = Owner.user("ada")
    both = frozenset({f"semantic:{user.key}", f"episodic:{user.key}"})
    dialect = asyncpg.dialect()
    every_kind = search_params(MemoryFilter.build([user]), "tea")
    episodes = search_params(MemoryFilter.build([user], kinds=["episodic"]), "tea")
    index_order = r"ORDER BY m\.embedding <=> \(SELECT [^\n]*\)\n LIMIT"
    exact_order = r"ORDER BY \(m\.embedding <=> \(SELECT [^\n]*\)\) \+ 0\n LIMIT"

    written, _ = compiled_search("t-1", [every_kind], dialect, written_owners={0: both})
    scans = re.findall(r"AND m\.kind (= E'\w+'|IN \([^)]*\))\n ORDER BY (\(?)", written.sql)
    assert scans == [("= E'semantic'", ""), ("= E'episodic'", ""), ("IN (E'procedural')", "(")]
    assert len(re.findall(index_order, written.sql)) == 2
    assert len(re.findall(exact_order, written.sql)) == 1

    written, _ = compiled_search("t-1", [episodes], dialect, written_owners={0: both})
    assert re.findall(r"AND m\.kind (= E'\w+'|IN \([^)]*\))\n ORDER BY", written.sql) == [
        "= E'episodic'"
    ]
    assert not re.findall(exact_order, written.sql)

    # The organization's kinds without an index are stated by its user column in their scan
    # (the index by user and kind finds them), its indexed kinds by scope (as its index is).
    org = Owner.org()
    organization = search_params(MemoryFilter.build([org]), "tea")
    written, _ = compiled_search(
        "t-1",
        [organization],
        dialect,
        written_owners={0: frozenset({f"semantic:{org.key}"})},
    )
    assert re.search(r"\(m\.scope = 'org'\)\n[^\n]*\n    AND m\.kind = E'semantic'", written.sql)
    assert re.search(
        r"\(m\.user_id IS NULL\)\n[^\n]*\n    AND m\.kind IN \(E'episodic', E'procedural'\)",
        written.sql,
    )

    # An index over all of the owner's kinds (as earlier versions built them): one scan.
    whole, _ = compiled_search(
        "t-1",
        [every_kind],
        dialect,
        written_owners={0: both | {f":{user.key}"}},
    )
    vector_scans = whole.sql[whole.sql.index("vector_hits AS") : whole.sql.index("fused AS")]
    assert "AND m.kind = E'" not in vector_scans and len(re.findall(index_order, whole.sql)) == 1


def test_only_the_sections_that_hold_turns_look_up_neighbours() -> None:
    """Only a turn (an episodic memory) receives a neighbour's evidence: a section whose filter
    lets no episodic memory through has no look-ups in its text, whatever it is given."""
    ada = [Owner.user("ada")]
    facts = MemoryFilter.build(ada, kinds=["semantic"])
    episodes = MemoryFilter.build(ada, kinds=["episodic"])
    org = MemoryFilter.build([Owner.org()], kinds=["semantic", "procedural"])

    def adjacent(*filters: MemoryFilter) -> str:
        sql = str(sectioned_search_statement("t-1", [search_params(f, "tea") for f in filters]))
        return sql[sql.index("adjacent AS") : sql.index("neighbourhood AS")]

    assert "c.thread_id IS NOT NULL AND false" in adjacent(facts)
    assert "c.thread_id IS NOT NULL AND true" in adjacent(MemoryFilter.build(ada))
    assert "c.thread_id IS NOT NULL AND true" in adjacent(episodes)
    assert "c.thread_id IS NOT NULL AND c.section IN (1)" in adjacent(org, episodes, facts)
    assert "c.thread_id IS NOT NULL AND false" in adjacent(org, facts)
