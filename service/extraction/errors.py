"""The write path's problems: compaction switched off, or its model unavailable."""

from __future__ import annotations

from service.errors import ModelUnavailable, ServiceUnavailable


class CompactionDisabled(ServiceUnavailable):
    status = 409
    title = "Compaction is off"
    code = "COMPACTION_DISABLED"


class CompactorUnavailable(ModelUnavailable):
    title = "The compaction model is unavailable"
