"""MMR picks by relevance against redundancy, one candidate at a time: the greedy choice worked
out by hand, copies of one vector tied (kept in fused order), candidates without a vector."""

from __future__ import annotations

import math
import uuid

import numpy as np

from service.memories.fusion import SearchRow
from service.memories.search import maximal_marginal_relevance


def row(embedding: list[float] | None, vector_cosine: float | None = None) -> SearchRow:
    return SearchRow(
        record={"id": uuid.uuid4(), "vector_cosine": vector_cosine},
        embedding=None if embedding is None else np.asarray(embedding),
    )


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def test_each_pick_weighs_relevance_against_the_closest_pick_so_far() -> None:
    query = [1.0, 0.0, 0.0]
    best = row(unit(1.0, 0.1, 0.0))
    copy_of_best = row(unit(1.0, 0.12, 0.0))
    different = row(unit(0.6, 0.0, 0.8))

    picked, scores = maximal_marginal_relevance(
        [best, copy_of_best, different], query, lambda_=0.5, limit=3
    )

    # First: the most relevant. Second: `different` (0.5*0.6 - 0.5*cos(different, best)) beats
    # the near copy, whose redundancy is ~1. Third: the copy, against its closest pick.
    assert [hit.id for hit in picked] == [
        best.id,
        different.id,
        copy_of_best.id,
    ]
    cosine = float(np.dot(unit(0.6, 0.0, 0.8), unit(1.0, 0.1, 0.0)))
    assert math.isclose(scores[different.id], 0.5 * 0.6 - 0.5 * cosine, abs_tol=1e-6)
    relevance_of_copy = unit(1.0, 0.12, 0.0)[0]
    closest = float(np.dot(unit(1.0, 0.12, 0.0), unit(1.0, 0.1, 0.0)))
    assert math.isclose(
        scores[copy_of_best.id], 0.5 * relevance_of_copy - 0.5 * closest, abs_tol=1e-6
    )


def test_copies_of_one_vector_score_alike_and_keep_their_fused_order() -> None:
    generator = np.random.default_rng(7)
    vectors = [unit(*generator.normal(size=384)) for _ in range(40)]
    query = unit(*generator.normal(size=384))
    for copy_at in range(1, 40, 3):
        # Every third candidate repeats the one before it, as memories written twice do.
        vectors[copy_at] = list(vectors[copy_at - 1])
    rows = [row(vector) for vector in vectors]

    # Pure relevance: each pair of copies ties, and the first of a tie is picked first.
    picked, scores = maximal_marginal_relevance(rows, query, lambda_=1.0, limit=40)

    order = [rows.index(hit) for hit in picked]
    for copy_at in range(1, 40, 3):
        assert scores[rows[copy_at].id] == scores[rows[copy_at - 1].id]
        assert order.index(copy_at - 1) + 1 == order.index(copy_at)


def test_a_candidate_without_a_vector_keeps_its_cosine_and_is_never_redundant() -> None:
    query = [1.0, 0.0]
    first = row(unit(1.0, 0.0))
    twin = row(unit(1.0, 0.0))
    unvectored = row(None, vector_cosine=0.4)

    picked, scores = maximal_marginal_relevance(
        [first, twin, unvectored], query, lambda_=0.5, limit=2
    )

    # The twin's redundancy (1.0) puts it below the candidate with no vector (0.5 * 0.4).
    assert [hit.id for hit in picked] == [first.id, unvectored.id]
    assert math.isclose(scores[unvectored.id], 0.2)


def test_a_candidate_pointing_away_from_the_only_pick_gains_from_it() -> None:
    query = [1.0, 0.0, 0.0]
    best = row(unit(1.0, 1.0, 0.0))
    away = row(unit(0.2, -0.98, 0.0))
    aside = row([0.7, -0.205, math.sqrt(1 - 0.49 - 0.205**2)])

    picked, scores = maximal_marginal_relevance([best, aside, away], query, lambda_=0.5, limit=2)

    # Its redundancy is its cosine to the one pick, negative here: that lifts it above the
    # more relevant `aside` (0.5 * 0.7 - 0.5 * 0.35 = 0.175).
    cosine = float(np.dot(unit(0.2, -0.98, 0.0), unit(1.0, 1.0, 0.0)))
    assert cosine < 0
    assert [hit.id for hit in picked] == [best.id, away.id]
    assert math.isclose(
        scores[away.id], 0.5 * unit(0.2, -0.98, 0.0)[0] - 0.5 * cosine, abs_tol=1e-6
    )
