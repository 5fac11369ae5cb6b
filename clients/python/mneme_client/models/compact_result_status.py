from enum import StrEnum


class CompactResultStatus(StrEnum):
    COMPACTED = "compacted"
    NOTHING_TO_COMPACT = "nothing_to_compact"
    UNCHANGED = "unchanged"

    def __str__(self) -> str:
        return str(self.value)
