"""A bounded set of keys that each expire a while after they were added: process-local
memory of "seen lately", which a restart or another replica simply does not have."""

from __future__ import annotations

import time
from collections.abc import Hashable
from datetime import timedelta
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ExpiringKeys(Generic[K]):
    """Keys held for `ttl` after their latest `add`. Past `kept` keys the set starts again
    rather than grow: forgetting costs the holder time, never correctness."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._ttl = ttl.total_seconds()
        self._kept = kept
        self._until: dict[K, float] = {}

    def __contains__(self, key: K) -> bool:
        until = self._until.get(key)
        return until is not None and until > time.monotonic()

    def add(self, key: K) -> None:
        if len(self._until) >= self._kept and key not in self._until:
            self._until.clear()
        self._until[key] = time.monotonic() + self._ttl

    def discard(self, key: K) -> None:
        self._until.pop(key, None)
