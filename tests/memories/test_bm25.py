"""BM25's one definition (`service.memories.bm25`): the SQL the statement, the postings and the
pruning bounds are rendered from computes BM25's weight, and its literals stay fractional."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.memories.bm25 import (
    K1,
    SATURATION,
    SHORTEST_SHARE,
    B,
    inverse_document_frequency,
    number,
    score_for_ties,
    term_weight,
)
from service.memories.postings import INSERT_POSTINGS_SQL


def bm25_weight(frequency: int, length: int, mean_length: float) -> float:
    """BM25's term weight as its definition states it (Robertson and Zaragoza, 2009)."""
    return frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * length / mean_length))


def bm25_idf(documents: int, containing: int) -> float:
    """BM25's inverse document frequency as Lucene defines it (never negative)."""
    return math.log(1 + (documents - containing + 0.5) / (containing + 0.5))


def test_a_literal_is_fractional_and_without_float_noise() -> None:
    # An integer literal would make PostgreSQL divide an integer column by it as integers.
    assert number(10.0) == "10.0"
    assert number(3) == "3.0"
    assert number(1.2 * 0.25) == "0.3"
    assert (SATURATION, SHORTEST_SHARE) == ("2.2", "0.3")


def test_the_postings_impact_is_the_term_weight_at_the_fixed_mean_length() -> None:
    assert term_weight("cardinality(term.positions)", "m.tsv_length", "10.0") in (
        INSERT_POSTINGS_SQL
    )


async def test_postgres_computes_the_weight_bm25_defines(runtime_engine: AsyncEngine) -> None:
    # Integer frequencies and lengths, as the statement's columns hold them.
    cases = [(1, 1, 10.0), (1, 7, 10.0), (3, 5, 10.0), (2, 40, 6.5), (9, 3, 23.25)]
    async with runtime_engine.connect() as connection:
        for frequency, length, mean_length in cases:
            weight = (
                await connection.execute(
                    text(
                        "SELECT "
                        + term_weight(
                            "CAST(:frequency AS integer)",
                            "CAST(:length AS integer)",
                            "CAST(:mean_length AS float8)",
                        )
                    ),
                    {"frequency": frequency, "length": length, "mean_length": mean_length},
                )
            ).scalar_one()
            assert weight == pytest.approx(bm25_weight(frequency, length, mean_length), rel=1e-12)


async def test_weights_and_idf_are_float8_whatever_their_arguments_types(
    runtime_engine: AsyncEngine,
) -> None:
    # The statement's frequencies and lengths are integers, an exact section's mean length is
    # avg()'s numeric and the counts are bigints: computed as they come, the weight of every
    # candidate scored would be numeric arithmetic, several times float8's cost.
    weight = term_weight(
        "CAST(:frequency AS integer)", "CAST(:length AS integer)", "CAST(:mean AS numeric)"
    )
    idf = inverse_document_frequency("CAST(:documents AS bigint)", "CAST(:containing AS bigint)")
    async with runtime_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    f"SELECT {weight} AS weight, {idf} AS idf, "
                    f"pg_typeof({weight})::text AS weight_type, pg_typeof({idf})::text AS idf_type"
                ),
                {"frequency": 2, "length": 40, "mean": 6.5, "documents": 1000, "containing": 7},
            )
        ).one()
    assert (row.weight_type, row.idf_type) == ("double precision", "double precision")
    assert row.weight == pytest.approx(bm25_weight(2, 40, 6.5), rel=1e-12)
    assert row.idf == pytest.approx(bm25_idf(1000, 7), rel=1e-12)


async def test_scores_that_differ_in_their_last_bits_tie_and_stay_float8(
    runtime_engine: AsyncEngine,
) -> None:
    # 0.1 + 0.2 and 0.3 are one sum added in two orders: 0.30000000000000004 and 0.3.
    async with runtime_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT "
                    + score_for_ties("(float8 '0.1' + float8 '0.2')")
                    + " AS summed, "
                    + score_for_ties("float8 '0.3'")
                    + " AS exact, "
                    + score_for_ties("float8 '2.7182818284'")
                    + " AS kept, pg_typeof("
                    + score_for_ties("float8 '0.3'")
                    + ")::text AS type"
                )
            )
        ).one()
    assert 0.1 + 0.2 != 0.3
    assert row.summed == row.exact == 0.3
    assert row.kept == 2.718281828
    assert row.type == "double precision"
