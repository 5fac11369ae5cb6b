"""The memories domain's problems."""

from __future__ import annotations

from service.errors import Conflict, NotFound


class MemoryNotFound(NotFound):
    title = "Memory not found"


class DuplicateMemory(Conflict):
    title = "An identical memory exists"
    code = "DUPLICATE_MEMORY"


class StoreKeyTaken(Conflict):
    """A keyed memory's move (a new category) onto the address another memory of its owner
    holds: the kind, category and key that find one memory."""

    title = "Another memory holds that key"
