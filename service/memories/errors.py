from __future__ import annotations

from service.errors import Conflict, NotFound, ValidationFailed


class SecretRefused(ValidationFailed):
    title = "Secret or personal data refused"
    code = "SECRET_REFUSED"


class MemoryNotFound(NotFound):
    title = "Memory not found"


class DuplicateMemory(Conflict):
    title = "An identical memory exists"
    code = "DUPLICATE_MEMORY"
