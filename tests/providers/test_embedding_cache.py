"""The vector LRU: same vectors as the embedder, bounded, keyed by model and text, questions
and texts written kept apart."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from service.providers import EmbedderUnavailable
from service.providers.embedding_cache import EmbeddingCache, cache_embeddings


class CountingEmbedder:
    """Deterministic vectors per (model, text); counts the calls that reach it."""

    dims = 4

    def __init__(self) -> None:
        self.model_name = "model-a"
        self.query_calls: list[str] = []
        self.text_calls: list[list[str]] = []
        self.fail = False

    def _vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(abs(hash((self.model_name, text))) % 2**32)
        vector = rng.normal(size=self.dims)
        return [float(v) for v in (vector / np.linalg.norm(vector)).astype(np.float32)]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise EmbedderUnavailable("down")
        self.text_calls.append(list(texts))
        return [self._vector("text: " + text) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        if self.fail:
            raise EmbedderUnavailable("down")
        self.query_calls.append(text)
        return self._vector(text)

    async def aclose(self) -> None:
        return None


async def test_a_repeated_query_is_served_from_the_cache_with_the_same_vector() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=8)
    first = await cache.embed_query("where does my sister live")
    again = await cache.embed_query("where does my sister live")
    assert again == first == inner._vector("where does my sister live")
    assert inner.query_calls == ["where does my sister live"]
    assert (cache.hits, cache.misses) == (1, 1)
    assert len(cache) == 1


async def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=2)
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
    cache = EmbeddingCache(inner, max_entries=8)
    old = await cache.embed_query("q")
    inner.model_name = "model-b"
    new = await cache.embed_query("q")
    assert new != old and cache.model_name == "model-b"
    assert inner.query_calls == ["q", "q"]


async def test_a_failure_is_not_cached() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=8)
    inner.fail = True
    with pytest.raises(EmbedderUnavailable):
        await cache.embed_query("q")
    inner.fail = False
    assert await cache.embed_query("q") == inner._vector("q")
    assert len(cache) == 1


def test_size_zero_leaves_the_embedder_uncached() -> None:
    inner = CountingEmbedder()
    assert cache_embeddings(inner, 0) is inner
    assert isinstance(cache_embeddings(inner, 4), EmbeddingCache)


def test_an_empty_cache_is_still_an_embedder_in_a_condition() -> None:
    cache = EmbeddingCache(CountingEmbedder(), max_entries=4)
    assert len(cache) == 0
    assert (cache or None) is cache


async def test_a_text_embedded_before_is_not_sent_again_and_keeps_its_place_in_order() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=8)
    first = await cache.embed(["rows a kayak", "sails"])
    assert first == [inner._vector("text: rows a kayak"), inner._vector("text: sails")]
    again = await cache.embed(["sails", "climbs", "rows a kayak", "climbs"])
    assert again == [
        inner._vector("text: sails"),
        inner._vector("text: climbs"),
        inner._vector("text: rows a kayak"),
        inner._vector("text: climbs"),
    ]
    # Only the new text went to the model, once.
    assert inner.text_calls == [["rows a kayak", "sails"], ["climbs"]]
    assert await cache.embed(["sails"]) == [inner._vector("text: sails")]
    assert inner.text_calls == [["rows a kayak", "sails"], ["climbs"]]


async def test_a_question_and_a_text_of_the_same_words_are_kept_apart() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=8)
    question = await cache.embed_query("kayak")
    [text] = await cache.embed(["kayak"])
    assert question == inner._vector("kayak") and text == inner._vector("text: kayak")
    assert len(cache) == 2


async def test_texts_are_bounded_keyed_by_model_and_a_failure_caches_nothing() -> None:
    inner = CountingEmbedder()
    cache = EmbeddingCache(inner, max_entries=2)
    await cache.embed(["a", "b", "c"])  # "a" is evicted
    await cache.embed(["a"])
    inner.model_name = "model-b"
    await cache.embed(["c"])
    inner.fail = True
    with pytest.raises(EmbedderUnavailable):
        await cache.embed(["d"])
    inner.fail = False
    await cache.embed(["d"])
    assert inner.text_calls == [["a", "b", "c"], ["a"], ["c"], ["d"]]
