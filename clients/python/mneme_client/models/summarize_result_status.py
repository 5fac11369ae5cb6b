from enum import StrEnum


class SummarizeResultStatus(StrEnum):
    EMPTY = "empty"
    NOT_DUE = "not_due"
    SUPERSEDED = "superseded"
    WRITTEN = "written"

    def __str__(self) -> str:
        return str(self.value)
