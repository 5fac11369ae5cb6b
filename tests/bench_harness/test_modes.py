"""Search modes named on the command line, and the requests they make."""

from __future__ import annotations

import pytest

from benchmarks.modes import DEFAULT_MODES, SEARCH_LIMIT, SearchMode, parse_modes
from service.config import Settings


def test_the_default_modes_compare_lexical_vector_and_three_fusions() -> None:
    modes = {mode.name: mode for mode in parse_modes(DEFAULT_MODES)}
    assert modes == {
        "lexical": SearchMode("lexical", "lexical"),
        "vector": SearchMode("vector", "vector"),
        "hybrid-rrf": SearchMode("hybrid-rrf", "hybrid", "rrf"),
        "hybrid-rrf-k60": SearchMode("hybrid-rrf-k60", "hybrid", "rrf", rrf_k=60),
        "hybrid-linear-w0.5": SearchMode(
            "hybrid-linear-w0.5", "hybrid", "linear", linear_lexical_weight=0.5
        ),
    }


def test_requests_switch_decay_off_unless_asked() -> None:
    mode = parse_modes("hybrid-rrf-k60")[0]
    assert mode.request("where?", with_decay=False) == {
        "query": "where?",
        "limit": SEARCH_LIMIT,
        "mode": "hybrid",
        "fusion": "rrf",
        "rrf_k": 60,
        "recency_weight": 0.0,
        "confidence_weight": 0.0,
    }
    with_decay = mode.request("where?", with_decay=True)
    assert "recency_weight" not in with_decay
    assert "confidence_weight" not in with_decay


def test_parameters_left_out_of_a_request_are_reported_from_the_settings() -> None:
    settings = Settings(_env_file=None, search_rrf_k=7, search_linear_lexical_weight=0.3)
    rrf, linear, k60 = parse_modes("hybrid-rrf, hybrid-linear ,hybrid-rrf-k60")
    assert "rrf_k" not in rrf.request("q", with_decay=False)
    assert rrf.effective(settings) == {
        "mode": "hybrid",
        "fusion": "rrf",
        "rrf_k": 7,
        "from_settings": True,
    }
    assert linear.effective(settings)["linear_lexical_weight"] == 0.3
    assert k60.effective(settings)["rrf_k"] == 60
    assert parse_modes("vector")[0].effective(settings) == {"mode": "vector"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "no search mode"),
        ("lexical,lexical", "listed twice"),
        ("bm25", "unknown search mode"),
        ("hybrid-rrf-k0", "k must lie"),
        ("hybrid-linear-w1.5", "weight must lie"),
    ],
)
def test_bad_mode_lists_are_refused_before_any_work(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_modes(spec)
