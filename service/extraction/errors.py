from __future__ import annotations

from service.errors import ServiceUnavailable


class CompactionDisabled(ServiceUnavailable):
    status = 409
    title = "Compaction is off"
    code = "COMPACTION_DISABLED"


class CompactorUnavailable(ServiceUnavailable):
    title = "The compaction model is unavailable"
    code = "LLM_UNAVAILABLE"
