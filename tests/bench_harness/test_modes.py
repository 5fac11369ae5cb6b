"""Search modes named on the command line, and the requests they make."""

from __future__ import annotations

import pytest

from benchmarks.modes import DEFAULT_MODES, SEARCH_LIMIT, SearchMode, parse_modes
from service.config import Settings


def test_the_default_modes_compare_the_api_defaults_lexical_vector_and_three_fusions() -> None:
    modes = {mode.name: mode for mode in parse_modes(DEFAULT_MODES)}
    assert modes == {
        "hybrid": SearchMode("hybrid", "hybrid"),
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


def test_the_hybrid_mode_asks_with_the_api_defaults_and_reports_them() -> None:
    settings = Settings(_env_file=None, search_fusion="linear", search_linear_lexical_weight=0.4)
    hybrid = parse_modes("hybrid")[0]
    assert hybrid.request("q", with_decay=True) == {
        "query": "q",
        "limit": SEARCH_LIMIT,
        "mode": "hybrid",
    }
    assert hybrid.effective(settings) == {
        "mode": "hybrid",
        "fusion": "linear",
        "linear_lexical_weight": 0.4,
        "from_settings": True,
    }
    rrf_settings = settings.model_copy(update={"search_fusion": "rrf", "search_rrf_k": 9})
    assert hybrid.effective(rrf_settings)["rrf_k"] == 9


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


def test_the_mmr_mode_asks_with_the_api_defaults_and_a_context_blocks_lambda() -> None:
    default, relevance_only = parse_modes("hybrid-mmr,hybrid-mmr-l1")
    assert default.request("q", with_decay=True) == {
        "query": "q",
        "limit": SEARCH_LIMIT,
        "mode": "hybrid",
        "mmr_lambda": 0.7,
    }
    assert relevance_only.request("q", with_decay=True)["mmr_lambda"] == 1.0
    assert default.effective(Settings(_env_file=None)) == {
        "mode": "hybrid",
        "mmr_lambda": 0.7,
        "from_settings": True,
    }
    with pytest.raises(ValueError, match="lambda"):
        parse_modes("hybrid-mmr-l1.5")
