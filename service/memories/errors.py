from __future__ import annotations

from service.errors import Conflict, NotFound, OrgWriteForbidden


class MemoryNotFound(NotFound):
    title = "Memory not found"


class OrgMemoryWriteForbidden(OrgWriteForbidden):
    title = "Organization memory is admin-only"


class DuplicateMemory(Conflict):
    title = "An identical memory exists"
    code = "DUPLICATE_MEMORY"
