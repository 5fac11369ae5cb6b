"""The fusion statement's parameters and filters for tests that call the repository directly."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service.auth.owner import Owner
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


def filter_with_every_condition(owners: list[Owner]) -> MemoryFilter:
    """A filter of `owners` that sets every condition a filter can set (one value each): what
    must reach every column a filter tests."""
    return MemoryFilter.build(
        owners,
        kinds=["semantic"],
        categories=["food"],
        lifecycles=["confirmed"],
        created_after=datetime(2026, 1, 1, tzinfo=UTC),
        created_before=datetime(2027, 1, 1, tzinfo=UTC),
        event_after=datetime(2026, 1, 1, tzinfo=UTC),
        event_before=datetime(2027, 1, 1, tzinfo=UTC),
    )
