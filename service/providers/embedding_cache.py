"""An in-process LRU of vectors, in front of any embedder: questions', and texts written.

Agents ask the same things again (the same question per turn, the context call and a search
for one message); a local model spends ~5 ms of CPU per query, which is half of a search's
time on two cores. A write embeds its texts before its transaction begins, before it knows
whether they are new: a change that repeats the memory's text, a keyed memory put again as it
was, a duplicate. A text embedded in this process before is not sent to the model again,
which with a hosted model is a round trip saved.

Entries are keyed by model and text, so a changed model never serves old vectors; questions
and texts are kept apart (a model may embed them with different prompts), each up to the
cache's size; vectors are kept as float32 (1.5 KB at 384 dimensions) rather than Python
floats. A failure (`EmbedderUnavailable`) propagates and caches nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from service.providers.embedder import (
    Embedder,
    computes_in_process,
    former_model_names,
    lexical_weight_of,
    load_model,
)


class _Vectors:
    """The last `most` vectors put, by key; getting one makes it the newest."""

    def __init__(self, most: int) -> None:
        self._most = most
        self._entries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple[str, str]) -> list[float] | None:
        cached = self._entries.get(key)
        if cached is None:
            return None
        self._entries.move_to_end(key)
        # pgvector stores float32, so the rounding changes nothing the database sees.
        vector: list[float] = cached.tolist()
        return vector

    def put(self, key: tuple[str, str], vector: Sequence[float]) -> None:
        self._entries[key] = np.asarray(vector, dtype=np.float32)
        self._entries.move_to_end(key)
        while len(self._entries) > self._most:
            self._entries.popitem(last=False)


class EmbeddingCache:
    """An `Embedder` that remembers the last `max_entries` question vectors of `inner`, and
    as many vectors of texts written."""

    def __init__(self, inner: Embedder, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.inner = inner
        self._questions = _Vectors(max_entries)
        self._texts = _Vectors(max_entries)
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

    @property
    def lexical_weight(self) -> float | None:
        return lexical_weight_of(self.inner)

    @property
    def former_model_names(self) -> tuple[str, ...]:
        return former_model_names(self.inner)

    def __len__(self) -> int:
        return len(self._questions) + len(self._texts)

    def __bool__(self) -> bool:
        # An embedder is always there: without this, `__len__` would make an empty cache
        # falsy, and `cache or fallback` would silently pick the fallback.
        return True

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        model = self.inner.model_name
        known: dict[str, list[float]] = {}
        for text in dict.fromkeys(texts):
            cached = self._texts.get((model, text))
            if cached is not None:
                known[text] = cached
        missing = [text for text in dict.fromkeys(texts) if text not in known]
        if missing:
            for text, vector in zip(missing, await self.inner.embed(missing), strict=True):
                self._texts.put((model, text), vector)
                known[text] = vector
        return [known[text] for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        key = (self.inner.model_name, text)
        cached = self._questions.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        fresh = await self.inner.embed_query(text)
        self.misses += 1
        self._questions.put(key, fresh)
        return fresh

    async def load(self) -> None:
        await load_model(self.inner)

    async def aclose(self) -> None:
        await self.inner.aclose()


def cache_embeddings(embedder: Embedder, max_entries: int) -> Embedder:
    """`embedder` behind a vector LRU of `max_entries` (questions and texts each); 0 leaves it
    uncached."""
    return EmbeddingCache(embedder, max_entries) if max_entries > 0 else embedder
