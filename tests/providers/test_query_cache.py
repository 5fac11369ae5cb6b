"""The query-vector LRU: same vectors as the embedder, bounded, keyed by model and text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from service.providers import EmbedderUnavailable
from service.providers.query_cache import QueryEmbeddingCache, cache_query_embeddings


class CountingEmbedder:
    """Deterministic vectors per (model, text); counts the calls that reach it."""

    dims = 4

    def __init__(self) -> None:
        self.model_name = "model-a"
        self.query_calls: list[str] = []
        self.fail = False

    def _vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(abs(hash((self.model_name, text))) % 2**32)
        vector = rng.normal(size=self.dims)
        return [float(v) for v in (vector / np.linalg.norm(vector)).astype(np.float32)]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        if self.fail:
            raise EmbedderUnavailable("down")
        self.query_calls.append(text)
        return self._vector(text)

    async def aclose(self) -> None:
        return None


async def test_a_repeated_query_is_served_from_the_cache_with_the_same_vector() -> None:
    inner = CountingEmbedder()
    cache = QueryEmbeddingCache(inner, max_entries=8)
    first = await cache.embed_query("where does my sister live")
    again = await cache.embed_query("where does my sister live")
    assert again == first == inner._vector("where does my sister live")
    assert inner.query_calls == ["where does my sister live"]
    assert (cache.hits, cache.misses) == (1, 1)
    # Writes are never cached: memory texts go to the embedder every time.
    await cache.embed(["a memory"])
    await cache.embed(["a memory"])
    assert len(cache) == 1


async def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    inner = CountingEmbedder()
    cache = QueryEmbeddingCache(inner, max_entries=2)
    await cache.embed_query("a")
    await cache.embed_query("b")
    await cache.embed_query("a")  # refreshes "a": "b" is now the oldest
    await cache.embed_query("c")  # evicts "b"
    assert len(cache) == 2
    await cache.embed_query("a")
    await cache.embed_query("b")
    assert inner.query_calls == ["a", "b", "c", "b"]


async def test_another_model_never_gets_the_old_models_vector() -> None:
    inner = CountingEmbedder()
    cache = QueryEmbeddingCache(inner, max_entries=8)
    old = await cache.embed_query("q")
    inner.model_name = "model-b"
    new = await cache.embed_query("q")
    assert new != old and cache.model_name == "model-b"
    assert inner.query_calls == ["q", "q"]


async def test_a_failure_is_not_cached() -> None:
    inner = CountingEmbedder()
    cache = QueryEmbeddingCache(inner, max_entries=8)
    inner.fail = True
    with pytest.raises(EmbedderUnavailable):
        await cache.embed_query("q")
    inner.fail = False
    assert await cache.embed_query("q") == inner._vector("q")
    assert len(cache) == 1


def test_size_zero_leaves_the_embedder_uncached() -> None:
    inner = CountingEmbedder()
    assert cache_query_embeddings(inner, 0) is inner
    assert isinstance(cache_query_embeddings(inner, 4), QueryEmbeddingCache)


def test_an_empty_cache_is_still_an_embedder_in_a_condition() -> None:
    cache = QueryEmbeddingCache(CountingEmbedder(), max_entries=4)
    assert len(cache) == 0
    assert (cache or None) is cache
