"""The memories domain's problems."""

from __future__ import annotations

from service.errors import Conflict, NotFound


class MemoryNotFound(NotFound):
    title = "Memory not found"


class DuplicateMemory(Conflict):
    title = "An identical memory exists"
    code = "DUPLICATE_MEMORY"
