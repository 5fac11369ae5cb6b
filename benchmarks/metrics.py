"""Ranking metrics over turn ids, and latency percentiles.

A ranking is the list of hits a search returned, best first; each hit is the set of turn ids its
memory stands for (one, or several when the service merged identical turns into one memory).
Relevance is binary: a hit is relevant when it stands for any gold turn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set

Ranking = Sequence[Set[str]]

RECALL_DEPTHS = (1, 5, 10, 30)
ALL_GOLD_DEPTH = 10
NDCG_DEPTH = 10
METRIC_NAMES = (
    *(f"R@{k}" for k in RECALL_DEPTHS),
    f"AllR@{ALL_GOLD_DEPTH}",
    "MRR",
    f"nDCG@{NDCG_DEPTH}",
)


def recall_at(ranking: Ranking, gold: Set[str], k: int) -> float:
    """1.0 when any gold turn is among the first k hits, else 0.0."""
    return 1.0 if any(hit & gold for hit in ranking[:k]) else 0.0


def all_gold_recall_at(ranking: Ranking, gold: Set[str], k: int) -> float:
    """1.0 when every gold turn is among the first k hits (multi-evidence questions), else 0.0."""
    found: set[str] = set().union(*ranking[:k])
    return 1.0 if gold <= found else 0.0


def reciprocal_rank(ranking: Ranking, gold: Set[str]) -> float:
    """1 / the position of the first relevant hit; 0.0 when none was returned."""
    for position, hit in enumerate(ranking, start=1):
        if hit & gold:
            return 1.0 / position
    return 0.0


def ndcg_at(ranking: Ranking, gold: Set[str], k: int) -> float:
    """Binary-relevance nDCG@k; the ideal ranking puts min(|gold|, k) relevant hits first."""
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(gold), k) + 1))
    if ideal == 0:
        return 0.0
    gained = sum(
        1.0 / math.log2(position + 1)
        for position, hit in enumerate(ranking[:k], start=1)
        if hit & gold
    )
    return gained / ideal


def score_ranking(ranking: Ranking, gold: Set[str]) -> dict[str, float]:
    """Every metric of `METRIC_NAMES` for one question."""
    scores = {f"R@{k}": recall_at(ranking, gold, k) for k in RECALL_DEPTHS}
    scores[f"AllR@{ALL_GOLD_DEPTH}"] = all_gold_recall_at(ranking, gold, ALL_GOLD_DEPTH)
    scores["MRR"] = reciprocal_rank(ranking, gold)
    scores[f"nDCG@{NDCG_DEPTH}"] = ndcg_at(ranking, gold, NDCG_DEPTH)
    return scores


def mean_scores(per_question: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over questions (an empty input gives no metrics)."""
    rows = list(per_question)
    if not rows:
        return {}
    return {name: sum(row[name] for row in rows) / len(rows) for name in METRIC_NAMES}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolating linearly between order statistics."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError("q must lie in [0, 100]")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)
