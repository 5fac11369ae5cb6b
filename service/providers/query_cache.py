"""An in-process LRU of query vectors, in front of any embedder.

Agents ask the same things again (the same question per turn, the context call and a search
for one message); a local model spends ~5 ms of CPU per query, which is half of a search's
time on two cores. Only `embed_query` is cached: memory texts are embedded once at write
time anyway. Entries are keyed by model and text, so a changed model never serves old
vectors; vectors are kept as float32 (1.5 KB at 384 dimensions) rather than Python floats.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from service.providers.embedder import Embedder, computes_in_process, load_model


class QueryEmbeddingCache:
    """An `Embedder` that remembers the last `max_entries` query vectors of `inner`."""

    def __init__(self, inner: Embedder, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @model_name.setter
    def model_name(self, value: str) -> None:
        self.inner.model_name = value

    @property
    def dims(self) -> int:
        return self.inner.dims

    @dims.setter
    def dims(self, value: int) -> None:
        self.inner.dims = value

    @property
    def computes_in_process(self) -> bool:
        return computes_in_process(self.inner)

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        # An embedder is always there: without this, `__len__` would make an empty cache
        # falsy, and `cache or fallback` would silently pick the fallback.
        return True

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        key = (self.inner.model_name, text)
        cached = self._entries.get(key)
        if cached is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            # pgvector stores float32, so the rounding changes nothing the database sees.
            vector: list[float] = cached.tolist()
            return vector
        # A failure (EmbedderUnavailable) propagates and caches nothing.
        fresh = await self.inner.embed_query(text)
        self.misses += 1
        self._entries[key] = np.asarray(fresh, dtype=np.float32)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
        return fresh

    async def load(self) -> None:
        await load_model(self.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()


def cache_query_embeddings(embedder: Embedder, max_entries: int) -> Embedder:
    """`embedder` behind a query-vector LRU of `max_entries`; 0 leaves it uncached."""
    return QueryEmbeddingCache(embedder, max_entries) if max_entries > 0 else embedder
