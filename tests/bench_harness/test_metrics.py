"""Ranking metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from benchmarks.metrics import (
    METRIC_NAMES,
    all_gold_recall_at,
    mean_scores,
    ndcg_at,
    percentile,
    recall_at,
    reciprocal_rank,
    score_ranking,
)

GOLD = frozenset({"a", "b"})
# Relevant hits at ranks 1 and 3.
RANKING = [frozenset({"a"}), frozenset({"x"}), frozenset({"b"}), frozenset({"y"})]


def test_recall_at_k_counts_any_gold_turn_within_the_first_k_hits() -> None:
    late = [frozenset({"x"}), frozenset({"y"}), frozenset({"b"})]
    assert recall_at(late, GOLD, 1) == 0.0
    assert recall_at(late, GOLD, 2) == 0.0
    assert recall_at(late, GOLD, 3) == 1.0
    assert recall_at([], GOLD, 10) == 0.0


def test_all_gold_recall_needs_every_gold_turn() -> None:
    assert all_gold_recall_at(RANKING, GOLD, 2) == 0.0
    assert all_gold_recall_at(RANKING, GOLD, 3) == 1.0
    # One hit can stand for two turns the service merged into one memory.
    assert all_gold_recall_at([frozenset({"a", "b"})], GOLD, 1) == 1.0


def test_reciprocal_rank_is_one_over_the_first_relevant_position() -> None:
    assert reciprocal_rank(RANKING, GOLD) == 1.0
    assert reciprocal_rank([frozenset({"x"}), frozenset({"y"}), frozenset({"a"})], GOLD) == (
        pytest.approx(1 / 3)
    )
    assert reciprocal_rank([frozenset({"x"})], GOLD) == 0.0


def test_ndcg_matches_a_hand_computed_value() -> None:
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1/log2(2) + 1/log2(3).
    expected = 1.5 / (1 + 1 / math.log2(3))
    assert ndcg_at(RANKING, GOLD, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.91972, abs=1e-5)
    # One gold turn found at rank 3: 1/log2(4) over an ideal of 1.
    assert ndcg_at([frozenset({"x"}), frozenset({"y"}), frozenset({"a"})], {"a"}, 10) == 0.5
    # Beyond the cut-off nothing counts.
    assert ndcg_at(RANKING, frozenset({"b"}), 2) == 0.0
    assert ndcg_at([frozenset({"b"}), frozenset({"a"})], GOLD, 10) == pytest.approx(1.0)


def test_ndcg_ideal_is_capped_at_k_relevant_hits() -> None:
    gold = frozenset({"a", "b", "c"})
    ranking = [frozenset({"a"}), frozenset({"b"})]
    assert ndcg_at(ranking, gold, 2) == pytest.approx(1.0)


def test_a_question_gets_every_metric_and_means_average_them() -> None:
    first = score_ranking(RANKING, GOLD)
    assert set(first) == set(METRIC_NAMES)
    assert first["R@1"] == 1.0
    assert first["AllR@10"] == 1.0
    second = score_ranking([frozenset({"x"})] * 4 + [frozenset({"a"})], GOLD)
    assert (second["R@1"], second["R@5"], second["MRR"]) == (0.0, 1.0, 0.2)
    assert second["AllR@10"] == 0.0
    means = mean_scores([first, second])
    assert means["R@1"] == 0.5
    assert means["MRR"] == pytest.approx(0.6)
    assert mean_scores([]) == {}


def test_percentiles_interpolate_between_order_statistics() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
