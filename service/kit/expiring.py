"""Bounded sets of keys (and maps of keys to values) that each expire a while after they were
added: process-local memory of "seen lately", which a restart or another replica simply does
not have."""

from __future__ import annotations

import time
from collections.abc import Hashable
from datetime import timedelta
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ExpiringValues(Generic[K, V]):
    """A value per key, held for `ttl` after its latest `put`. Past `kept` keys the map starts
    again rather than grow: forgetting costs the holder time, never correctness."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._ttl = ttl.total_seconds()
        self._kept = kept
        self._held: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        held = self._held.get(key)
        return held[1] if held is not None and held[0] > time.monotonic() else None

    def put(self, key: K, value: V) -> None:
        if len(self._held) >= self._kept and key not in self._held:
            self._held.clear()
        self._held[key] = (time.monotonic() + self._ttl, value)

    def discard(self, key: K) -> None:
        self._held.pop(key, None)


class ExpiringKeys(Generic[K]):
    """Keys held for `ttl` after their latest `add` (`ExpiringValues` without the values)."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._values: ExpiringValues[K, bool] = ExpiringValues(ttl, kept)

    def __contains__(self, key: K) -> bool:
        return self._values.get(key) is not None

    def add(self, key: K) -> None:
        self._values.put(key, True)

    def discard(self, key: K) -> None:
        self._values.discard(key)
