"""MMR picks by relevance (the final score, relative to the best candidate's) against redundancy,
one candidate at a time: the greedy choice worked out by hand, relevance alone keeping the fused
order, copies of one vector tied (kept in fused order), candidates without a vector, and
repeats (one episode on other days, one text twice) left until nothing else is."""

from __future__ import annotations

import math
import uuid

import numpy as np

from service.memories.fusion import SearchRow
from service.memories.search import maximal_marginal_relevance, mmr_candidates


def row(embedding: list[float] | None, final_score: float) -> SearchRow:
    return SearchRow(
        record={"id": uuid.uuid4(), "final_score": final_score},
        embedding=None if embedding is None else np.asarray(embedding),
    )


def unit(*values: float) -> list[float]:
    norm = math.sqrt(sum(value * value for value in values))
    return [value / norm for value in values]


def test_each_pick_weighs_relevance_against_the_closest_pick_so_far() -> None:
    best = row(unit(1.0, 0.1, 0.0), final_score=2.0)
    copy_of_best = row(unit(1.0, 0.12, 0.0), final_score=1.9)
    different = row(unit(0.6, 0.0, 0.8), final_score=1.2)

    picked, scores = maximal_marginal_relevance(
        [best, copy_of_best, different], lambda_=0.5, limit=3
    )

    # First: the most relevant. Second: `different` (0.5*0.6 - 0.5*cos(different, best)) beats
    # the near copy, whose redundancy is ~1. Third: the copy, against its closest pick.
    assert [hit.id for hit in picked] == [best.id, different.id, copy_of_best.id]
    assert scores[best.id] == 0.5
    cosine = float(np.dot(unit(0.6, 0.0, 0.8), unit(1.0, 0.1, 0.0)))
    assert math.isclose(scores[different.id], 0.5 * 0.6 - 0.5 * cosine, abs_tol=1e-6)
    closest = float(np.dot(unit(1.0, 0.12, 0.0), unit(1.0, 0.1, 0.0)))
    assert math.isclose(scores[copy_of_best.id], 0.5 * 0.95 - 0.5 * closest, abs_tol=1e-6)


def test_relevance_alone_keeps_the_fused_order_whatever_the_vectors() -> None:
    generator = np.random.default_rng(3)
    finals = sorted(generator.uniform(0.0, 2.0, size=30), reverse=True)
    rows = [row(unit(*generator.normal(size=16)), final) for final in finals]

    for limit in (1, 5, 30):
        picked, scores = maximal_marginal_relevance(rows, lambda_=1.0, limit=limit)

        assert picked == rows[:limit]
        assert [scores[hit.id] for hit in picked] == [final / finals[0] for final in finals][:limit]


def test_copies_of_one_vector_score_alike_and_keep_their_fused_order() -> None:
    generator = np.random.default_rng(7)
    vectors = [unit(*generator.normal(size=384)) for _ in range(40)]
    finals = list(generator.uniform(0.0, 1.0, size=40))
    for copy_at in range(1, 40, 3):
        # Every third candidate repeats the one before it, as memories written twice do.
        vectors[copy_at] = list(vectors[copy_at - 1])
        finals[copy_at] = finals[copy_at - 1]
    rows = [row(vector, final) for vector, final in zip(vectors, finals, strict=True)]

    # Pure relevance: each pair of copies ties, and the first of a tie is picked first.
    picked, scores = maximal_marginal_relevance(rows, lambda_=1.0, limit=40)

    order = [rows.index(hit) for hit in picked]
    for copy_at in range(1, 40, 3):
        assert scores[rows[copy_at].id] == scores[rows[copy_at - 1].id]
        assert order.index(copy_at - 1) + 1 == order.index(copy_at)


def test_a_candidate_without_a_vector_keeps_its_relevance_and_is_never_redundant() -> None:
    first = row(unit(1.0, 0.0), final_score=1.0)
    twin = row(unit(1.0, 0.0), final_score=1.0)
    unvectored = row(None, final_score=0.4)

    picked, scores = maximal_marginal_relevance([first, twin, unvectored], lambda_=0.5, limit=2)

    # The twin's redundancy (1.0) puts it below the candidate with no vector (0.5 * 0.4).
    assert [hit.id for hit in picked] == [first.id, unvectored.id]
    assert math.isclose(scores[unvectored.id], 0.2)


def test_a_candidate_pointing_away_from_the_only_pick_gains_from_it() -> None:
    best = row(unit(1.0, 1.0, 0.0), final_score=1.0)
    away = row(unit(0.2, -0.98, 0.0), final_score=0.2)
    aside = row([0.7, -0.205, math.sqrt(1 - 0.49 - 0.205**2)], final_score=0.7)

    picked, scores = maximal_marginal_relevance([best, aside, away], lambda_=0.5, limit=2)

    # Its redundancy is its cosine to the one pick, negative here: that lifts it above the
    # more relevant `aside` (0.5 * 0.7 - 0.5 * 0.35 = 0.175).
    cosine = float(np.dot(unit(0.2, -0.98, 0.0), unit(1.0, 1.0, 0.0)))
    assert cosine < 0
    assert [hit.id for hit in picked] == [best.id, away.id]
    assert math.isclose(scores[away.id], 0.5 * 0.2 - 0.5 * cosine, abs_tol=1e-6)


def test_no_candidate_above_zero_leaves_the_fused_order_to_diversity() -> None:
    first = row(unit(1.0, 0.0), final_score=0.0)
    twin = row(unit(1.0, 0.0), final_score=0.0)
    other = row(unit(0.0, 1.0), final_score=0.0)

    picked, _ = maximal_marginal_relevance([first, twin, other], lambda_=0.5, limit=3)

    assert [hit.id for hit in picked] == [first.id, other.id, twin.id]


def said(text: str, kind: str, embedding: list[float], final_score: float) -> SearchRow:
    return SearchRow(
        record={"id": uuid.uuid4(), "final_score": final_score, "text": text, "kind": kind},
        embedding=np.asarray(embedding),
    )


def test_an_episode_repeated_on_other_days_waits_until_nothing_else_is_left() -> None:
    """The copies share the question's words, so each far outscores the distinct episode at
    0.7 (0.7 * 0.95 - 0.3 * 0.93 against 0.7 * 0.25 - 0.3 * 0.4): redundancy alone keeps
    picking them."""
    run = unit(1.0, 0.0, 0.0)
    copies = [
        said(f"On 2026-{month:02d}-11 Ada went for a run along the  coast.", "episodic", run, 0.95)
        for month in range(1, 10)
    ]
    copies[1] = said("on 2026-02-19 ada went for a run along the coast.", "episodic", run, 0.95)
    race = said("Ada ran her first 10k race in Porto.", "episodic", unit(0.4, 0.9, 0.0), 0.25)
    thanks = said("thanks", "episodic", unit(0.2, 0.0, 1.0), 0.1)
    rows = [*copies, race, thanks]

    picked, _ = maximal_marginal_relevance(rows, lambda_=0.7, limit=5)

    assert [hit.id for hit in picked] == [
        copies[0].id,
        race.id,
        thanks.id,
        *(copy.id for copy in copies[1:3]),
    ]
    # Relevance alone keeps the fused order, repeats and all.
    alone, _ = maximal_marginal_relevance(rows, lambda_=1.0, limit=5)
    assert alone == rows[:5]


def test_facts_that_differ_in_their_numbers_are_not_repeats() -> None:
    near = unit(1.0, 0.01, 0.0)
    first = said("Tom's phone number is 555-1234.", "semantic", unit(1.0, 0.0, 0.0), 1.0)
    second = said("Tom's phone number is 555-9876.", "semantic", near, 0.95)
    twin = said("tom's phone number is  555-1234.", "semantic", unit(1.0, 0.0, 0.0), 0.9)
    other = said("Tom lives in Porto.", "semantic", unit(0.0, 1.0, 0.0), 0.2)

    picked, _ = maximal_marginal_relevance([first, second, twin, other], lambda_=0.7, limit=3)

    # The second number outscores `other` on relevance; only the exact copy waits.
    assert [hit.id for hit in picked] == [first.id, second.id, other.id]


def test_a_repeat_takes_no_place_among_the_candidates_mmr_weighs() -> None:
    run = unit(1.0, 0.0)
    copies = [
        said(f"On 2026-01-{day:02d} Gus went for a run.", "episodic", run, 0.9)
        for day in range(1, 9)
    ]
    others = [
        said(f"Gus {done}.", "episodic", unit(0.0, 1.0), 0.2)
        for done in ("read", "swam", "cooked", "sang", "slept")
    ]
    rows = [*copies, *others]

    assert mmr_candidates(rows, 3, 0.7) == [*copies, *others[:2]]
    # Relevance alone needs no more than the depth; distinct candidates fill it as they come.
    assert mmr_candidates(rows, 3, 1.0) == copies[:3]
    assert mmr_candidates(others, 3, 0.7) == others[:3]
    assert mmr_candidates(rows, 30, 0.7) == rows
