from enum import StrEnum


class QueuedJobState(StrEnum):
    PICKED = "picked"
    QUEUED = "queued"

    def __str__(self) -> str:
        return str(self.value)
