"""A keyed memory's address among its owner's memories."""

from __future__ import annotations

from dataclasses import dataclass

from service.memories.schemas import MemoryKind


@dataclass(frozen=True)
class StoreKey:
    """Where a keyed memory lives within its owner's memories: its kind, category and the
    client's key. One memory at most holds each (the unique index `uq_memory_store_key`), and
    the keyed routes read it there."""

    kind: MemoryKind
    category: str | None
    key: str
