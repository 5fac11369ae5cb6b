from __future__ import annotations

from service.errors import Conflict, Forbidden, NotFound, ValidationFailed


class SecretRefused(ValidationFailed):
    title = "Secret or personal data refused"
    code = "SECRET_REFUSED"


class MemoryNotFound(NotFound):
    title = "Memory not found"


class OrgMemoryWriteForbidden(Forbidden):
    title = "Organization memory is admin-only"
    code = "ORG_WRITE_FORBIDDEN"


class DuplicateMemory(Conflict):
    title = "An identical memory exists"
    code = "DUPLICATE_MEMORY"
