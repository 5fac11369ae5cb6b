"""Search modes a benchmark compares, named on the command line (`--modes`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from service.config import Settings
from service.memories.search import linear_lexical_weight

SEARCH_LIMIT = 30
DEFAULT_MODES = "hybrid,lexical,vector,hybrid-rrf,hybrid-rrf-k60,hybrid-linear-w0.5"
MODE_GRAMMAR = (
    "hybrid (the API's defaults) | lexical | vector | hybrid-rrf[-k<N>]"
    " | hybrid-linear[-w<weight 0..1>] | hybrid-mmr[-l<lambda 0..1>]"
)
# A context block's `mmr_lambda` when its request names none (`ContextRequest`).
CONTEXT_MMR_LAMBDA = 0.7

_MODE_NAME = re.compile(
    r"hybrid|lexical|vector"
    r"|hybrid-rrf(?:-k(?P<k>\d+))?"
    r"|hybrid-(?P<linear>linear)(?:-w(?P<weight>\d+(?:\.\d+)?))?"
    r"|hybrid-(?P<mmr>mmr)(?:-l(?P<lambda>\d+(?:\.\d+)?))?"
)
# The API's bounds for rrf_k (SearchRequest); checked here to fail before any work is done.
_RRF_K_RANGE = (1, 1000)


@dataclass(frozen=True)
class SearchMode:
    """One way of searching, as the request fields that select it (absent = the setting)."""

    name: str
    mode: Literal["lexical", "vector", "hybrid"]
    fusion: Literal["rrf", "linear"] | None = None
    rrf_k: int | None = None
    linear_lexical_weight: float | None = None
    mmr_lambda: float | None = None

    def request(self, query: str, *, with_decay: bool) -> dict[str, Any]:
        """The search request body for `query` in this mode."""
        body: dict[str, Any] = {"query": query, "limit": SEARCH_LIMIT, "mode": self.mode}
        if self.fusion is not None:
            body["fusion"] = self.fusion
        if self.rrf_k is not None:
            body["rrf_k"] = self.rrf_k
        if self.linear_lexical_weight is not None:
            body["linear_lexical_weight"] = self.linear_lexical_weight
        if self.mmr_lambda is not None:
            body["mmr_lambda"] = self.mmr_lambda
        if not with_decay:
            # Relevance alone, for comparing rankings without the service's age and trust priors.
            body["recency_weight"] = 0.0
            body["confidence_weight"] = 0.0
        return body

    def effective(self, settings: Settings) -> dict[str, Any]:
        """The fusion parameters in force, the settings filling what the request leaves out."""
        if self.mode != "hybrid":
            return {"mode": self.mode}
        if self.mmr_lambda is not None:
            # The API's defaults, re-ranked by MMR as a context block's sections are.
            return {"mode": "hybrid", "mmr_lambda": self.mmr_lambda, "from_settings": True}
        fusion = settings.search_fusion if self.fusion is None else self.fusion
        if fusion == "linear":
            weight = self.linear_lexical_weight
            return {
                "mode": "hybrid",
                "fusion": "linear",
                "linear_lexical_weight": (
                    linear_lexical_weight(settings) if weight is None else weight
                ),
                "from_settings": self.fusion is None or weight is None,
            }
        return {
            "mode": "hybrid",
            "fusion": "rrf",
            "rrf_k": settings.search_rrf_k if self.rrf_k is None else self.rrf_k,
            "from_settings": self.fusion is None or self.rrf_k is None,
        }


def parse_modes(spec: str) -> tuple[SearchMode, ...]:
    """Modes from a comma-separated list such as the default `DEFAULT_MODES`."""
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if not names:
        raise ValueError(f"no search mode given; use {MODE_GRAMMAR}")
    if len(set(names)) != len(names):
        raise ValueError(f"a search mode is listed twice: {spec}")
    return tuple(_parse_mode(name) for name in names)


def _parse_mode(name: str) -> SearchMode:
    match = _MODE_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown search mode {name!r}; use {MODE_GRAMMAR}")
    if name == "lexical":
        return SearchMode(name, "lexical")
    if name == "vector":
        return SearchMode(name, "vector")
    if name == "hybrid":
        return SearchMode(name, "hybrid")
    if match.group("mmr"):
        given = match.group("lambda")
        mmr_lambda = CONTEXT_MMR_LAMBDA if given is None else float(given)
        if not 0 <= mmr_lambda <= 1:
            raise ValueError(f"{name}: lambda must lie in [0, 1]")
        return SearchMode(name, "hybrid", mmr_lambda=mmr_lambda)
    if match.group("linear"):
        weight = match.group("weight")
        lexical_weight = None if weight is None else float(weight)
        if lexical_weight is not None and not 0 <= lexical_weight <= 1:
            raise ValueError(f"{name}: the lexical weight must lie in [0, 1]")
        return SearchMode(name, "hybrid", "linear", linear_lexical_weight=lexical_weight)
    k = match.group("k")
    rrf_k = None if k is None else int(k)
    if rrf_k is not None and not _RRF_K_RANGE[0] <= rrf_k <= _RRF_K_RANGE[1]:
        raise ValueError(f"{name}: k must lie in [{_RRF_K_RANGE[0]}, {_RRF_K_RANGE[1]}]")
    return SearchMode(name, "hybrid", "rrf", rrf_k=rrf_k)
