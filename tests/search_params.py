"""The fusion statement's parameters for tests that call the repository directly."""

from __future__ import annotations

from typing import Any

from service.memories.filters import MemoryFilter
from service.memories.fusion import SearchParams


def search_params(memory_filter: MemoryFilter, query: str, **changes: Any) -> SearchParams:
    """`SearchParams` for `query` over `memory_filter`: a lexical RRF search (k 5) of pool 100
    and limit 10, the conversation evidence and priors at 0.5, no recency or confidence decay;
    `changes` set whatever a test exercises."""
    values: dict[str, Any] = {
        "filter": memory_filter,
        "query": query,
        "query_embedding": None,
        "use_lexical": True,
        "use_vector": False,
        "pool": 100,
        "limit": 10,
        "fusion": "rrf",
        "rrf_k": 5,
        "lexical_weight": 0.5,
        "neighbour_weight": 0.5,
        "thread_weight": 0.5,
        "speaker_weight": 0.5,
        "date_weight": 0.5,
        "window_start": None,
        "window_end": None,
        "recency_weight": 0,
        "confidence_weight": 0,
        "half_life_semantic": 0,
        "half_life_episodic": 0,
        "half_life_procedural": 0,
        "with_embeddings": False,
    }
    return SearchParams(**(values | changes))
